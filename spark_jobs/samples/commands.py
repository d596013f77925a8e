"""`tideline samples`: the training samples' shadow validation."""

from __future__ import annotations

import argparse
import json
import sys

from spark_jobs.config.cli_args import add_day_arguments, manual_run_id
from spark_jobs.config.steps import showing, step
from spark_jobs.settings import Settings


def cmd_samples_shadow(args: argparse.Namespace, settings: Settings) -> int:
    """Compare one day's streaming training samples with a batch recomputation."""
    from spark_jobs.control.submit import ALERTED_EXIT
    from spark_jobs.samples.shadow.run import ShadowFailed, shadow_day
    from spark_jobs.streaming.spark_session import build_session

    run_id = manual_run_id(args.run_id)
    try:
        with showing(f"samples shadow {args.date.isoformat()}"):  # closed before any output
            step("starting Spark")
            spark = build_session(settings, tools=True,
                                  app_name=f"tideline-samples-shadow-{args.date.isoformat()}")
            try:
                summary = shadow_day(spark, settings, args.date, run_id, args.run_url)
            finally:
                step("stopping Spark")
                spark.stop()
    except ShadowFailed as failed:
        print(f"tideline: {failed}", file=sys.stderr)
        return ALERTED_EXIT
    print(json.dumps(summary, indent=2))
    return 0


def register(commands: argparse._SubParsersAction) -> None:
    """Add `tideline samples` to `tideline`."""
    samples = commands.add_parser(
        "samples", help="training samples: shadow validation",
        description="The training samples' daily shadow validation.",
        examples=("tideline samples shadow --date 2026-01-01",))
    samples_commands = samples.add_subparsers(dest="action", required=True, metavar="ACTION")
    shadow = samples_commands.add_parser(
        "shadow", help="compare a day's streaming samples with a batch recomputation "
        "(exit 3 when they disagree, after alerting)",
        description="Recompute one day's training samples in batch from the topics and "
                    "compare them with the streaming ones; store both checks, alert and exit 3 "
                    "when the match rate is under samples.min_match_rate.",
        examples=("tideline samples shadow --date 2026-01-01",),
        reads=("spark.*", "lake.root", "lake.checkpoints", "kafka.bootstrap", "kafka.client",
               "samples.window", "samples.lateness", "samples.dedup_ttl", "samples.signals",
               "samples.min_match_rate", "alerts.*"))
    add_day_arguments(shadow, run_url=True)
    shadow.set_defaults(func=cmd_samples_shadow)
