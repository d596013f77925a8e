"""The streaming machinery every system shares: the Kafka source and sink, the Delta lake,
the job runner, checkpoints, progress reports and event time (watermarks that route late
records instead of dropping them)."""
