"""The streaming pipeline, engine-agnostic (no pyspark here, no branches on the source type).

* :mod:`.api` -- ``Pipeline`` / ``run_pipeline``, ``RoundReport``, ``RunSummary`` (start here)
* :mod:`.config` -- the TOML pipeline configuration and its documented options
* :mod:`.driver` -- the round loop: plan / execute / commit / report, retries, the double-commit
  guard; :mod:`.report` -- what it reports
* :mod:`.engine` -- the engine interface the driver runs rounds on (Spark: :mod:`hoodline.spark`)
* :mod:`.tasks` -- what a round's reader, assigner and writer tasks run; :mod:`.write_buffer`
  bounded writer memory
* :mod:`.plugin` -- the connector plug-in contract; :mod:`.plugins` -- the registry by source type
* :mod:`.transform` -- keyed records, delete flags, per-round reduction (shared by connectors)
* :mod:`.checkpoint` -- the source checkpoint stored in every commit's extra metadata
* :mod:`.errors_table` -- bad records as error-table rows
* :mod:`.progress` -- the live per-round display
"""
