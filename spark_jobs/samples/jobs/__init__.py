"""The training_samples streaming job: its plan and its sink."""
