"""What `tideline <command> --help` says besides the arguments: a description, examples, and
the config keys the command reads.

A command declares them where it is registered, as three arguments of `add_parser`
(`description=`, `examples=`, `reads=`; see OneLineParser); this module turns them into the
help's epilog. tests/test_cli_help.py walks every command and fails on one without them, or
whose `reads` names a key that does not exist.
"""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Sequence

EVERY_SECTION = "*"  # reads=("*",): the command hands the whole configuration on


def command_epilog(epilog: str | None, examples: Sequence[str], reads: Sequence[str]) -> str:
    """The epilog: `examples:` (one command line each), `reads:` and the given text."""
    parts = []
    if examples:
        parts.append("\n".join(["examples:", *(f"  {line}" for line in examples)]))
    if reads:
        keys = "every section (see `tideline config show`)" if EVERY_SECTION in reads else (
            ", ".join(reads))
        parts.append(f"reads: {keys}")
    if epilog:
        parts.append(epilog)
    return "\n\n".join(parts)


class LinesHelpFormatter(argparse.HelpFormatter):
    """Wraps each line of a description or epilog on its own, so paragraphs and example
    lines keep their breaks; a line starting with blanks (an example) is never wrapped."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        lines = []
        for line in text.splitlines():
            if not line.strip() or line.startswith(" "):
                lines.append(indent + line)
            else:
                lines.extend(textwrap.wrap(line, width, initial_indent=indent,
                                           subsequent_indent=indent))
        return "\n".join(lines)
