"""Spark adapters of the fraud engine: one transformWithStateInPandas key per shard, its
resident engine and its state (a snapshot and change logs)."""
