"""Synthetic short-video feed traffic for the training_samples job: views and engagements.

The spec (spec.py) says what the feed looks like; generation is pure and seeded
(generate.py: `generate_traffic`, `annotated_traffic`, `generate_views`): the same spec gives
the same Kafka messages, byte for byte, in the same order. Users open sessions (sessions.py:
Poisson arrivals, Zipf-like activity, feed.py) and scroll a feed: each view logs the context
a ranking system records (surface, position, session, feed request, app and device, network,
model score, ...; a few hundred bytes of JSON, messages.py), and each view leads to the engagements
a viewer produces: a `skip` after a second or two, or a `play`, sometimes followed by like,
favorite, comment or share, with the usual rates.

Every case of CONTRACTS.md section 8 occurs: engagements with and without a view_id,
engagements that reach Kafka before their view (the view was delayed), engagements outside
the attribution window (a late return, a skewed client clock), re-watched posts (several
views of one user and post), duplicate views and duplicate signals, engagements whose view is
not in the traffic, and on request unknown signals, malformed messages and view_ids of
another post.

Kafka order is event order shuffled within a bound: each message reaches Kafka `delay` after
its event time, 0 <= delay <= `max_disorder_ms`, and messages are in arrival order. So no
message is more than max_disorder_ms behind the largest event time before it; with
max_disorder_ms <= samples.lateness nothing well-formed is late.

`produce_samples_traffic` (kafka.py) sends the traffic to Kafka in real time with the shared
paced producing loop (spark_jobs.streaming.traffic).
"""

from spark_jobs.samples.traffic.generate import (
    Record,
    annotated_traffic,
    generate_traffic,
    generate_views,
    traffic_mix,
)
from spark_jobs.samples.traffic.kafka import produce_samples_traffic
from spark_jobs.samples.traffic.messages import MALFORMED_KINDS
from spark_jobs.samples.traffic.sessions import (
    DUPLICATE_SIGNAL,
    DUPLICATE_VIEW,
    ENGAGEMENT,
    ENGAGEMENT_NULL,
    KINDS,
    MALFORMED,
    MISMATCH,
    OUTSIDE_WINDOW,
    STRAY,
    UNKNOWN_SIGNAL,
    UNKNOWN_SIGNALS,
    VIEW,
)
from spark_jobs.samples.traffic.spec import SamplesTrafficSpec, expected_rate, mean_view_ms

__all__ = [
    "DUPLICATE_SIGNAL",
    "DUPLICATE_VIEW",
    "ENGAGEMENT",
    "ENGAGEMENT_NULL",
    "KINDS",
    "MALFORMED",
    "MALFORMED_KINDS",
    "MISMATCH",
    "OUTSIDE_WINDOW",
    "STRAY",
    "UNKNOWN_SIGNAL",
    "UNKNOWN_SIGNALS",
    "VIEW",
    "Record",
    "SamplesTrafficSpec",
    "annotated_traffic",
    "expected_rate",
    "generate_traffic",
    "generate_views",
    "mean_view_ms",
    "produce_samples_traffic",
    "traffic_mix",
]
