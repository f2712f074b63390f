"""The streaming pipeline: configuration, error records (engine-agnostic, no pyspark)."""
