"""Shadow validation of `training_samples`: a batch recomputation from the raw topics (Spark
SQL, recompute.py) and a pure comparison with what the streaming joiner wrote (compare.py).

The seed's "separate pipeline to ensure data correctness": it shares only the contract with
the streaming joiner, never its code, so a bug in one is not copied into the other.
"""
