"""The `tideline` command line: every entry point of the platform, one subcommand each.

Bad arguments or configuration exit non-zero with a one-line reason, before anything starts.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Sequence
from datetime import UTC, date, datetime
from pathlib import Path

from spark_jobs.config.durations import DurationError, parse_duration_ms
from spark_jobs.settings import ConfigError, Settings, load_settings


class UsageError(ValueError):
    """A wrong argument; the message says what to write instead."""


def _parse_time_ms(text: str) -> int:
    """ISO 8601 (naive means UTC) or epoch milliseconds."""
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"not a time: {text!r} (use ISO 8601 like 2026-01-01T00:00:00Z)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def _lookback_ms(text: str | None, settings: Settings) -> int | None:
    if text is None:
        return settings.experiments.period_ms
    if text == "all":
        return None
    return parse_duration_ms(text)


def cmd_broker(args: argparse.Namespace, settings: Settings) -> int:
    from spark_jobs.local.broker import serve_forever

    port = args.port if args.port is not None else int(settings.kafka.bootstrap.rsplit(":", 1)[1])
    serve_forever(port)
    return 0


def cmd_metadata_load(args: argparse.Namespace, settings: Settings) -> int:
    from spark_jobs.experiments.admin.metadata import load_csv

    count = load_csv(settings.metadata.url, args.file)
    print(f"loaded {count} ramp rows into {settings.metadata.url}")
    return 0


def cmd_snapshot_publish(args: argparse.Namespace, settings: Settings) -> int:
    from spark_jobs.experiments.admin.snapshot import publish_snapshot

    as_of = _parse_time_ms(args.as_of) if args.as_of else int(time.time() * 1000)
    path = publish_snapshot(settings, as_of, _lookback_ms(args.lookback, settings))
    print(f"published {path}")
    return 0


def cmd_generate(args: argparse.Namespace, settings: Settings) -> int:
    from spark_jobs.experiments.admin.metadata import add_ramps
    from spark_jobs.experiments.core.periods import RampRow
    from spark_jobs.experiments.traffic import TrafficSpec, produce

    overrides = {"seed": args.seed, "n_users": args.users}
    if args.duration:
        overrides["duration_ms"] = parse_duration_ms(args.duration)
    if args.start:
        overrides["start_ms"] = _parse_time_ms(args.start)
    spec = TrafficSpec.from_settings(settings.experiments, **overrides)
    if args.ramps_csv:
        spec.write_ramps_csv(args.ramps_csv)
        print(f"wrote ramps to {args.ramps_csv}")
    if args.load_metadata:
        rows = [RampRow(**row) for row in spec.ramp_rows()]
        add_ramps(settings.metadata.url, rows)
        print(f"loaded {len(rows)} ramp rows into {settings.metadata.url}")
    report = produce(spec, settings, rate=args.rate, progress=not args.no_progress)
    print(report.summary() if hasattr(report, "summary") else report)
    return 0


def cmd_job_run(args: argparse.Namespace, settings: Settings) -> int:
    from spark_jobs.streaming.runner import job_spec, run_job

    job_spec(args.name)
    run_job(settings, args.name, available_now=args.available_now)
    return 0


def _parse_date(text: str) -> date:
    """A calendar day like 2026-01-01 (argparse type: a bad value exits 2 with the reason)."""
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date: {text!r} (use YYYY-MM-DD)") from None


def cmd_recompute(args: argparse.Namespace, settings: Settings) -> int:
    from spark_jobs.contracts.tables import TABLE_BATCH_METRICS
    from spark_jobs.experiments.recompute.recompute import recompute_day
    from spark_jobs.streaming.spark_session import build_session

    spark = build_session(settings, app_name=f"tideline-recompute-{args.date.isoformat()}")
    try:
        count = recompute_day(spark, settings, args.date)
    finally:
        spark.stop()
    print(f"recomputed {count} rows of {args.date.isoformat()} into {TABLE_BATCH_METRICS}")
    return 0


def cmd_validate(args: argparse.Namespace, settings: Settings) -> int:
    import json

    from spark_jobs.experiments.validation.run import ValidationFailed, validate_day

    run_id = args.run_id or f"manual__{datetime.now(UTC).strftime('%Y-%m-%dT%H:%M:%SZ')}"
    try:
        summary = validate_day(settings, args.date, run_id)
    except ValidationFailed as failed:
        print(json.dumps(failed.summary, indent=2))
        print(f"tideline: validation failed: {failed}", file=sys.stderr)
        return 1
    print(json.dumps(summary, indent=2))
    return 0


def cmd_samples_shadow(args: argparse.Namespace, settings: Settings) -> int:
    """Compare one day's streaming training samples with a batch recomputation."""
    import json

    from spark_jobs.control.submit import ALERTED_EXIT
    from spark_jobs.samples.shadow.run import ShadowFailed, shadow_day
    from spark_jobs.streaming.spark_session import build_session

    run_id = args.run_id or f"manual__{datetime.now(UTC).strftime('%Y-%m-%dT%H:%M:%SZ')}"
    spark = build_session(settings, app_name=f"tideline-samples-shadow-{args.date.isoformat()}")
    try:
        summary = shadow_day(spark, settings, args.date, run_id, args.run_url)
    except ShadowFailed as failed:
        print(f"tideline: {failed}", file=sys.stderr)
        return ALERTED_EXIT
    finally:
        spark.stop()
    print(json.dumps(summary, indent=2))
    return 0


