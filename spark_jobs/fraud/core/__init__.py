"""Dynamic-rule fraud detection (job `fraud_rules`, CONTRACTS.md section 7), pure Python.

The Flink fraud-detection demo rebuilt as plain domain code the Spark job calls: `rules`
parses and validates rule messages, `keys` reads transactions and builds the dynamic grouping
key, `aggregates` holds the exact decimal aggregators and limit operators, `windows` the
per-(rule, key) window state, `store` the small state interface, `outputs` the message
formats, `engine` applies one ordered stream of rules and transactions, and `cleanup` is its
clean-up timer.
"""
