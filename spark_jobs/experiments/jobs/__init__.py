"""The experiment pipeline's streaming jobs: filter_events, filter_activations,
experiment_metrics; each module reads top to bottom like the seed's topology."""
