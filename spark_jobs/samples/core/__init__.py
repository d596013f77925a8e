"""Training samples (job `training_samples`, CONTRACTS.md section 8), pure Python.

Views are joined with the engagement signals that follow them into one labelled sample per
view. `records` decodes the two topics, `outputs` holds what the join emits (samples,
orphans, dead letters), `join_state` one user's pending views and engagements (and the bytes
they are stored as), and `joiner` takes records into that state and closes them as the
watermark passes. No Spark here: the streaming adapter parses the messages, calls the
joiner's step functions and stores its state as one blob per user.
"""
