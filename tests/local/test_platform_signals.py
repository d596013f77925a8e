"""`tideline platform` stops on SIGINT even when started with SIGINT ignored, as a
non-interactive shell starts background commands (a supervisor's Ctrl-C, `kill -INT`)."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = """
import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)  # as `cmd &` in a script starts it
from spark_jobs.local.platform_stack import stop_on_signals
previous = stop_on_signals()
assert previous[signal.SIGINT] is signal.SIG_IGN
try:
    os.kill(os.getpid(), signal.{name})
    signal.pause()
except KeyboardInterrupt:
    print("stopping")
    sys.exit(0)
sys.exit(1)
"""


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM"])
def test_an_ignored_sigint_or_a_sigterm_stops_the_platform_cleanly(name: str) -> None:
    result = subprocess.run([sys.executable, "-c", PROBE.replace("{name}", name)],
                            capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout.strip()) == (0, "stopping"), result.stderr
