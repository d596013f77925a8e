"""transformWithState processors: thin Spark adapters around the pure state in spark_jobs.domain."""
