"""transformWithState processors of the experiment pipeline: thin Spark adapters around
the pure state in `experiments.core`."""
