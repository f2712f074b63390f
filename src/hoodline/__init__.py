"""hoodline: exactly-once streaming ingestion from Kafka and files into Apache Hudi tables."""

__version__ = "0.1.0"
