"""A job's fixed cost: each streaming job and the batch recomputation on a tiny input, run as
a user runs them, with the wall time split into phases.

Each repeat gets a sandbox (its own broker and lake), pre-loads a few hundred records per
system (bench/startup_inputs.py), then runs, one after another as subprocesses,
`tideline -v job run JOB --available-now` for filter_events, filter_activations,
experiment_metrics (which reads what the filters wrote), fraud_rules and training_samples,
then `tideline -v recompute --date DAY` over the lake the experiments jobs filled.

Phases come from the milestones and batch progress (start, durationMs) the runner logs at
INFO (spark_jobs/streaming/timing.py) and the subprocess's spawn and exit as seen from here:

- `python`: spawn to the runner's entry (interpreter, imports, settings, argument parsing);
- `kafka_check`, `session` (JVM and SparkSession), `module`, `topics`, `sink`, `plan`
  (the job's DataFrame), `start` (writeStream.start returns);
- `to_first_trigger`: start returned to the first batch's trigger (query initialisation);
- `first_batch`: the first batch's triggerExecution, split by its durationMs;
- `later_batches`: the first batch's end to the last batch's end;
- `stop`: the last batch's end to awaitTermination seeing the end;
- `exit`: sink close, listener removal, interpreter and JVM shutdown to process exit.

The recomputation: `python`, `session`, `recompute`, `session_stop`, `exit`.

    .venv/bin/python -m bench.startup [--repeats 2] [--jobs filter_events,...,recompute]
        [--set fraud.shards=1]
        [--label NAME] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import (
    Sandbox,
    bench_settings,
    iso_ms,
    load_average,
    machine_info,
    publish_result,
    sandbox,
)
from bench.startup_inputs import SECTIONS, experiments_day, load_all
from bench.tree_cpu import become_subreaper, children_cpu_s, descendants, reap_new

RECOMPUTE = "recompute"
ORDER = ("filter_events", "filter_activations", "experiment_metrics", "fraud_rules",
         "training_samples", RECOMPUTE)
JOB_PHASES = (("python", "spawn", "entered"), ("kafka_check", "entered", "kafka_checked"),
              ("session", "kafka_checked", "session_ready"),
              ("module", "session_ready", "module_imported"),
              ("topics", "module_imported", "topics_ready"),
              ("sink", "topics_ready", "sink_ready"), ("plan", "sink_ready", "plan_built"),
              ("start", "plan_built", "query_started"),
              ("to_first_trigger", "query_started", "first_trigger"),
              ("first_batch", "first_trigger", "first_end"),
              ("later_batches", "first_end", "last_end"),
              ("stop", "last_end", "query_ended"), ("exit", "query_ended", "exit"))
RECOMPUTE_PHASES = (("python", "spawn", "entered"), ("session", "entered", "session_ready"),
                    ("recompute", "session_ready", "recomputed"),
                    ("session_stop", "recomputed", "session_stopped"),
                    ("exit", "session_stopped", "exit"))
RUN_TIMEOUT_S = 600.0


def marks_of(log_text: str, name: str) -> dict[str, float]:
    """The `timing <name> <phase> <epoch>` milestones of a run's log."""
    found: dict[str, float] = {}
    for line in log_text.splitlines():
        words = line.split()
        if "timing" in words:
            at = words.index("timing")
            if (words[at + 1:at + 2] == [name] and len(words) >= at + 4
                    and words[at + 2] != "batch"):
                found.setdefault(words[at + 2], float(words[at + 3]))
    return found


def batches_of(log_text: str, name: str) -> list[dict[str, Any]]:
    """Progress of every batch the run retained, in batch order (the runner logs them)."""
    by_id: dict[int, dict[str, Any]] = {}
    for line in log_text.splitlines():
        words = line.split(maxsplit=7)
        at = words.index("timing") if "timing" in words else -1
        if at >= 0 and words[at + 1:at + 3] == [name, "batch"]:
            found = json.loads(line.split(" batch ", 1)[1])
            by_id[found["batchId"]] = found
    return [by_id[k] for k in sorted(by_id)]


def batch_summary(batch: dict[str, Any]) -> dict[str, Any]:
    return {"batch": batch["batchId"], "rows": batch.get("numInputRows", 0),
            "ms": batch.get("durationMs", {})}


def phases(marks: dict[str, float], table: tuple[tuple[str, str, str], ...]
           ) -> dict[str, float]:
    """Seconds per phase, for the phases whose two milestones were seen."""
    return {name: round(marks[end] - marks[begin], 3) for name, begin, end in table
            if begin in marks and end in marks}


def run_command(command: list[str], env: dict[str, str], log: Path) -> tuple[float, float]:
    """Run one `tideline` command to its end; (spawn, exit) epoch seconds."""
    spawn, before = time.time(), descendants()
    with log.open("wb") as out:
        done = subprocess.run(command, env=env, stdout=out, stderr=subprocess.STDOUT,
                              timeout=RUN_TIMEOUT_S, check=False)
    ended = time.time()
    reap_new(before)  # the JVM and Python workers it left: their CPU counts in children_cpu_s
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {done.returncode}:\n"
                           + log.read_text()[-3000:])
    return spawn, ended


