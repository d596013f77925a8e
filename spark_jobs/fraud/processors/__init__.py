"""Spark adapters of the fraud engine: one transformWithState key per shard, its state store."""
