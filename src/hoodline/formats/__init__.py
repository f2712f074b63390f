"""Message formats: decoding Kafka/file values into Arrow (engine-agnostic, no pyspark)."""
