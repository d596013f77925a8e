"""Training samples (job `training_samples`, CONTRACTS.md section 8), the ShareChat joiner.

`core` is the pure join, `encoding` the versioned Avro schemas, `processors` its Spark state
adapter, `jobs` the streaming job, `traffic` the synthetic feed and `shadow` the daily batch
recomputation it is checked against.
"""
