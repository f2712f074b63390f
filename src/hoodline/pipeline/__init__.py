"""The streaming pipeline, engine-agnostic (no pyspark here).

* :mod:`.api` -- ``Pipeline`` / ``run_pipeline``, ``RoundReport``, ``RunSummary`` (start here)
* :mod:`.config` -- the TOML pipeline configuration and its documented options
* :mod:`.checkpoint` -- the source checkpoint stored in every commit's extra metadata
* :mod:`.sources` -- Kafka / files adapters: round bounding (driver), plan reading (tasks)
* :mod:`.transform` -- keying records, tombstones and delete flags, per-round reduction
* :mod:`.tasks` -- what reader, assigner and writer tasks run; :mod:`.write_buffer` bounded
  writer memory
* :mod:`.errors_table` -- bad records as error-table rows; :mod:`.test_hooks` test-only pauses
* :mod:`.progress` -- the live per-round display

The round loop that drives it on Spark is :mod:`hoodline.spark.runner`.
"""
