"""Classification of experiment groups into the seed's three validation cases."""

from __future__ import annotations

import pytest

from spark_jobs.experiments.core.periods import RampRow
from spark_jobs.experiments.traffic import TrafficSpec
from spark_jobs.experiments.validation.cases import (
    CASES,
    MULTI_RAMP_IN_FIRST_PERIOD,
    RAMPS_AFTER_FIRST_PERIOD,
    SINGLE_RAMP,
    UnknownCaseError,
    classify_groups,
    groups_of_case,
    later_periods,
)

DAY = 86_400_000
SPEC = TrafficSpec(period_ms=DAY, window_ms=3_600_000)
RAMPS = [RampRow(**row) for row in SPEC.ramp_rows()]
END_OF_DAY_1 = SPEC.start_ms + DAY


def test_the_generator_schedules_fall_into_the_three_cases():
    cases = classify_groups(RAMPS, DAY)
    by_experiment = {x: cases[(x, g)] for (x, g) in cases}
    assert by_experiment == {
        "exp1_single": SINGLE_RAMP,
        "exp2_multi": MULTI_RAMP_IN_FIRST_PERIOD,
        "exp3_reramp": RAMPS_AFTER_FIRST_PERIOD,
        "exp4_edge": RAMPS_AFTER_FIRST_PERIOD,
    }
    assert {g for (_, g) in cases} == {"control", "treatment"}
    assert set(cases.values()) == set(CASES)


def test_a_day_is_classified_with_the_ramps_known_by_its_end():
    """On day 1 the re-ramps have not happened yet: those groups had a single ramp-up."""
    after = groups_of_case(RAMPS, DAY, END_OF_DAY_1, RAMPS_AFTER_FIRST_PERIOD)
    single = groups_of_case(RAMPS, DAY, END_OF_DAY_1, SINGLE_RAMP)
    assert after == []
    assert {x for x, _ in single} == {"exp1_single", "exp3_reramp", "exp4_edge"}
    later = groups_of_case(RAMPS, DAY, END_OF_DAY_1 + DAY, RAMPS_AFTER_FIRST_PERIOD)
    assert {x for x, _ in later} == {"exp3_reramp", "exp4_edge"}


def test_ramp_ups_after_a_decrease_inside_the_period_make_it_multi():
    rows = [
        RampRow("x", "g", 0, 10, False),
        RampRow("x", "g", 100, 5, False),
        RampRow("x", "g", 200, 8, False),  # a ramp-up again, inside the first period
    ]
    assert classify_groups(rows, 1_000) == {("x", "g"): MULTI_RAMP_IN_FIRST_PERIOD}
    assert classify_groups(rows[:2], 1_000) == {("x", "g"): SINGLE_RAMP}


def test_a_group_never_ramped_up_is_in_no_case():
    rows = [RampRow("x", "g", 0, 0, False), RampRow("y", "g", 0, 5, True)]
    assert classify_groups(rows, 1_000) == {("y", "g"): SINGLE_RAMP}


def test_later_periods_are_the_re_ramps_of_the_chosen_groups():
    groups = [("exp3_reramp", "control"), ("exp1_single", "control")]
    found = later_periods(RAMPS, DAY, END_OF_DAY_1 + DAY, groups)
    assert [(p.experiment_hash, p.experiment_group) for p in found] == [
        ("exp3_reramp", "control")
    ]
    assert found[0].start == SPEC.start_ms + round(1.5 * DAY)
    assert later_periods(RAMPS, DAY, END_OF_DAY_1, groups) == []


def test_an_unknown_case_is_refused():
    with pytest.raises(UnknownCaseError, match="single_ramp"):
        groups_of_case(RAMPS, DAY, END_OF_DAY_1, "exp1_single")
