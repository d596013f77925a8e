"""The current step of long work: drawn on a terminal, silent anywhere else, and a no-op
when no display is open (config/steps.py)."""

from __future__ import annotations

import io

from helpers.steps import StepRecorder

from spark_jobs.config import steps
from spark_jobs.config.steps import advance, recording, showing, step


class Terminal(io.StringIO):
    """A stream that says it is a terminal, as stderr does in a shell."""

    def isatty(self) -> bool:
        return True


def test_each_step_reaches_a_terminal_in_order_with_the_count() -> None:
    terminal = Terminal()
    with showing("recompute 2026-01-01", stream=terminal, unit="msg"):
        step("starting Spark")
        step("computing the windows [day]")  # brackets are text, not rich markup
        advance(1200)
        step("stopping Spark")
    drawn = terminal.getvalue()
    places = [drawn.index(f"recompute 2026-01-01: {name}") for name in (
        "starting Spark", "computing the windows [day]", "stopping Spark")]
    assert places == sorted(places)
    assert "stopping Spark · 1,200 msg" in drawn
    written = len(drawn)
    step("after the end")  # the display is closed: nothing more is drawn
    assert len(terminal.getvalue()) == written and "after the end" not in terminal.getvalue()


def test_nothing_is_written_when_the_stream_is_no_terminal_or_progress_is_off() -> None:
    pipe, terminal = io.StringIO(), Terminal()
    with showing("validate", stream=pipe):
        step("checking case a")
    with showing("generate", stream=terminal, enabled=False):
        step("producing")
        advance(10)
    assert pipe.getvalue() == "" and terminal.getvalue() == ""


def test_steps_and_counts_go_to_the_current_display_only_while_it_is_open() -> None:
    outer, inner = StepRecorder(), StepRecorder()
    step("before any display")  # no display: nothing to do, nothing raised
    with recording(outer):
        step("one")
        with recording(inner) as shown:
            step("two")
            advance(3)
            shown.close()
            shown.close()  # closing twice is harmless (the platform closes it once up)
            step("three")
        advance(2)
    step("after")
    assert (outer.steps, outer.counted, outer.closed) == (["one", "three"], 2, True)
    assert (inner.steps, inner.counted, inner.closed) == (["two"], 3, True)
    assert steps._CURRENT.get() is None
