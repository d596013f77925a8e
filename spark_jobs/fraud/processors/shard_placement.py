"""Shard key values that land in different Spark partitions.

`groupBy(col)` sends a key to partition pmod(murmur3(key, seed 42), spark.sql.shuffle.partitions).
With 2 partitions, the integer keys 0 and 1 hash to the same one, so two shards numbered 0 and 1
would run in one task, one after the other. Shard i is therefore keyed by the smallest unused
integer whose partition is i mod partitions: the shards spread over every partition, and the
choice depends only on (shards, partitions), so it is the same on every restart of a checkpoint.
"""

from __future__ import annotations

_MASK = 0xFFFFFFFF
_SEED = 42  # Spark's HashPartitioning seed


def _rotate_left(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (32 - bits))) & _MASK


def murmur3_int(value: int, seed: int = _SEED) -> int:
    """Spark's Murmur3_x86_32.hashInt: the hash `groupBy` partitions an int column by."""
    k1 = (value & _MASK) * 0xCC9E2D51 & _MASK
    k1 = _rotate_left(k1, 15) * 0x1B873593 & _MASK
    h1 = (seed & _MASK) ^ k1
    h1 = (_rotate_left(h1, 13) * 5 + 0xE6546B64) & _MASK
    h1 ^= 4  # the input length in bytes
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & _MASK
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & _MASK
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def partition_of(value: int, partitions: int) -> int:
    """The shuffle partition of an int key (pmod of the signed hash, as Spark computes it)."""
    return murmur3_int(value) % partitions


def shard_keys(shards: int, partitions: int) -> list[int]:
    """Key value of each shard: shard i goes to partition i mod `partitions`."""
    if shards < 1 or partitions < 1:
        raise ValueError(f"need at least one shard and one partition, got {shards}, {partitions}")
    keys: list[int] = []
    candidate = 0
    for shard in range(shards):
        wanted = shard % partitions
        candidate = 0
        while candidate in keys or partition_of(candidate, partitions) != wanted:
            candidate += 1
        keys.append(candidate)
    return keys
