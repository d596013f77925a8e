"""The daily batch recomputation of experiment metrics (checked against the streaming table)."""

TABLE_BATCH_METRICS = "batch_experiment_metrics"