def _streaming_jobs(names: Sequence[str], settings: Settings) -> list[str]:
    """The named streaming jobs (checked), or the deployed ones (`monitor.jobs`) when none is
    named."""
    from spark_jobs.control.monitor.inputs import check_job, deployed_jobs

    return [check_job(name) for name in names] or list(deployed_jobs(settings))


def cmd_jobs_status(args: argparse.Namespace, settings: Settings) -> int:
    from spark_jobs.control.monitor import job_status, render_summary

    jobs = _streaming_jobs(args.names, settings)
    print(render_summary([job_status(settings, job) for job in jobs]))
    return 0


def cmd_jobs_start(args: argparse.Namespace, settings: Settings) -> int:
    from spark_jobs.control.monitor.restarts import clear_restarts
    from spark_jobs.control.monitor.supervisor import JobAlreadyRunningError, launch_job

    for job in _streaming_jobs(args.names, settings):
        try:
            record = launch_job(settings, job)
        except JobAlreadyRunningError as exc:
            print(exc)
            continue
        clear_restarts(settings, job)  # started by hand: an old restart loop is forgiven
        print(f"{job}: started as pid {record.pid}; log {record.log}")
    return 0


def cmd_jobs_stop(args: argparse.Namespace, settings: Settings) -> int:
    from spark_jobs.control.monitor.supervisor import stop_jobs

    jobs = _streaming_jobs(args.names, settings)
    stopped = stop_jobs(settings, jobs)
    for job in jobs:
        print(f"{job}: {'stopped' if job in stopped else 'was not running'}")
    return 0


def cmd_jobs_watch(args: argparse.Namespace, settings: Settings) -> int:
    from spark_jobs.control.monitor import render_summary, watch_job

    statuses = [watch_job(settings, job) for job in _streaming_jobs(args.names, settings)]
    print(render_summary(statuses))
    return 0 if all(status["healthy"] for status in statuses) else 1


def cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    from spark_jobs.local.demo import run_demo

    return run_demo(settings, rate=args.rate, seconds=args.seconds)


def _rule_text(source: str) -> str:
    """A rule given inline as JSON or as @FILE."""
    if source.startswith("@"):
        path = Path(source[1:])
        if not path.is_file():
            raise UsageError(f"no rule file {path}")
        return path.read_text()
    return source


