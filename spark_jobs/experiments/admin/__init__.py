"""Experiment metadata for people and DAGs: the `ramps` table and the ramp snapshots."""
