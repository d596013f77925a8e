"""Kafka in and out of Spark: the `tideline_kafka` Python Data Source (exact offsets,
event-time admission control, prefetch), an idempotent producer and topic administration."""
