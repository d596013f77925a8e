"""The reasons a job gives for a record it does not use (CONTRACTS sections 4, 8 and 9).

A dead letter's `reason` is one of the short codes below (its `detail` says more); a record a
job filters out by design is not a dead letter but is still counted, per job and reason, in
its progress report and on the jobs page: nothing is dropped without a count.
"""

from __future__ import annotations

# dead letters (every job)
MALFORMED = "malformed"  # not a usable record: bad JSON, a missing or mistyped field, too big
LATE = "late"  # behind the watermark
FUTURE = "future"  # event time more than jobs.max_clock_skew ahead of its Kafka timestamp
ERROR = "error"  # processing the record raised; the detail holds the exception's text

DEAD_LETTER_REASONS = (MALFORMED, LATE, FUTURE, ERROR)

# records filtered out by design (counted, not dead-lettered)
NON_CRITICAL_TYPE = "non_critical_type"  # filter_events: not one of the critical event types
CAPPED = "capped"  # filter_events: over the per-user hourly cap (spam capping)
DUPLICATE = "duplicate"  # a redelivered record already counted (same identity)
OUTSIDE_PERIOD = "outside_period"  # filter_activations: in no period of the current snapshot
DUPLICATE_VIEW = "duplicate_view"  # training_samples: a view_id seen within samples.dedup_ttl
