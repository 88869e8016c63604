"""The pieces the data card's page is made of: escaped text, numbers, tables, sections and figures."""

from __future__ import annotations

import html

from bertcorpus.pipeline.stats.plots import PLOT_PIXELS
from bertcorpus.pipeline.stats.stages import REPORT_FILES


def escape(value) -> str:
    return html.escape(str(value), quote=True)


def number(value) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:,.2f}"
    return f"{value:,}" if isinstance(value, int) else escape(value)


def share(value, digits: int = 2) -> str | None:
    return None if value is None else f"{value:.{digits}%}"


def table(header: list[str], rows: list[list], numeric: set[int] = frozenset()) -> str:
    """A table of HTML cells (numbers in the `numeric` columns are formatted here); no rows, no table."""
    if not rows:
        return ""
    head = "".join(f"<th>{h}</th>" for h in header)
    body = "".join(
        "<tr>"
        + "".join(f'<td class="n">{number(c)}</td>' if i in numeric else f"<td>{c}</td>" for i, c in enumerate(row))
        + "</tr>"
        for row in rows
    )
    return f'<div class="table"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def section(key: str, title: str, body: str) -> str:
    return f'<section id="{key}"><h2>{title}</h2>{body}</section>' if body else ""


def figure_html(plots: dict[str, str], key: str, caption: str) -> str:
    if key not in plots:
        return ""
    width, height = PLOT_PIXELS
    return (
        f'<figure><img src="{REPORT_FILES}/{escape(plots[key])}" alt="{escape(caption)}" width="{width}" '
        f'height="{height}"><figcaption>{escape(caption)}</figcaption></figure>'
    )


def plot_grid(figures: list[str]) -> str:
    shown = "".join(figures)
    return f'<div class="plots">{shown}</div>' if shown else ""


def short_sha(sha: str | None) -> str:
    return f'<code title="{escape(sha)}">{escape(sha[:16])}…</code>' if sha else "—"


def stage_dir(name: str) -> str:
    return f"<code>{escape(name)}/</code>"
