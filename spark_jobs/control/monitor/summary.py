"""Job statuses as text a person reads in a task log or a terminal: one line, or a table."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from spark_jobs.streaming.drops import describe_drops

COLUMNS = ("JOB", "STATE", "PID", "IN/S", "DONE/S", "LAG", "WATERMARK", "LAST REPORT",
           "PROBLEMS", "ACTIONS")


def age_text(ms: Any) -> str:
    """`4s`, `3m05s`, `2h10m`; `-` when unknown."""
    if ms is None:
        return "-"
    seconds = max(0, int(ms) // 1000)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def _rate(value: Any) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _count(value: Any) -> str:
    return "-" if value is None else f"{value:,}"


def _problems(status: Mapping[str, Any]) -> str:
    return ",".join(p["kind"] for p in status.get("problems", [])) or "-"


def _cells(status: Mapping[str, Any]) -> tuple[str, ...]:
    return (
        str(status["job"]),
        str(status["state"]),
        "-" if status.get("pid") is None else str(status["pid"]),
        _rate(status.get("input_rows_per_s")),
        _rate(status.get("processed_rows_per_s")),
        _count(status.get("lag")),
        status.get("watermark") or "-",
        age_text(status.get("last_report_age_ms")),
        _problems(status),
        "; ".join(status.get("actions", [])) or "-",
    )


def render_summary(statuses: Sequence[Mapping[str, Any]]) -> str:
    """An aligned table of job statuses (as returned by `watch_job`), header first."""
    rows = [COLUMNS, *(_cells(s) for s in statuses)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS) - 1)]
    numeric = {3, 4, 5}  # right-aligned
    lines = []
    for row in rows:
        cells = [
            cell.rjust(widths[i]) if i in numeric and row is not COLUMNS else cell.ljust(widths[i])
            for i, cell in enumerate(row[:-1])
        ]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
    return "\n".join(lines)


def describe(status: Mapping[str, Any]) -> str:
    """One line for the log: state, throughput, lag, watermark, problems and actions."""
    pid = f" (pid {status['pid']})" if status.get("pid") is not None else ""
    text = (
        f"{status['job']}: {status['state']}{pid}; "
        f"in {_rate(status.get('input_rows_per_s'))} rows/s, "
        f"done {_rate(status.get('processed_rows_per_s'))} rows/s; "
        f"lag {_count(status.get('lag'))}; watermark {status.get('watermark') or '-'}; "
        f"last report {age_text(status.get('last_report_age_ms'))} ago"
    )
    if status.get("drops"):
        text += f"; dropped: {describe_drops(status['drops'])}"
    problems = status.get("problems", [])
    text += "; " + ("; ".join(f"{p['kind']}: {p['message']}" for p in problems) or "healthy")
    if status.get("actions"):
        text += "; did: " + "; ".join(status["actions"])
    return text
