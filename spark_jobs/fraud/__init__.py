"""Dynamic-rule fraud detection (job `fraud_rules`, CONTRACTS.md section 7), the Flink
fraud-detection demo on Spark.

`core` is the pure engine (rules, dynamic keys, windows, exact aggregates), `processors` its
Spark state adapters, `jobs` the streaming job, `admin` the `tideline rules` commands,
`shadow` the offline check of the job's alerts and `traffic` the synthetic transactions.
"""
