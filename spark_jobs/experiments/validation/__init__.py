"""Daily validation of the streaming metrics with Great Expectations (seed: Data Robustness)."""
