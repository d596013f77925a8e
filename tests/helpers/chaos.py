"""Chaos runs: a job as its own process, SIGKILLed at seeded random moments and restarted
from its checkpoint, then compared output by output with a reference run.

A run of `chaos_run` starts `tideline job run JOB` (its own process group, the settings
frozen to a file), kills it at one of three aims, and starts it again, `kills` times; the
last start runs `--available-now` to the end. The aims, in a seeded random order (each at
least once when `kills` >= 3):

- `startup`: before the run commits anything (for the first run: before the first batch
  commits), a random delay after the process starts or once the run planned a batch;
- `sink_write`: a batch is planned and not committed, and one of its outputs (a Delta
  commit of one of the job's tables, a record on one of its topics) just appeared: the
  kill lands inside the sink's writes, between the first output and the batch's commit;
- `between_batches`: a random short delay after a batch committed.

"No crash loop" is checked on the way: each process must still be alive when its kill
comes, each restart aimed past startup made progress (a batch committed or an output
written) before it was killed, and the last run exits 0.

`job_outputs` reads every output of a job (its catalog tables and topics) as multisets of
rows with wall-clock stamps removed, so `assert_same_outputs` sees a doubled row or a lost
one, on a topic as well as in a table.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spark_jobs.catalog import job as catalog_job
from spark_jobs.settings import Settings

AIMS = ("startup", "sink_write", "between_batches")
POLL_S = 0.01
VOLATILE_FIELDS = frozenset({"alertTime", "alert_time"})  # wall-clock stamps (JSON, columns)


@dataclass
class Kill:
    """One SIGKILL: its aim, and the job's progress when the run started and when it died."""

    aim: str
    started: tuple[int, int]  # (last committed batch or -1, outputs written) at the start
    killed: tuple[int, int]


@dataclass
class ChaosReport:
    kills: list[Kill] = field(default_factory=list)
    final_batch: int = -1
    log: Path | None = None


def _batch_ids(folder: Path) -> list[int]:
    try:
        return [int(p.name) for p in folder.iterdir() if p.name.isdigit()]
    except FileNotFoundError:
        return []


class JobProbe:
    """What the job has done so far, read from its checkpoint, its Delta logs and the end
    offsets of its output topics (one long-lived consumer: cheap enough to poll)."""

    def __init__(self, settings: Settings, job: str) -> None:
        from spark_jobs.streaming.kafka.topic_admin import offsets_consumer

        entry = catalog_job(job)
        self.settings, self.job = settings, job
        self.checkpoint = Path(settings.lake.checkpoint(job))
        self.logs = [Path(settings.lake.table(t)) / "_delta_log" for t in entry.tables]
        self.topics = entry.outputs
        self.consumer = offsets_consumer(settings.kafka) if self.topics else None

    def committed(self) -> int:
        return max(_batch_ids(self.checkpoint / "commits"), default=-1)

    def planned(self) -> int:
        return max(_batch_ids(self.checkpoint / "offsets"), default=-1)

    def table_writes(self) -> int:
        return sum(len(list(log.glob("*.json"))) if log.exists() else 0 for log in self.logs)

    def topic_writes(self) -> int:
        from confluent_kafka import TopicPartition

        if self.consumer is None:
            return 0
        total = 0
        for topic in self.topics:
            metadata = self.consumer.list_topics(topic, timeout=10).topics[topic]
            for partition in metadata.partitions:
                _, high = self.consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), timeout=10, cached=False)
                total += max(high, 0)
        return total

    def writes(self) -> int:
        return self.table_writes() + self.topic_writes()

    def idle(self) -> bool:
        """The running query found no new input (it has read everything there is)."""
        from spark_jobs.streaming.progress import read_progress

        return (read_progress(self.settings, self.job) or {}).get("status") == "idle"

    def state(self) -> tuple[int, int]:
        return self.committed(), self.writes()

    def close(self) -> None:
        if self.consumer is not None:
            self.consumer.close()