def cmd_rules(args: argparse.Namespace, settings: Settings) -> int:
    from spark_jobs.fraud import admin as fraud_admin
    from spark_jobs.fraud.core.rules import RuleState

    try:
        if args.action == "list":
            print(fraud_admin.render_rules(fraud_admin.current_rules(settings)))
            print(f"\nlatest alerts (fraud_alerts, newest first, up to {args.alerts}):")
            print(fraud_admin.render_alerts(fraud_admin.recent_alerts(settings, args.alerts)))
            return 0
        if args.action == "add":
            rule = fraud_admin.send_rule(settings, _rule_text(args.rule))
        elif args.action == "delete":
            rule = fraud_admin.delete_rule(settings, args.rule_id)
        else:
            state = RuleState.PAUSE if args.action == "pause" else RuleState.ACTIVE
            rule = fraud_admin.set_state(settings, args.rule_id, state)
    except fraud_admin.RuleCommandError as exc:
        raise UsageError(str(exc)) from None
    target = "control" if rule.rule_id is None else f"rule {rule.rule_id}"
    print(f"sent {target} ({rule.state.value}) to the rules topic")
    return 0


def cmd_dashboard(args: argparse.Namespace, settings: Settings) -> int:
    from spark_jobs.results.dashboard.server import DashboardStartError, serve_forever

    try:
        serve_forever(settings, port=args.port)
    except DashboardStartError as exc:
        raise UsageError(str(exc)) from None
    return 0


