"""The current step of long work on stderr: platform start, recompute, validate, samples
shadow, generate.

A command opens the display (`showing(title)`); the work below it names its steps with
`step(name)` and counts with `advance(count)`, which do nothing when no display is open, so
library code, Airflow tasks and tests call them freely. The display is drawn only when the
stream (stderr) is a terminal, so logs, pipes and CI stay clean. It is a rich spinner (rich
comes with Airflow): it keeps turning through a step that blocks for minutes (Spark, Airflow's
start), and a step change redraws it at once, so every step reaches the terminal.
"""

from __future__ import annotations

import sys
from contextvars import ContextVar, Token
from typing import Any, Protocol, TextIO


class Display(Protocol):
    """What shows the steps: the terminal's spinner, or a test's recorder."""

    def step(self, name: str) -> None: ...

    def advance(self, count: int) -> None: ...

    def close(self) -> None: ...


_CURRENT: ContextVar[Display | None] = ContextVar("tideline_steps", default=None)


def step(name: str) -> None:
    """The open display's current step becomes `name` (nothing when none is open)."""
    display = _CURRENT.get()
    if display is not None:
        display.step(name)


def advance(count: int) -> None:
    """`count` more units of the open display's counted work (nothing when none is open)."""
    display = _CURRENT.get()
    if display is not None and count:
        display.advance(count)


class Shown:
    """An open display, current in this thread's context until closed; closing twice is
    harmless (a command may close it before its end, e.g. once the platform is up)."""

    def __init__(self, display: Display | None) -> None:
        self.display = display
        self._token: Token[Display | None] | None = _CURRENT.set(display)

    def close(self) -> None:
        if self._token is None:
            return
        token, self._token = self._token, None
        _CURRENT.reset(token)
        if self.display is not None:
            self.display.close()

    def __enter__(self) -> Shown:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def showing(title: str, *, unit: str = "", enabled: bool = True,
            stream: TextIO | None = None) -> Shown:
    """Open the display of `title` on `stream` (default stderr) when it is a terminal and
    `enabled`; `unit` names what advance() counts (e.g. "msg")."""
    stream = sys.stderr if stream is None else stream
    on_terminal = enabled and _is_terminal(stream)
    return Shown(Spinner(title, stream, unit) if on_terminal else None)


def recording(display: Display) -> Shown:
    """Make `display` current (a test's recorder, or another front end)."""
    return Shown(display)


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed file
        return False


class Spinner:
    """One transient line: spinner, `title: step`, the count, elapsed time. Printed output
    goes above it when stdout is a terminal too (else stdout stays where it was sent)."""

    def __init__(self, title: str, stream: TextIO, unit: str) -> None:
        from rich.console import Console
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self.title, self.unit = title, unit
        self._progress = Progress(
            SpinnerColumn(), TextColumn("{task.description}", markup=False), TimeElapsedColumn(),
            console=Console(file=stream), transient=True,
            redirect_stdout=_is_terminal(sys.stdout), redirect_stderr=False,
        )
        self._task = self._progress.add_task(title, total=None)
        self._name = ""
        self._progress.start()

    def step(self, name: str) -> None:
        self._name = name
        self._progress.update(self._task, description=self._line())
        self._progress.refresh()  # a step shows even when it is over before the next tick

    def advance(self, count: int) -> None:
        self._progress.update(self._task, advance=count, description=self._line(count))

    def close(self) -> None:
        self._progress.stop()

    def _line(self, count: int = 0) -> str:
        line = f"{self.title}: {self._name}" if self._name else self.title
        if self.unit:
            done = int(self._progress.tasks[0].completed) + count
            line += f" · {done:,} {self.unit}"
        return line
