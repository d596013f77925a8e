"""`tideline config show`: the effective settings and where each came from."""

from __future__ import annotations

import argparse
from typing import Any

from spark_jobs.config.cli_args import UsageError


def cmd_config_show(args: argparse.Namespace, settings: Any) -> int:
    from spark_jobs.config.show import sections, show_lines

    names = [name for name, _ in sections(settings)]
    if args.section is not None and args.section not in names:
        raise UsageError(f"unknown config section {args.section!r} (known: {', '.join(names)})")
    print("\n".join(show_lines(settings, args.section)))
    return 0


def register(commands: argparse._SubParsersAction) -> None:
    """Add `tideline config show` to `tideline` (a bad configuration exits 2 before it runs)."""
    config = commands.add_parser(
        "config", help="the effective settings",
        description="The effective settings: defaults < the file named by TIDELINE_CONFIG < "
                    "TIDELINE_<SECTION>__<KEY> environment variables.",
        examples=("tideline config show",))
    config_commands = config.add_subparsers(dest="action", required=True, metavar="ACTION")
    show = config_commands.add_parser(
        "show", help="every setting: its value, where it came from and what it means",
        description="Print every setting, one line each: its value, the layers it came from "
                    "and what it means (a bad configuration exits 2 before it prints).",
        examples=("tideline config show", "tideline config show --section kafka"),
        reads=("*",),
    )
    show.add_argument("--section", metavar="NAME", help="only this section (e.g. kafka)")
    show.set_defaults(func=cmd_config_show)
