"""The offline check of `fraud_rules`: the rules and transactions topics replayed through the
pure engine in the contract's arrival order (recompute.py), compared with the `fraud_alerts`
table (compare.py), stored and alerted on by run.py.

The replay cannot know the job's micro-batches, and the watermark a transaction saw depends on
them; watermark.py bounds it and certainty.py leaves out the evaluations that bound cannot
settle, so what is compared must agree exactly.
"""
