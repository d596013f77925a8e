"""Benchmarks of the Tideline pipeline; results with machine and date go to BENCHMARKS.md.

Run as modules from the repository root, e.g. `.venv/bin/python -m bench.freshness`.
"""
