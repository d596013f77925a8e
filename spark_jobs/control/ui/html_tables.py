"""HTML of the Tideline pages in the Airflow UI: tables, state badges, filters, the page.

The pages sit in an iframe of Airflow's UI, so they borrow its look (its fonts, its state
colours) and open links to Airflow's own pages in the whole window (`Link.top`). They need no
CDN; the only script reloads the page every `refresh_s` seconds (unless a filter field is
being edited) and sends a job action's POST.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# Airflow 3's state colours (its UI theme): success green, failed red, running cyan...
STATE_COLOURS = {
    "success": "#16a34a", "failed": "#dc2626", "running": "#0891b2", "queued": "#78716c",
    "up_for_retry": "#ca8a04", "warning": "#ea580c", "stopped": "#71717a",
    "external": "#7c3aed",
}

STYLE = """
body{font-family:Inter,system-ui,-apple-system,"Segoe UI",sans-serif;margin:1rem 1.5rem;
color:#18181b;font-size:14px}
h1{font-size:1.4rem;font-weight:600;margin:.6rem 0} h2{font-size:1.1rem;font-weight:600}
table{border-collapse:collapse;width:100%;margin:.5rem 0 1rem}
th,td{border-bottom:1px solid #e4e4e7;padding:.45rem .6rem;text-align:left;vertical-align:top}
th{font-weight:600;color:#52525b;background:#fafafa}
tr:hover td{background:#f4f4f5}
a{color:#0369a1;text-decoration:none} a:hover{text-decoration:underline}
.bad{color:#b42318;font-weight:600} .ok{color:#067647}
.badge{display:inline-block;padding:.05rem .5rem;border-radius:999px;color:#fff;font-size:.8rem;
font-weight:600}
nav a{margin-right:1rem;font-weight:500} .note{color:#71717a;font-size:.85rem}
form.filters{display:flex;gap:.6rem;align-items:end;flex-wrap:wrap;margin:.4rem 0}
form.filters label{display:flex;flex-direction:column;font-size:.8rem;color:#52525b}
input,select,button{font:inherit;padding:.25rem .5rem;border:1px solid #d4d4d8;border-radius:6px;
background:#fff} button{cursor:pointer} button:hover{background:#f4f4f5}
"""

NAV = (("jobs", "Streaming jobs"), ("alerts", "Alerts"), ("validation", "Validation results"),
       ("data-docs/index.html", "Data Docs"))

# reload unless a filter field has the focus; POST a job action (Airflow's login cookie goes
# with it, the header proves the page sent it: a form of another site cannot set one)
SCRIPT = """
function tlReload(s){setTimeout(function(){var a=document.activeElement;
if(a&&a.form){tlReload(5)}else{location.reload()}},s*1000)}
function tlAction(b){if(!confirm(b.dataset.confirm))return;b.disabled=true;
fetch(b.dataset.url,{method:'POST',headers:{'X-Tideline-Action':'1'},credentials:'same-origin'})
.then(function(r){return r.json()}).then(function(j){alert(j.message||j.detail);location.reload()})
.catch(function(e){alert(e);b.disabled=false})}
"""


def page(title: str, body: str, refresh_s: int | None = None) -> str:
    """A whole HTML page with the Tideline navigation; reloads itself every `refresh_s`."""
    links = "".join(f'<a href="{href}">{html.escape(text)}</a>' for href, text in NAV)
    refresh = ""
    if refresh_s:
        refresh = f"<script>tlReload({refresh_s})</script>"
        body += f"<p class='note'>This page refreshes every {refresh_s} s.</p>"
    return (
        f"<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>{STYLE}</style>"
        f"<script>{SCRIPT}</script></head>"
        f"<body><nav>{links}</nav><h1>{html.escape(title)}</h1>{body}{refresh}</body></html>"
    )


@dataclass(frozen=True)
class Link:
    """A cell that links somewhere (the table escapes every other value); `top`: open in
    the whole window (a page of Airflow's UI, not inside the plugin's frame)."""

    href: str
    text: str
    top: bool = False


@dataclass(frozen=True)
class Badge:
    """A state shown in Airflow's colour for it (`colour`: a key of STATE_COLOURS)."""

    text: str
    colour: str


@dataclass(frozen=True)
class Action:
    """A button that POSTs to `url` after the person confirms `confirm`."""

    url: str
    text: str
    confirm: str


def cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, Link):
        target = ' target="_top"' if value.top else ""
        return f'<a href="{html.escape(value.href)}"{target}>{html.escape(value.text)}</a>'
    if isinstance(value, Badge):
        colour = STATE_COLOURS.get(value.colour, STATE_COLOURS["queued"])
        return (f'<span class="badge state-{html.escape(value.colour)}" '
                f'style="background:{colour}">{html.escape(value.text)}</span>')
    if isinstance(value, Action):
        return (f'<button type="button" data-url="{html.escape(value.url)}" '
                f'data-confirm="{html.escape(value.confirm)}" onclick="tlAction(this)">'
                f"{html.escape(value.text)}</button>")
    if isinstance(value, list | tuple):
        return " · ".join(cell(v) for v in value if v is not None)
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


def filters(fields: Sequence[tuple[str, str]], values: Mapping[str, str | None],
            choices: Mapping[str, Sequence[str]] | None = None) -> str:
    """A GET form of filter fields (name, label): a text input each, or a select of
    `choices[name]` (its first choice the empty "all"); the current values filled in."""
    parts = []
    for name, label in fields:
        value = values.get(name) or ""
        if choices and name in choices:
            options = "".join(
                f'<option value="{html.escape(c)}"{" selected" if c == value else ""}>'
                f"{html.escape(c or 'all')}</option>" for c in choices[name])
            field = f'<select name="{name}">{options}</select>'
        else:
            field = f'<input name="{name}" value="{html.escape(value)}">'
        parts.append(f"<label>{html.escape(label)}{field}</label>")
    return (f"<form class='filters' method='get'>{''.join(parts)}"
            "<button type='submit'>Filter</button><a href='?'>Clear</a></form>")
