"""Small HTML tables of control-plane data, readable offline (no scripts, no CDN)."""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5rem;color:#1b1f24}
table{border-collapse:collapse;font-size:.9rem}
th,td{border:1px solid #d0d7de;padding:.3rem .6rem;text-align:left;vertical-align:top}
th{background:#f6f8fa} .bad{color:#b42318;font-weight:600} .ok{color:#067647}
nav a{margin-right:1rem}
"""

NAV = (("jobs", "Streaming jobs"), ("alerts", "Alerts"), ("validation", "Validation results"),
       ("data-docs/index.html", "Data Docs"))


def page(title: str, body: str, refresh_s: int | None = None) -> str:
    """A whole HTML page with the Tideline navigation; optional self-refresh."""
    meta = f'<meta http-equiv="refresh" content="{refresh_s}">' if refresh_s else ""
    links = "".join(f'<a href="{href}">{html.escape(text)}</a>' for href, text in NAV)
    return (
        f"<!doctype html><html><head><meta charset='utf-8'>{meta}"
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head>"
        f"<body><nav>{links}</nav><h1>{html.escape(title)}</h1>{body}</body></html>"
    )


@dataclass(frozen=True)
class Link:
    """A cell that links somewhere (the table escapes every other value)."""

    href: str
    text: str


def cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, Link):
        return f'<a href="{html.escape(value.href)}">{html.escape(value.text)}</a>'
    if value is True:
        return '<span class="ok">yes</span>'
    if value is False:
        return '<span class="bad">no</span>'
    return html.escape(str(value))


def table(columns: Sequence[str], rows: Iterable[Sequence[Any]], empty: str) -> str:
    """An HTML table, or a sentence saying there is nothing yet."""
    body = "".join("<tr>" + "".join(f"<td>{cell(v)}</td>" for v in row) + "</tr>" for row in rows)
    if not body:
        return f"<p>{html.escape(empty)}</p>"
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
