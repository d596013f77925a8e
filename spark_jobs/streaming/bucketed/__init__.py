"""Bucketed state: many keys per Spark group, vectorized in and out, one timer per bucket.

Per-key Python state costs far more than the logic it runs: with transformWithState every
key of every micro-batch pays a state read, a state write, timer calls, Row objects and a
socket round trip for each (PLATFORM_NOTES.md, "Stateful styles compared"). Here the Spark
key is a bucket, `pmod(xxhash64(key), buckets)` (keys.py); `applyInPandasWithState` hands
each bucket's rows of a batch over as Arrow-backed pandas frames (frames.py); the bucket's
state is one blob mapping each key to its own state bytes and next wake-up (store.py); and
one event-time timeout per bucket, its earliest wake-up, replaces a timer per key. A
processor (processor.py) still runs its system's per-key logic, unchanged, on each key's
records in arrival order.
"""
