"""Experiment results: statistics (fixed-horizon, sequential), verdicts, the dashboard and
the guardrail alerts built on the `experiment_metrics` table."""
