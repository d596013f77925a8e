"""Delta tables fixed by CONTRACTS.md, each declared once (schema.py derives its Arrow, Spark
and DDL forms), and the metadata table and snapshot file columns."""

from __future__ import annotations

from collections.abc import Sequence

from spark_jobs.contracts.schema import (
    BINARY,
    BOOLEAN,
    DATE,
    DOUBLE,
    INT,
    LONG,
    STRING,
    TIMESTAMP,
    Column,
    Struct,
    Table,
)

# Where a record came from, in every table that keeps Kafka records.
KAFKA_COORDINATES = (
    Column("topic", STRING),
    Column("partition", INT),
    Column("offset", LONG),
    Column("kafka_timestamp", LONG),
)

# Experiment analytics (CONTRACTS.md section 5): cumulative metrics per group period,
# event type and window, upserted by the primary key. The metric columns (section 4), in
# order; experiments/core/metrics.py declares how each counted one is computed. The live
# table carries the first four; the CUPED sums after them (issue 17) are final-only.
LIVE_METRIC_COLUMNS = ("triggered_users", "volume", "propensity", "volume_sum_squares")
EXPERIMENT_METRIC_COLUMNS = (
    *LIVE_METRIC_COLUMNS,
    "pre_volume", "pre_volume_sum_squares", "pre_volume_x_volume", "pre_volume_x_propensity",
)
TABLE_EXPERIMENT_METRICS = "experiment_metrics"
EXPERIMENT_METRICS = Table(
    TABLE_EXPERIMENT_METRICS,
    (
        Column("experiment_hash", STRING, nullable=False),
        Column("experiment_group", STRING, nullable=False),
        Column("period_start", LONG, nullable=False),
        Column("event_type", STRING, nullable=False),
        Column("window_end", LONG, nullable=False),
        Column("is_control", BOOLEAN),
        *(Column(name, LONG) for name in EXPERIMENT_METRIC_COLUMNS),
        Column("updated_at", TIMESTAMP),  # stamped by the writer, not computed; kept last
    ),
    primary_key=("experiment_hash", "experiment_group", "period_start", "event_type",
                 "window_end"),
)
# Live results (issue 17): one row per group period and event type with the totals of every
# record accepted so far, windows still open included, upserted every micro-batch by
# experiment_metrics. Provisional: the final rows above are the exact ones; a provisional row
# equals the final row of its period's last window once the watermark has passed it.
# `watermark`: the event time (ms) up to which the batch that wrote it was final.
TABLE_PROVISIONAL_METRICS = "experiment_metrics_provisional"
PROVISIONAL_METRICS = Table(
    TABLE_PROVISIONAL_METRICS,
    (
        Column("experiment_hash", STRING, nullable=False),
        Column("experiment_group", STRING, nullable=False),
        Column("period_start", LONG, nullable=False),
        Column("event_type", STRING, nullable=False),
        Column("is_control", BOOLEAN),
        *(Column(name, LONG) for name in LIVE_METRIC_COLUMNS),
        Column("watermark", LONG),
        Column("updated_at", TIMESTAMP),  # stamped by the writer; kept last
    ),
    primary_key=("experiment_hash", "experiment_group", "period_start", "event_type"),
)
TABLE_BATCH_METRICS = "batch_experiment_metrics"  # the daily recomputation of the above
BATCH_EXPERIMENT_METRICS = EXPERIMENT_METRICS.renamed(TABLE_BATCH_METRICS)

# Every rejected or late record of every job, with where it came from.
TABLE_DEAD_LETTERS = "dead_letters"
DEAD_LETTERS = Table(
    TABLE_DEAD_LETTERS,
    (
        Column("job", STRING),
        *KAFKA_COORDINATES,
        Column("key", STRING),
        Column("raw_value", STRING),  # the raw bytes as text (invalid UTF-8 replaced)
        Column("reason", STRING),  # a code of contracts.reasons
        Column("recorded_at", TIMESTAMP),
        # added in the second release (section 9): what is wrong, and the evidence
        Column("detail", STRING),
        Column("raw_bytes", BINARY),  # the first DEAD_LETTER_RAW_BYTES of the message
        Column("raw_length", LONG),  # the message's length in bytes
    ),
)
DEAD_LETTER_RAW_BYTES = 64 << 10  # evidence kept per dead letter (CONTRACTS section 9)

