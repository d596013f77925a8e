"""`tideline` commands of the experiment pipeline: metadata, snapshots, traffic, the daily
recomputation and its validation."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from spark_jobs.config.cli_args import (
    UsageError,
    add_day_arguments,
    duration_ms,
    manual_run_id,
    non_negative_int,
    parse_date,
    positive_int,
    positive_number,
    time_ms,
)
from spark_jobs.config.steps import showing, step
from spark_jobs.settings import Settings

ALL = "all"


def lookback(text: str) -> int | str:
    """argparse type of --lookback: a duration, or `all`."""
    return ALL if text == ALL else duration_ms(text)


def _lookback_ms(given: int | str | None, settings: Settings) -> int | None:
    if given is None:
        return settings.experiments.period_ms
    return None if given == ALL else int(given)


def cmd_metadata_load(args: argparse.Namespace, settings: Settings) -> int:
    from spark_jobs.experiments.admin.metadata import MetadataError, load_csv

    try:
        count = load_csv(settings.metadata.url, args.file)
    except MetadataError as exc:  # the file is wrong: a bad argument
        raise UsageError(str(exc)) from None
    print(f"loaded {count} ramp rows into {settings.metadata.url}")
    return 0


def cmd_snapshot_publish(args: argparse.Namespace, settings: Settings) -> int:
    """Publish, or fail with one line and an alert when the snapshot would be silently empty:
    a missing metadata DB or `ramps` table exits 2 (metadata.url is wrong), an empty snapshot
    replacing current periods exits 1."""
    from spark_jobs.experiments.admin.metadata import MetadataUnavailable
    from spark_jobs.experiments.admin.snapshot import EmptySnapshotRefused, publish_snapshot
    from spark_jobs.experiments.admin.snapshot_alerts import refused_alert, try_send

    as_of = args.as_of if args.as_of is not None else int(time.time() * 1000)
    try:
        path = publish_snapshot(settings, as_of, _lookback_ms(args.lookback, settings))
    except (MetadataUnavailable, EmptySnapshotRefused) as refused:
        try_send(settings, refused_alert(refused, as_of), log_line=False)
        raise
    print(f"published {path}")
    return 0


def cmd_generate(args: argparse.Namespace, settings: Settings) -> int:
    from spark_jobs.experiments.admin.metadata import add_ramps
    from spark_jobs.experiments.core.periods import RampRow
    from spark_jobs.experiments.traffic import TrafficSpec, produce

    overrides = {"seed": args.seed, "n_users": args.users}
    if args.duration is not None:
        overrides["duration_ms"] = args.duration
    if args.start is not None:
        overrides["start_ms"] = args.start
    try:
        spec = TrafficSpec.from_settings(settings.experiments, **overrides)
    except ValueError as exc:  # the arguments and experiments.* make no valid traffic
        raise UsageError(str(exc)) from None
    if args.ramps_csv and Path(args.ramps_csv).is_dir():
        raise UsageError(f"--ramps-csv {args.ramps_csv!r} is a folder, not a file name")
    if args.ramps_csv:
        spec.write_ramps_csv(args.ramps_csv)
        print(f"wrote ramps to {args.ramps_csv}")
    if args.load_metadata:
        rows = [RampRow(**row) for row in spec.ramp_rows()]
        add_ramps(settings.metadata.url, rows)
        print(f"loaded {len(rows)} ramp rows into {settings.metadata.url}")
    with showing("generate", unit="msg", enabled=not args.no_progress):
        step("producing to Kafka")
        report = produce(spec, settings, rate=args.rate, progress=not args.no_progress)
    print(report.summary() if hasattr(report, "summary") else report)
    return 0


def cmd_recompute(args: argparse.Namespace, settings: Settings) -> int:
    from spark_jobs.contracts.tables import TABLE_BATCH_METRICS
    from spark_jobs.experiments.recompute.recompute import recompute_day
    from spark_jobs.streaming.spark_session import build_session
    from spark_jobs.streaming.timing import mark

    mark("recompute", "entered")
    with showing(f"recompute {args.date.isoformat()}"):
        step("starting Spark")
        spark = build_session(settings, app_name=f"tideline-recompute-{args.date.isoformat()}",
                              tools=True)
        mark("recompute", "session_ready")
        try:
            count = recompute_day(spark, settings, args.date)
            mark("recompute", "recomputed")
        finally:
            step("stopping Spark")
            spark.stop()
            mark("recompute", "session_stopped")
    print(f"recomputed {count} rows of {args.date.isoformat()} into {TABLE_BATCH_METRICS}")
    return 0


def cmd_validate(args: argparse.Namespace, settings: Settings) -> int:
    from spark_jobs.experiments.validation.run import ValidationFailed, validate_day

    try:
        with showing(f"validate {args.date.isoformat()}"):  # closed before any output
            summary = validate_day(settings, args.date, manual_run_id(args.run_id))
    except ValidationFailed as failed:
        print(json.dumps(failed.summary, indent=2))
        print(f"tideline: validation failed: {failed}", file=sys.stderr)
        return 1
    print(json.dumps(summary, indent=2))
    return 0


def register(commands: argparse._SubParsersAction) -> None:
    """Add the experiment pipeline's commands to `tideline`."""
    generate = commands.add_parser(
        "generate", help="produce synthetic traffic to Kafka",
        description="Produce the experiments' synthetic traffic (activations and events of "
                    "--users users over --duration of event time) to Kafka, optionally with "
                    "its ramps as a CSV or loaded into the metadata DB.",
        examples=("tideline generate --users 500 --duration 2h --load-metadata",
                  "tideline generate --seed 3 --rate 1000 --ramps-csv ramps.csv"),
        reads=("experiments.*", "kafka.bootstrap", "kafka.client", "metadata.url"))
    generate.add_argument("--seed", type=non_negative_int, default=7)
    generate.add_argument("--users", type=positive_int, default=2000)
    generate.add_argument("--duration", type=duration_ms,
                          help="event-time span, e.g. 2h (compressed time)")
    generate.add_argument("--start", type=time_ms,
                          help="event-time start, ISO 8601 (default 2026-01-01)")
    generate.add_argument("--rate", type=positive_number,
                          help="messages/s (default: as fast as possible)")
    generate.add_argument("--ramps-csv", help="also write the experiments' ramps to this CSV")
    generate.add_argument("--load-metadata", action="store_true",
                          help="also load the experiments' ramps into the metadata DB")
    generate.add_argument("--no-progress", action="store_true",
                          help="no progress line (it shows only when stderr is a terminal)")
    generate.set_defaults(func=cmd_generate)

    metadata = commands.add_parser(
        "metadata", help="experiment metadata (ramps table)",
        description="The experiments' metadata: the ramps table in the metadata DB.",
        examples=("tideline metadata load ramps.csv",))
    metadata_commands = metadata.add_subparsers(dest="action", required=True, metavar="ACTION")
    load = metadata_commands.add_parser(
        "load", help="load ramp rows from a CSV file",
        description="Load ramp rows from a CSV file into the ramps table (a bad row exits 2 "
                    "naming its line and field).",
        examples=("tideline metadata load ramps.csv",), reads=("metadata.url",))
    load.add_argument("file")
    load.set_defaults(func=cmd_metadata_load)

    snapshot = commands.add_parser(
        "snapshot", help="ramp snapshots",
        description="The ramp snapshots the streaming jobs read.",
        examples=("tideline snapshot publish",))
    snapshot_commands = snapshot.add_subparsers(dest="action", required=True, metavar="ACTION")
    publish = snapshot_commands.add_parser(
        "publish", help="publish a ramp snapshot atomically",
        description="Publish the ramps of the metadata DB as a snapshot file, atomically; "
                    "refuse (with an alert) a snapshot that would be silently empty.",
        examples=("tideline snapshot publish",
                  "tideline snapshot publish --as-of 2026-01-02T00:00:00Z --lookback all"),
        reads=("metadata.url", "lake.snapshots", "experiments.period",
               "experiments.snapshot_interval", "alerts.*", "lake.root"))
    publish.add_argument("--as-of", type=time_ms, help="ISO 8601 time (default: now)")
    publish.add_argument("--lookback", type=lookback,
                         help="DURATION or 'all' (default: experiments.period)")
    publish.set_defaults(func=cmd_snapshot_publish)

    recompute = commands.add_parser(
        "recompute", help="batch recomputation of one day's experiment metrics",
        description="Recompute every experiment metrics window ending on one UTC day from the "
                    "raw tables, in batch on Spark, and replace the day in batch_metrics.",
        examples=("tideline recompute --date 2026-01-01",),
        reads=("spark.*", "lake.root", "lake.checkpoints", "metadata.url", "experiments.period",
               "experiments.window", "experiments.critical_event_types"),
    )
    recompute.add_argument("--date", type=parse_date, required=True, help="YYYY-MM-DD (UTC)")
    recompute.set_defaults(func=cmd_recompute)

    validate = commands.add_parser(
        "validate", help="check one day's streaming metrics (Great Expectations)",
        description="Check one day's streaming experiment metrics against the batch "
                    "recomputation (Great Expectations); store the results and Data Docs, alert "
                    "and exit 1 on a failure.",
        examples=("tideline validate --date 2026-01-01",),
        reads=("lake.root", "lake.checkpoints", "metadata.url", "experiments.period",
               "experiments.window", "validation.max_drift", "validation.data_docs",
               "alerts.*"),
    )
    add_day_arguments(validate)
    validate.set_defaults(func=cmd_validate)