def _start(job: str, config: Path, log: Path, available_now: bool) -> subprocess.Popen:
    from spark_jobs.control.submit import frozen_environment

    command = [sys.executable, "-m", "spark_jobs.cli", "job", "run", job]
    with log.open("ab") as out:
        return subprocess.Popen(
            [*command, "--available-now"] if available_now else command,
            env=frozen_environment(config, os.environ), start_new_session=True,
            stdout=out, stderr=subprocess.STDOUT)


class _Run:
    """Waits, for one started process, until its aim is reached."""

    def __init__(self, process: subprocess.Popen, probe: JobProbe, log: Path,
                 rng: random.Random, deadline: float) -> None:
        self.process, self.probe, self.log, self.rng = process, probe, log, rng
        self.deadline = deadline

    def _tick(self, what: str) -> None:
        if self.process.poll() is not None:
            raise AssertionError(f"the job died by itself (exit {self.process.returncode}) "
                                 f"while waiting for {what}: a crash, not a kill\n"
                                 + self.log.read_text()[-3000:])
        if self.probe.idle():
            raise AssertionError(f"the job read all its input before {what}: give it more "
                                 "input or smaller triggers")
        if time.monotonic() > self.deadline:
            raise AssertionError(f"no {what} in time (too little input left for this kill, "
                                 "or the job is stuck)\n" + self.log.read_text()[-3000:])
        time.sleep(POLL_S)

    def startup(self) -> None:
        """Kill after a random delay, or soon after the run planned its first batch."""
        planned = self.probe.planned()
        give_up = time.monotonic() + self.rng.uniform(0.5, 8.0)
        while self.probe.planned() == planned and time.monotonic() < give_up:
            self._tick("planned batch")
        time.sleep(self.rng.uniform(0.0, 0.3))

    def sink_write(self) -> None:
        """Kill right after an output of a planned, uncommitted batch appeared."""
        while True:
            committed, planned = self.probe.committed(), self.probe.planned()
            if planned > committed:
                writes = self.probe.writes()
                while self.probe.committed() == committed:
                    if self.probe.writes() != writes:
                        if self.probe.committed() == committed:  # still inside the batch
                            return
                        break
                    self._tick("sink write")
            self._tick("planned batch")

    def between_batches(self) -> None:
        """Kill a random short delay after the run committed a batch."""
        committed = self.probe.committed()
        while self.probe.committed() == committed:
            self._tick("committed batch")
        time.sleep(self.rng.uniform(0.0, 0.5))


def plan_aims(rng: random.Random, kills: int) -> list[str]:
    """Every aim once (for kills >= 3), the rest drawn among the two that need the job to
    move on, all in a seeded random order."""
    aims = list(AIMS[:kills]) + [rng.choice(AIMS[1:]) for _ in range(kills - len(AIMS))]
    rng.shuffle(aims)
    return aims


def chaos_run(settings: Settings, job: str, folder: Path, *, seed: int, kills: int = 3,
              timeout_s: float = 180, on_restart: Callable[[int], None] | None = None,
              aims: Sequence[str] | None = None) -> ChaosReport:
    """Run `job` to its end with `kills` SIGKILLs of its process group on the way (see the
    module docstring); raises AssertionError on a crash, a stall or a restart without
    progress. `on_restart(k)` runs before the k-th restart (to add input, say). `aims`, in
    place of `kills`: exactly these kills, in this order (a job whose start-up and commit
    path another chaos test already kills at every aim needs only its own sink's)."""
    from spark_jobs.control.submit import freeze_settings

    assert aims is None or set(aims) <= set(AIMS), f"unknown aim in {aims}"
    folder = Path(folder)
    config = freeze_settings(settings, folder / f"{job}-chaos.yaml")
    log = folder / f"{job}-chaos.log"
    rng = random.Random(seed)
    probe = JobProbe(settings, job)
    report = ChaosReport(log=log)
    try:
        for number, aim in enumerate(plan_aims(rng, kills) if aims is None else aims):
            if number and on_restart is not None:
                on_restart(number)
            started = probe.state()
            process = _start(job, config, log, available_now=False)
            run = _Run(process, probe, log, rng, time.monotonic() + timeout_s)
            try:
                getattr(run, aim)()
                run._tick(aim)  # still alive at the kill: it did not crash on its own
            finally:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(30)
            report.kills.append(Kill(aim, started, probe.state()))
        if on_restart is not None:
            on_restart(len(report.kills))
        process = _start(job, config, log, available_now=True)
        try:
            code = process.wait(timeout_s)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(30)
        assert code == 0, f"the final run exited {code}\n" + log.read_text()[-3000:]
        report.final_batch = probe.committed()
    finally:
        probe.close()
    assert_progress(report)
    return report


