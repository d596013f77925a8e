"""Which engine shard owns a `rules` message when the rules are split over several engines.

A rule lives in exactly one shard (ruleId mod shards), as the seed's broadcast state holds it
in one parallel instance per key group. Control messages (DELETE_RULES_ALL,
EXPORT_RULES_CURRENT, CLEAR_STATE_ALL) and messages the engine rejects reach every shard; the
sink keeps their identical rule errors once. The engine's own parser decides, so a rule the
engine accepts is always owned by one shard and never held twice.
"""

from __future__ import annotations

from spark_jobs.contracts.json_gate import DEFAULT_MAX_MESSAGE_BYTES
from spark_jobs.fraud.core.rules import RuleState, parse_rule

EVERY_SHARD = None


def owner_shard(value: bytes | str | None, shards: int,
                max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> int | None:
    """The shard that owns this rule message, or EVERY_SHARD (None)."""
    if shards == 1:
        return 0
    try:
        rule = parse_rule(value, max_bytes)
    except Exception:  # RuleError, or what isolation turns into the same error everywhere
        return EVERY_SHARD
    if rule.state is RuleState.CONTROL or rule.rule_id is None:
        return EVERY_SHARD
    return rule.rule_id % shards


def for_shard(value: bytes | str | None, shard: int, shards: int,
              max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> bool:
    """Whether shard `shard` of `shards` applies this rule message."""
    owner = owner_shard(value, shards, max_bytes)
    return owner is EVERY_SHARD or owner == shard
