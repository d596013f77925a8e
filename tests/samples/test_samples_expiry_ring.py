"""The de-duplication's expiry index (processors/expiry_ring.py): a list is never due before
an entry placed in it expires, every entry is due at most one slot after its expiry while
the ring has room, and a checkpoint of another layout or bucket count is refused."""

from __future__ import annotations

import random

import pytest

from spark_jobs.samples.processors.expiry_ring import ExpiryRing, slot_ms


def test_slot_is_an_eighth_of_the_ttl_rounded_up():
    assert slot_ms(86_400_000) == 10_800_000
    assert slot_ms(9) == 2 and slot_ms(1) == 1


@pytest.mark.parametrize("size", [1, 2, 12])
def test_no_list_is_due_before_its_entries_expire(size):
    rng = random.Random(size)
    ring = ExpiryRing(buckets=4, slot=10, size=size)
    placed: dict[int, list[int]] = {}
    watermark = 0
    for _ in range(2_000):
        if rng.random() < 0.3:
            watermark += rng.randint(0, 30)
            for index in ring.pop_due(watermark):
                expiries = placed.pop(index)
                assert max(expiries) <= watermark  # every entry expired when read
        else:
            expiry = watermark + rng.randint(1, 200)
            index = ring.place(expiry)
            assert 0 <= index < size and ring.dues[index] > expiry
            placed.setdefault(index, []).append(expiry)
            if size == 12 and len(ring.dues) < size:  # room: due at its slot's end
                assert ring.dues[index] == (expiry // 10 + 1) * 10
        assert set(placed) == set(ring.dues)
        assert ring.next_due() == (min(ring.dues.values()) if ring.dues else None)


def test_entries_of_one_slot_share_a_list_and_a_list_is_reused_once_read():
    ring = ExpiryRing(buckets=4, slot=10)
    first = ring.place(21)
    assert ring.place(29) == first and ring.place(30) != first
    assert ring.pop_due(29) == [] and ring.pop_due(30) == [first]
    assert ring.place(45) == first  # free again
    assert ring.next_due() == 40


def test_round_trip_and_refusals():
    ring = ExpiryRing(buckets=4, slot=10)
    ring.place(15)
    again = ExpiryRing.from_bytes(ring.to_bytes(), 4, slot=99)
    assert again.dues == ring.dues and again.slot_ms == 10  # the stored slot is kept
    assert ExpiryRing.from_bytes(None, 4, 7).is_empty()
    with pytest.raises(RuntimeError, match=r"jobs\.state_buckets"):
        ExpiryRing.from_bytes(ring.to_bytes(), 8, 10)