def assert_progress(report: ChaosReport) -> None:
    """No crash loop: every restart aimed past startup moved the job on before its kill, and
    the final run committed past every kill."""
    for number, kill in enumerate(report.kills):
        if number and kill.aim != "startup":
            assert kill.killed > kill.started, f"restart {number} made no progress: {kill}"
        assert report.final_batch >= kill.killed[0], f"the end is behind kill {number}"
    assert report.final_batch > max(k.killed[0] for k in report.kills), report


# ------------------------------------------------------------------ outputs


def _plain(value: Any) -> Any:
    """A hashable, wall-clock-free form of one value (JSON text loses its volatile fields)."""
    if isinstance(value, bytes | str):
        text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
        if text[:1] == "{":
            try:
                parsed = json.loads(text)
            except ValueError:
                return text
            return _plain(parsed)
        return text
    if isinstance(value, dict):
        return json.dumps({k: _plain(v) for k, v in value.items() if k not in VOLATILE_FIELDS},
                          sort_keys=True, default=str)
    if isinstance(value, list):
        return json.dumps([_plain(v) for v in value], default=str)
    return value


def table_rows(settings: Settings, table: str) -> Counter:
    """The table's rows as a multiset, without its wall-clock columns (timestamps)."""
    import pyarrow as pa

    from spark_jobs.streaming.lake.delta import read_arrow

    path = settings.lake.table(table)
    if not Path(path, "_delta_log").exists():
        return Counter()
    data = read_arrow(path)
    kept = [f.name for f in data.schema
            if not pa.types.is_timestamp(f.type) and f.name not in VOLATILE_FIELDS]
    rows = data.select(kept).to_pylist()
    return Counter(tuple((name, _plain(row[name])) for name in kept) for row in rows)


def topic_messages(settings: Settings, topic: str,
                   decode: Callable[[bytes], Any] | None = None) -> Counter:
    """The topic's messages as a multiset of (key, value without wall-clock stamps)."""
    from spark_jobs.streaming.kafka.topic_reader import read_all

    def value(raw: bytes | None) -> Any:
        return _plain(decode(raw) if decode is not None and raw is not None else raw)

    return Counter((m.key, value(m.value)) for m in read_all(settings.kafka, topic))


def job_outputs(settings: Settings, job: str,
                decoders: dict[str, Callable[[bytes], Any]] | None = None) -> dict[str, Counter]:
    """Every table and topic the catalog lists for `job`, as multisets."""
    entry = catalog_job(job)
    decoders = decoders or {}
    outputs = {f"table {t}": table_rows(settings, t) for t in entry.tables}
    outputs.update({f"topic {t}": topic_messages(settings, t, decoders.get(t))
                    for t in entry.outputs})
    return outputs


def assert_same_outputs(actual: dict[str, Counter], expected: dict[str, Counter]) -> None:
    """Equal multisets per output; the message names what was doubled and what was lost."""
    problems = []
    for name in sorted(expected.keys() | actual.keys()):
        got, want = actual.get(name, Counter()), expected.get(name, Counter())
        doubled, lost = got - want, want - got
        if doubled or lost:
            problems.append(f"{name}: {sum(doubled.values())} extra (doubled) "
                            f"{list(doubled.items())[:3]}, {sum(lost.values())} lost "
                            f"{list(lost.items())[:3]}")
    assert not problems, "\n".join(problems)


def assert_unique(messages: Counter, what: str, identity: Callable[[Any], Any]) -> None:
    """Each message's identity (a key, an id) appears once: exactly-once on a topic."""
    ids = Counter()
    for message, count in messages.items():
        ids[identity(message)] += count
    repeated = {k: n for k, n in ids.items() if n > 1}
    assert not repeated, f"{what}: {len(repeated)} ids doubled, e.g. {list(repeated)[:5]}"
