"""Real-time experiment analytics (the Pinterest design, CONTRACTS.md sections 2-5).

`core` is the pure logic (periods and ramps, capping, per-user metrics, cumulative windows),
`processors` its Spark state adapters, `jobs` the three streaming jobs, `admin` the metadata
DB and ramp snapshots, `traffic` the synthetic events, `recompute` and `validation` the
daily batch recomputation and its Great Expectations checks.
"""
