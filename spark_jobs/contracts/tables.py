"""Delta tables fixed by CONTRACTS.md, and the metadata table and snapshot file columns."""

from __future__ import annotations

TABLE_EXPERIMENT_METRICS = "experiment_metrics"
TABLE_BATCH_METRICS = "batch_experiment_metrics"  # the daily recomputation of the above
TABLE_DEAD_LETTERS = "dead_letters"
TABLE_RAW_EVENTS = "raw_events"
TABLE_RAW_ACTIVATIONS = "raw_activations"
TABLE_ALERTS = "alerts"
TABLE_VALIDATION_RESULTS = "validation_results"

# Fraud detection (job fraud_rules, CONTRACTS.md section 7).
TABLE_FRAUD_ALERTS = "fraud_alerts"

# Training samples (job training_samples, CONTRACTS.md section 8).
TABLE_TRAINING_SAMPLES = "training_samples"
TABLE_ORPHAN_ENGAGEMENTS = "orphan_engagements"

# The metadata DB's ramps table and the ramp snapshot file (CONTRACTS.md section 3).
RAMPS_HEADER = ("experiment_hash", "experiment_group", "ramp_ts", "allocation_pct", "is_control")
SNAPSHOT_HEADER = (
    "experiment_hash",
    "experiment_group",
    "group_ramp_time",
    "allocation_pct",
    "is_control",
)
