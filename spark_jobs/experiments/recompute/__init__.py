"""The daily batch recomputation of experiment metrics (checked against the streaming table)."""
