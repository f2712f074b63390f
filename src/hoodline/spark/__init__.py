"""The Spark engine of the round driver: the only package that imports pyspark.

* :mod:`.engine` -- :class:`~hoodline.spark.engine.SparkEngine` (the pipeline's default engine)
* :mod:`.job` -- one round's Spark job (reader, assigner and writer stages, result decoding)
* :mod:`.session` -- starting and stopping the SparkSession (local, local-cluster, cluster URLs)
* :mod:`.scratch` -- a session's scratch directory, and the removal of those killed sessions left
* :mod:`.work_dir` -- the executors' work directory of a local-cluster session, removed by its
  last user
* :mod:`.probe` -- executor-side facts (task identity, attempt ids, health probe)
"""
