"""A progress display that remembers what long work reported (config.steps), for tests."""

from __future__ import annotations


class StepRecorder:
    """The steps named, in order, and the units counted, on the display made current with
    `config.steps.recording(recorder)`."""

    def __init__(self) -> None:
        self.steps: list[str] = []
        self.counted = 0
        self.closed = False

    def step(self, name: str) -> None:
        self.steps.append(name)

    def advance(self, count: int) -> None:
        self.counted += count

    def close(self) -> None:
        self.closed = True
