"""Columns to Kafka messages: `GeneratedRecord`s with the exact bytes of each message.

Good messages are filled into byte templates precomputed per event type and membership (the
hot path of generation); malformed ones are built from the fields of a good one, one kind of
breakage each (MALFORMED_KINDS).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import orjson

from spark_jobs.contracts.topics import TOPIC_ACTIVATIONS, TOPIC_EVENTS
from spark_jobs.experiments.traffic.population import PLATFORMS, Population
from spark_jobs.experiments.traffic.schedule import K_BAD, T_EVENT, Columns
from spark_jobs.experiments.traffic.spec import GOOD, KINDS, MALFORMED, MALFORMED_KINDS, TrafficSpec


class GeneratedRecord(NamedTuple):
    """One Kafka message: value None is a null message; ts is the event time it was made for."""

    topic: str
    key: str | None
    value: bytes | None
    ts: int | None
    kind: str = GOOD


class Encoder:
    """Turns ordered columns into GeneratedRecords with precomputed byte templates."""

    def __init__(self, spec: TrafficSpec, population: Population) -> None:
        self.pop = population
        self.keys = [str(u) for u in population.user_ids.tolist()]
        self.platforms = [PLATFORMS[p] for p in population.platform.tolist()]
        self.event_tmpl = [_event_template(t) for t in spec.event_types]
        self.act_tmpl = [
            _activation_template(*population.group_of(c))
            for c in range(2 * len(population.experiments))
        ]
        self.kinds = KINDS

    def records(self, cols: Columns) -> list[GeneratedRecord]:
        out: list[GeneratedRecord] = []
        append = out.append
        new = tuple.__new__  # GeneratedRecord(...) without the namedtuple __new__ wrapper
        record = GeneratedRecord
        keys, plats, ev_t, act_t, kinds = (
            self.keys, self.platforms, self.event_tmpl, self.act_tmpl, self.kinds,
        )  # fmt: skip
        ids = self.pop.user_ids
        rows = zip(
            cols.topic.tolist(),
            ids[cols.user].tolist(),
            cols.user.tolist(),
            cols.code.tolist(),
            cols.ts.tolist(),
            cols.kind.tolist(),
            cols.extra.tolist(),
            strict=True,
        )
        for topic, uid, u, code, ts, kind, extra in rows:
            if kind == K_BAD:
                append(self._malformed(topic, uid, u, code, ts, extra))
            elif topic == T_EVENT:
                value = ev_t[code] % (uid, ts, plats[u], extra)
                append(new(record, (TOPIC_EVENTS, keys[u], value, ts, kinds[kind])))
            else:
                value = act_t[code] % (uid, ts)
                append(new(record, (TOPIC_ACTIVATIONS, keys[u], value, ts, kinds[kind])))
        return out

    def _malformed(
        self, topic: int, uid: int, u: int, code: int, ts: int, extra: int
    ) -> GeneratedRecord:
        variant = MALFORMED_KINDS[extra % len(MALFORMED_KINDS)]
        sub = extra // len(MALFORMED_KINDS)
        if topic == T_EVENT:
            name = TOPIC_EVENTS
            fields = {"user_id": uid, "event_type": self.pop.spec.event_types[code], "ts": ts}
        else:
            name = TOPIC_ACTIVATIONS
            exp, group = self.pop.group_of(code)
            fields = {"user_id": uid, "experiment_hash": exp, "experiment_group": group, "ts": ts}
        value = _malformed_value(variant, fields, sub)
        return GeneratedRecord(name, self.keys[u], value, ts, MALFORMED)


def _quoted(text: str) -> str:
    """A JSON string literal that is safe inside a %-template."""
    return orjson.dumps(text).decode().replace("%", "%%")


def _event_template(event_type: str) -> bytes:
    extra = "query_id" if event_type == "search" else "pin_id"
    head = '{"user_id":%d,"event_type":' + _quoted(event_type)
    return (head + ',"ts":%d,"platform":"%s","' + extra + '":%d}').encode()


def _activation_template(experiment: str, group: str) -> bytes:
    head = '{"user_id":%d,"experiment_hash":' + _quoted(experiment)
    return (head + ',"experiment_group":' + _quoted(group) + ',"ts":%d}').encode()


def _json(fields: dict[str, Any]) -> bytes:
    """Hand-rolled JSON so malformed variants can put raw text (e.g. 42.0) into a field."""
    return ("{" + ",".join(f'"{k}":{_json_text(v)}' for k, v in fields.items()) + "}").encode()


def _malformed_value(variant: str, fields: dict[str, Any], sub: int) -> bytes | None:
    """One broken message of the given kind, built from the fields of a good one."""
    if variant == "null_value":
        return None
    if variant == "not_json":
        if sub % 2:
            return f"user_id={fields['user_id']};ts={fields['ts']}".encode()
        good = _json(fields)
        return good[: len(good) // 2]
    if variant == "json_array":
        return ("[" + ",".join(_json_text(v) for v in fields.values()) + "]").encode()
    if variant == "missing_field":
        names = list(fields)
        dropped = names[sub % len(names)]
        return _json({k: v for k, v in fields.items() if k != dropped})
    broken = dict(fields)
    if variant == "ts_string":
        broken["ts"] = str(fields["ts"])
    else:  # user_id_float
        broken["user_id"] = _Raw(f"{fields['user_id']}.0")
    return _json(broken)


class _Raw(str):
    """A JSON value written as-is (not quoted) by _json."""


def _json_text(value: Any) -> str:
    if isinstance(value, _Raw):
        return str(value)
    return orjson.dumps(value).decode() if isinstance(value, str) else str(value)