# The records the filter jobs accepted, read by the daily recomputation.
TABLE_RAW_EVENTS = "raw_events"
RAW_EVENTS = Table(
    TABLE_RAW_EVENTS,
    (Column("user_id", LONG), Column("event_type", STRING), Column("ts", LONG),
     *KAFKA_COORDINATES),
)
TABLE_RAW_ACTIVATIONS = "raw_activations"
RAW_ACTIVATIONS = Table(
    TABLE_RAW_ACTIVATIONS,
    (
        Column("user_id", LONG),
        Column("experiment_hash", STRING),
        Column("experiment_group", STRING),
        Column("ts", LONG),
        Column("group_ramp_time", LONG),
        Column("is_control", BOOLEAN),
        *KAFKA_COORDINATES,
    ),
)

# Control plane: alerts sent by DAGs and jobs, and the daily validation results (upserted
# by run, day, case and check, so a retried task replaces its rows).
TABLE_ALERTS = "alerts"
ALERTS = Table(
    TABLE_ALERTS,
    (
        Column("alert_id", STRING, nullable=False),
        Column("created_at", TIMESTAMP, nullable=False),
        Column("source", STRING, nullable=False),
        Column("kind", STRING, nullable=False),
        Column("summary", STRING, nullable=False),
        Column("experiment_hash", STRING),
        Column("experiment_group", STRING),
        Column("window_end", LONG),
        Column("metric", STRING),
        Column("observed", DOUBLE),
        Column("threshold", DOUBLE),
        Column("run_url", STRING),
        Column("details", STRING),  # JSON
        Column("channels", STRING),  # comma-separated
    ),
)
TABLE_VALIDATION_RESULTS = "validation_results"
VALIDATION_RESULTS = Table(
    TABLE_VALIDATION_RESULTS,
    (
        Column("run_id", STRING, nullable=False),
        Column("logical_date", DATE, nullable=False),
        Column("case", STRING, nullable=False),
        Column("check", STRING, nullable=False),
        Column("success", BOOLEAN, nullable=False),
        Column("evaluated", LONG, nullable=False),
        Column("unexpected", LONG, nullable=False),
        Column("max_drift", DOUBLE),
        Column("worst", STRING),  # JSON
        Column("details", STRING),  # JSON
        Column("data_docs", STRING),
        Column("run_url", STRING),
        Column("validated_at", TIMESTAMP, nullable=False),
    ),
    primary_key=("run_id", "logical_date", "case", "check"),
)

# Fraud detection (job fraud_rules, CONTRACTS.md section 7).
TABLE_FRAUD_ALERTS = "fraud_alerts"
FRAUD_ALERTS = Table(
    TABLE_FRAUD_ALERTS,
    (
        Column("rule_id", LONG),
        Column("grouping_key", STRING),
        Column("aggregate", STRING),  # exact decimal text, as in the alert message
        Column("limit", STRING),
        Column("transaction_id", STRING),
        Column("event_time", LONG),
        Column("alert_time", LONG),
        Column("alert", STRING),  # the message published to the alerts topic
        *KAFKA_COORDINATES,
    ),
)

# Training samples (job training_samples, CONTRACTS.md section 8). The labels struct has one
# int per configured signal (samples.signals), in config order: see training_samples().
TABLE_TRAINING_SAMPLES = "training_samples"
TRAINING_SAMPLES = Table(
    TABLE_TRAINING_SAMPLES,
    (
        Column("sample_id", STRING, nullable=False),
        Column("view_id", STRING),
        Column("user_id", LONG),
        Column("post_id", LONG),
        Column("ts", LONG),
        Column("context", STRING),  # JSON
        Column("labels", Struct()),
    ),
    primary_key=("sample_id",),
)
TABLE_ORPHAN_ENGAGEMENTS = "orphan_engagements"
ORPHAN_ENGAGEMENTS = Table(
    TABLE_ORPHAN_ENGAGEMENTS,
    (
        Column("user_id", LONG),
        Column("post_id", LONG),
        Column("view_id", STRING),
        Column("signal", STRING),
        Column("ts", LONG),
        Column("reason", STRING),
        Column("raw_value", STRING),
        *KAFKA_COORDINATES,
    ),
)


def training_samples(signals: Sequence[str]) -> Table:
    """`training_samples` with its labels for these signals (samples.signals)."""
    return TRAINING_SAMPLES.with_struct(
        "labels", (Column(signal, INT, nullable=False) for signal in signals))


# The metadata DB's ramps table and the ramp snapshot file (CONTRACTS.md section 3).
RAMPS_HEADER = ("experiment_hash", "experiment_group", "ramp_ts", "allocation_pct", "is_control")
SNAPSHOT_HEADER = (
    "experiment_hash",
    "experiment_group",
    "group_ramp_time",
    "allocation_pct",
    "is_control",
)