def run_one(name: str, box: Sandbox, config: Path, env: dict[str, str]) -> dict[str, Any]:
    """One job (or the recomputation) as a subprocess; its phases and batches."""
    cli = [sys.executable, "-m", "spark_jobs.cli", "-v"]
    log = box.root / f"{name}.log"
    load_before = load_average()
    cpu_before = children_cpu_s()
    if name == RECOMPUTE:
        day = experiments_day(bench_settings(box, SECTIONS))
        spawn, ended = run_command([*cli, "recompute", "--date", day.isoformat()], env, log)
        marks = {**marks_of(log.read_text(), name), "spawn": spawn, "exit": ended}
        return {"job": name, "total_s": round(ended - spawn, 3),
                "cpu_s": round(children_cpu_s() - cpu_before, 2),
                "phases_s": phases(marks, RECOMPUTE_PHASES), "load_before": load_before}
    spawn, ended = run_command([*cli, "job", "run", name, "--available-now"], env, log)
    cpu_s = round(children_cpu_s() - cpu_before, 2)
    marks = {**marks_of(log.read_text(), name), "spawn": spawn, "exit": ended}
    batches = batches_of(log.read_text(), name)
    ran = [b for b in batches if "addBatch" in b.get("durationMs", {})]
    if ran:
        first = ran[0]["durationMs"]["triggerExecution"] / 1000
        marks["first_trigger"] = iso_ms(ran[0]["timestamp"]) / 1000
        marks["first_end"] = marks["first_trigger"] + first
        last = batches[-1]
        marks["last_end"] = (iso_ms(last["timestamp"])
                             + last["durationMs"].get("triggerExecution", 0)) / 1000
    return {"job": name, "total_s": round(ended - spawn, 3), "cpu_s": cpu_s,
            "phases_s": phases(marks, JOB_PHASES),
            "batches": [batch_summary(b) for b in batches], "load_before": load_before}


def run_repeat(jobs: list[str], sections: dict[str, Any] = SECTIONS) -> list[dict[str, Any]]:
    """A fresh sandbox and input, then every job in order."""
    from spark_jobs.control.submit import freeze_settings, frozen_environment

    with sandbox("startup") as box:
        settings = bench_settings(box, sections)
        records = load_all(settings)
        print(f"  loaded {records}", file=sys.stderr, flush=True)
        config = freeze_settings(settings, box.root / "settings.yaml")
        env = frozen_environment(config)
        runs = []
        for name in jobs:
            runs.append(run_one(name, box, config, env))
            print(f"  {name}: {runs[-1]['total_s']:.1f} s, {runs[-1]['cpu_s']:.1f} CPU s "
                  f"{runs[-1]['phases_s']}",
                  file=sys.stderr, flush=True)
        return runs


def medians(repeats: list[list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per job, the median total and the median of each phase over the repeats."""
    out: dict[str, dict[str, Any]] = {}
    for name in [run["job"] for run in repeats[0]]:
        runs = [run for repeat in repeats for run in repeat if run["job"] == name]
        keys = dict.fromkeys(k for run in runs for k in run["phases_s"])
        out[name] = {
            "total_s": round(statistics.median(r["total_s"] for r in runs), 2),
            "cpu_s": round(statistics.median(r["cpu_s"] for r in runs), 2),
            "phases_s": {k: round(statistics.median(r["phases_s"].get(k, 0.0) for r in runs), 2)
                         for k in keys},
        }
    return out


def summary(result: dict[str, Any]) -> list[str]:
    lines = [f"start-up on tiny input, {result['repeats']} repeat(s), median "
             f"(load {result['machine']['load_average_at_start']} -> "
             f"{result['machine'].get('load_average_at_end')}):"]
    for name, found in result["median"].items():
        parts = " ".join(f"{k}={v:.2f}" for k, v in found["phases_s"].items())
        lines.append(f"  {name:<19} {found['total_s']:6.2f} s  {found['cpu_s']:6.2f} CPU s  "
                     f"{parts}")
    return lines


def _setting_value(text: str) -> Any:
    """A --set value as the settings file would hold it: a number, true/false, or text."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--jobs", default=",".join(ORDER))
    parser.add_argument("--label", default="")
    parser.add_argument("--out")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="a setting of the jobs run (repeatable), e.g. fraud.shards=1")
    args = parser.parse_args(argv)
    sections = {name: dict(values) for name, values in SECTIONS.items()}
    for item in args.set:
        name, _, value = item.partition("=")
        section, _, key = name.partition(".")
        if not (section and key and value):
            parser.error(f"--set wants SECTION.KEY=VALUE, got {item!r}")
        sections.setdefault(section, {})[key] = _setting_value(value)
    become_subreaper()
    jobs = [j for j in args.jobs.split(",") if j]
    result: dict[str, Any] = {"label": args.label, "machine": machine_info(),
                              "repeats": args.repeats, "jobs": jobs, "settings": args.set}
    repeats = []
    for k in range(args.repeats):
        print(f"repeat {k + 1}/{args.repeats}", file=sys.stderr, flush=True)
        repeats.append(run_repeat(jobs, sections))
    result["runs"] = repeats
    result["median"] = medians(repeats)
    name = f"startup-{args.label}" if args.label else "startup"
    publish_result(name, args.out, result, summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
