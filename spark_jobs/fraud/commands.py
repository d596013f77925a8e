"""`tideline rules`: fraud rules for people (add, pause, activate, delete, list) and the offline
check of a day's alerts (check)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from spark_jobs.config.cli_args import (
    UsageError,
    add_day_arguments,
    manual_run_id,
    positive_int,
)
from spark_jobs.settings import Settings


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


def cmd_rules_check(args: argparse.Namespace, settings: Settings) -> int:
    """Compare one day's fraud_alerts with the replay of the topics through the pure engine."""
    from spark_jobs.control.submit import ALERTED_EXIT
    from spark_jobs.fraud.shadow.run import RulesCheckFailed, check_day

    try:
        summary = check_day(settings, args.date, manual_run_id(args.run_id), args.run_url)
    except RulesCheckFailed as failed:
        print(f"tideline: {failed}", file=sys.stderr)
        return ALERTED_EXIT
    print(json.dumps(summary, indent=2))
    return 0


def register(commands: argparse._SubParsersAction) -> None:
    """Add `tideline rules` to `tideline`."""
    rules = commands.add_parser(
        "rules", help="fraud rules: add, pause, activate, delete, list, check",
        description="Manage the fraud rules (sent to the rules topic) and check a day's alerts.",
        examples=("tideline rules list", "tideline rules add @rule.json"))
    rules_commands = rules.add_subparsers(dest="action", required=True, metavar="ACTION")
    sends = ("kafka.bootstrap", "kafka.client", "kafka.partitions")
    add = rules_commands.add_parser(
        "add", help="publish a rule (JSON text or @FILE)",
        description="Publish a rule to the rules topic; the fraud_rules job applies it.",
        examples=("tideline rules add @rule.json",), reads=sends)
    add.add_argument("rule", help="the rule's JSON (the Flink demo's form) or @FILE")
    for action, text in (("pause", "keep collecting, stop alerting"),
                         ("activate", "alert again (the window covers the pause)"),
                         ("delete", "drop the rule and its state")):
        command = rules_commands.add_parser(
            action, help=text, description=f"Rule RULE_ID: {text}.",
            examples=(f"tideline rules {action} 1",), reads=sends)
        command.add_argument("rule_id", type=int)
    listing = rules_commands.add_parser(
        "list", help="current rules and the latest alerts",
        description="The current rules (read back from the rules topic) and the latest rows "
                    "of fraud_alerts.",
        examples=("tideline rules list --alerts 20",), reads=(*sends, "lake.root"))
    listing.add_argument("--alerts", type=positive_int, default=10,
                         help="how many alerts (default 10)")
    for command in rules_commands.choices.values():
        command.set_defaults(func=cmd_rules)
    check = rules_commands.add_parser(
        "check", help="compare a day's fraud_alerts with a replay of the topics through the "
        "engine (exit 3 when they disagree, after alerting)",
        description="Replay one day of the topics through the pure fraud engine and compare "
                    "with fraud_alerts; store the checks, alert and exit 3 when they disagree.",
        examples=("tideline rules check --date 2026-01-01",),
        reads=("kafka.bootstrap", "kafka.client", "lake.root", "lake.checkpoints", "fraud.*",
               "alerts.*"))
    add_day_arguments(check, run_url=True)
    check.set_defaults(func=cmd_rules_check)
