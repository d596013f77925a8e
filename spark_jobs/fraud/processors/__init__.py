"""Spark adapters of the fraud engine: one transformWithStateInPandas key per shard, its
engine kept in a host process per executor, its state (a snapshot and change logs) in Spark."""
