"""The bytes of the feed's messages: views, engagements, and malformed ones in their place
(each breaks one of the contract's validity rules, MALFORMED_KINDS)."""

from __future__ import annotations

import random
import uuid
from typing import Any

import orjson

from spark_jobs.contracts.topics import TOPIC_ENGAGEMENTS, TOPIC_VIEWS

MALFORMED_KINDS = {  # per topic: each breaks one of the spec's validity rules
    TOPIC_VIEWS: ("not_json", "json_array", "user_id_string", "post_id_bool", "negative_ts",
                  "ts_float", "missing_view_id", "empty_view_id"),
    TOPIC_ENGAGEMENTS: ("not_json", "json_array", "user_id_string", "post_id_bool",
                        "negative_ts", "ts_float", "empty_view_id", "missing_signal",
                        "signal_int"),
}


def view_value(view: dict[str, Any]) -> bytes:
    return orjson.dumps(view)


def engagement_value(user_id: int, post_id: int, view_id: str | None, signal: str, ts: int
                     ) -> bytes:
    return orjson.dumps({"user_id": user_id, "post_id": post_id, "view_id": view_id,
                         "signal": signal, "ts": ts})


def malformed_value(rng: random.Random, topic: str, user_id: int, post_id: int, ts: int) -> bytes:
    kind = rng.choice(MALFORMED_KINDS[topic])
    good: dict[str, Any] = (
        {"view_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)), "user_id": user_id,
         "post_id": post_id, "ts": ts, "surface": "for_you"}
        if topic == TOPIC_VIEWS else
        {"user_id": user_id, "post_id": post_id, "view_id": None, "signal": "like", "ts": ts})
    if kind == "not_json":
        return orjson.dumps(good)[: rng.randint(5, 30)]
    if kind == "json_array":
        return orjson.dumps(list(good.values()))
    if kind.startswith("missing_"):
        good.pop(kind.removeprefix("missing_"))
    else:
        name, value = {
            "empty_view_id": ("view_id", ""), "user_id_string": ("user_id", str(user_id)),
            "post_id_bool": ("post_id", True), "negative_ts": ("ts", -ts),
            "ts_float": ("ts", ts + 0.5), "signal_int": ("signal", 3),
        }[kind]
        good[name] = value
    return orjson.dumps(good)
