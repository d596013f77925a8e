"""The clean-up's due index (fraud/core/due_index.py): windows filed by the second of their due,
checked against a plain list of (due, rule_id, key)."""

from __future__ import annotations

import random

import pytest

from spark_jobs.fraud.core.due_index import DueIndex


@pytest.mark.parametrize("seed", range(30))
def test_a_pop_takes_every_window_due_and_none_of_another_second(seed):
    rng = random.Random(seed)
    index, filed = DueIndex(), []
    watermark = 0
    for _step in range(400):
        if rng.random() < 0.15:
            watermark += rng.choice((0, 1, 250, 999, 1000, 1001, 3500))
            taken = list(index.pop_due(watermark))
            due_now = [(r, k) for due, r, k in filed if due <= watermark]
            seconds_due = {due // 1000 for due, _r, _k in filed if due <= watermark}
            expected = [(r, k) for due, r, k in filed if due // 1000 in seconds_due]
            assert set(due_now) <= set(taken)
            assert sorted(taken) == sorted(expected)  # whole seconds, nothing else
            filed = [(d, r, k) for d, r, k in filed if d // 1000 not in seconds_due]
        else:
            due = watermark + rng.randint(1, 5000)
            rule_id, key = rng.randint(1, 3), f"k{rng.randint(0, 50)}"
            index.push(due, rule_id, key)
            filed.append((due, rule_id, key))
        assert index.first_ms() == min((due for due, _r, _k in filed), default=None)
        assert len(index) == len(filed)


def test_windows_pushed_back_during_a_pop_wait_for_the_next():
    index = DueIndex()
    index.push(1_500, 1, "a")
    for rule_id, key in index.pop_due(1_600):
        index.push(1_601, rule_id, key)  # same second, not yet due: filed again
    assert index.first_ms() == 1_601
    assert list(index.pop_due(1_600)) == []
    assert list(index.pop_due(1_601)) == [(1, "a")]
    assert index.first_ms() is None