def cmd_platform(args: argparse.Namespace, settings: Settings) -> int:
    from spark_jobs.local.platform_stack import run_platform

    return run_platform(settings, users=args.users, seconds=args.seconds)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tideline",
        description="Tideline: real-time experiment analytics on Spark.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    broker = commands.add_parser("broker", help="start the embedded Kafka broker (Tansu)")
    broker.add_argument("--port", type=int, help="port on 127.0.0.1 (default: kafka.bootstrap)")
    broker.set_defaults(func=cmd_broker)

    generate = commands.add_parser("generate", help="produce synthetic traffic to Kafka")
    generate.add_argument("--seed", type=int, default=7)
    generate.add_argument("--users", type=int, default=2000)
    generate.add_argument("--duration", help="event-time span, e.g. 2h (compressed time)")
    generate.add_argument("--start", help="event-time start, ISO 8601 (default 2026-01-01)")
    generate.add_argument("--rate", type=float, help="messages/s (default: as fast as possible)")
    generate.add_argument("--ramps-csv", help="also write the experiments' ramps to this CSV")
    generate.add_argument("--load-metadata", action="store_true",
                          help="also load the experiments' ramps into the metadata DB")
    generate.add_argument("--no-progress", action="store_true", help="no progress bar")
    generate.set_defaults(func=cmd_generate)

    metadata = commands.add_parser("metadata", help="experiment metadata (ramps table)")
    metadata_commands = metadata.add_subparsers(dest="action", required=True, metavar="ACTION")
    load = metadata_commands.add_parser("load", help="load ramp rows from a CSV file")
    load.add_argument("file")
    load.set_defaults(func=cmd_metadata_load)

    snapshot = commands.add_parser("snapshot", help="ramp snapshots")
    snapshot_commands = snapshot.add_subparsers(dest="action", required=True, metavar="ACTION")
    publish = snapshot_commands.add_parser("publish", help="publish a ramp snapshot atomically")
    publish.add_argument("--as-of", help="ISO 8601 time (default: now)")
    publish.add_argument("--lookback", help="DURATION or 'all' (default: experiments.period)")
    publish.set_defaults(func=cmd_snapshot_publish)

    job = commands.add_parser("job", help="streaming jobs")
    job_commands = job.add_subparsers(dest="action", required=True, metavar="ACTION")
    run = job_commands.add_parser("run", help="run a streaming job")
    run.add_argument(
        "name", help="filter_events, filter_activations, experiment_metrics, fraud_rules or "
        "training_samples"
    )
    run.add_argument("--available-now", action="store_true",
                     help="process what is in the topics, close the windows, and stop")
    run.set_defaults(func=cmd_job_run)

    jobs = commands.add_parser("jobs", help="deploy and watch the streaming jobs (spark-submit)")
    jobs_commands = jobs.add_subparsers(dest="action", required=True, metavar="ACTION")
    for action, func, text in (
        ("status", cmd_jobs_status, "state, rows/s, lag, watermark and problems of each job"),
        ("start", cmd_jobs_start, "start jobs as their own Spark applications"),
        ("stop", cmd_jobs_stop, "stop jobs cleanly (the streaming_jobs DAG restarts them "
                                "unless it is paused)"),
        ("watch", cmd_jobs_watch, "one watch pass: start or restart, judge, alert; "
                                  "exit 1 if a job is unhealthy"),
    ):
        jobs_action = jobs_commands.add_parser(action, help=text)
        jobs_action.add_argument("names", nargs="*", metavar="NAME",
                                 help="filter_events, filter_activations, experiment_metrics "
                                      "(default: all)")
        jobs_action.set_defaults(func=func)

    recompute = commands.add_parser(
        "recompute", help="batch recomputation of one day's experiment metrics"
    )
    recompute.add_argument("--date", type=_parse_date, required=True, help="YYYY-MM-DD (UTC)")
    recompute.set_defaults(func=cmd_recompute)

    validate = commands.add_parser(
        "validate", help="check one day's streaming metrics (Great Expectations)"
    )
    validate.add_argument("--date", type=_parse_date, required=True, help="YYYY-MM-DD (UTC)")
    validate.add_argument("--run-id", help="id stored with the results (default: manual__<now>)")
    validate.set_defaults(func=cmd_validate)

    demo = commands.add_parser("demo", help="run the whole pipeline on embedded defaults")
    demo.add_argument("--rate", type=float, default=2000.0, help="generator messages/s")
    demo.add_argument("--seconds", type=float, help="stop after this long (default: Ctrl-C)")
    demo.set_defaults(func=cmd_demo)

    samples = commands.add_parser("samples", help="training samples: shadow validation")
    samples_commands = samples.add_subparsers(dest="action", required=True, metavar="ACTION")
    shadow = samples_commands.add_parser(
        "shadow", help="compare a day's streaming samples with a batch recomputation "
        "(exit 3 when they disagree, after alerting)")
    shadow.add_argument("--date", type=_parse_date, required=True, help="YYYY-MM-DD (UTC)")
    shadow.add_argument("--run-id", help="id stored with the results (default: manual__<now>)")
    shadow.add_argument("--run-url", help="link stored with the results and alerts")
    shadow.set_defaults(func=cmd_samples_shadow)

    rules = commands.add_parser("rules", help="fraud rules: add, pause, activate, delete, list")
    rules_commands = rules.add_subparsers(dest="action", required=True, metavar="ACTION")
    add = rules_commands.add_parser("add", help="publish a rule (JSON text or @FILE)")
    add.add_argument("rule", help="the rule's JSON (the Flink demo's form) or @FILE")
    for action, text in (("pause", "keep collecting, stop alerting"),
                         ("activate", "alert again (the window covers the pause)"),
                         ("delete", "drop the rule and its state")):
        command = rules_commands.add_parser(action, help=text)
        command.add_argument("rule_id", type=int)
    listing = rules_commands.add_parser("list", help="current rules and the latest alerts")
    listing.add_argument("--alerts", type=int, default=10, help="how many alerts (default 10)")
    for command in rules_commands.choices.values():
        command.set_defaults(func=cmd_rules)

    dashboard = commands.add_parser(
        "dashboard", help="experiment results dashboard on 127.0.0.1 (verdicts, lift, bands)"
    )
    dashboard.add_argument("--port", type=int, help="port (default: dashboard.port, 8050)")
    dashboard.set_defaults(func=cmd_dashboard)

    platform = commands.add_parser(
        "platform",
        help="the whole platform on embedded defaults, managed in the Airflow UI: broker, "
             "metadata DB, Airflow, streaming jobs (deployed by its DAG), synthetic traffic",
    )
    platform.add_argument("--users", type=int, default=10_000,
                          help="synthetic users (traffic follows the clock: ~20 msg/s per 1000)")
    platform.add_argument("--seconds", type=float, help="stop after this long (default: Ctrl-C)")
    platform.set_defaults(func=cmd_platform)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        settings = load_settings()
        return int(args.func(args, settings) or 0)
    except (ConfigError, DurationError, UsageError, ValueError, FileNotFoundError) as exc:
        print(f"tideline: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
