"""The HTML page kit: self-contained, offline report pages.

A page is a list of :class:`Section`; each item is a plotly Figure, a circuitsvis view (a
``RenderedHTML`` or its HTML), a :class:`Row` of items shown side by side, or trusted HTML (build it
with :func:`text`, :func:`table`, :func:`kv_table`, :func:`fold`). Plotly's JS is inlined once in ``<head>``; the
circuitsvis bundle is inlined once too (:mod:`.cv`; its views then only carry their render call).
No CDN.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import plotly.graph_objects as go
from circuitsvis.utils.render import RenderedHTML

from interp_toolkit.views import cv


@dataclass
class Row:
    """Items shown side by side (e.g. one figure per run)."""

    items: list[Item]
    captions: list[str] | None = None
    cls: str = "row"  # the grid's CSS class (``first``: a wide cell beside a figure)


@dataclass
class Section:
    title: str
    items: list[Item] = field(default_factory=list)
    intro: str = ""  # plain text, escaped
    anchor: str | None = None
    folded: bool = False  # drawn closed (``<details>``): the title shows, the rest on a click


#: What a section (or a row) can hold: see the module docstring.
Item = Row | go.Figure | RenderedHTML | str


# ---------------------------------------------------------------- HTML helpers


def text(s: str, tag: str = "p", cls: str | None = None) -> str:
    c = f' class="{cls}"' if cls else ""
    return f"<{tag}{c}>{html.escape(s)}</{tag}>"


def cell(v: object) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (list, tuple)):
        return html.escape(", ".join(map(str, v))) if v else "—"
    if v is None or v == "":
        return "—"
    return html.escape(str(v))


def table(
    header: Sequence[str],
    rows: Sequence[Sequence[object]],
    *,
    raw: Sequence[int] = (),
    cls: str = "",
) -> str:
    """An HTML table; cells are escaped except in the column indices listed in ``raw``."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>"
        + "".join(f"<td>{v if i in raw else cell(v)}</td>" for i, v in enumerate(r))
        + "</tr>"
        for r in rows
    )
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


#: A list longer than this folds on a page (:func:`fold`).
FOLD_AT = 6


def fold(items: Sequence[str], noun: str, *, at: int = FOLD_AT) -> str:
    """Trusted HTML for a list of short strings (escaped): joined with '; ' when there are at
    most ``at``, else folded as ``<details><summary>N noun</summary>…</details>``; '—' when
    empty."""
    if not items:
        return "—"
    body = html.escape("; ".join(items))
    if len(items) <= at:
        return body
    return f"<details><summary>{len(items)} {html.escape(noun)}</summary>{body}</details>"


def _flatten(d: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.extend(_flatten(v, key + "."))
        elif isinstance(v, (dict, list)) and len(json.dumps(v)) >= 200:
            out.append((key, json.dumps(v)[:200] + "…"))
        else:
            out.append((key, v))
    return out


def kv_table(d: dict[str, Any]) -> str:
    """A two-column table of a (nested) dict."""
    return table(["setting", "value"], _flatten(d), cls="kv")


# ---------------------------------------------------------------- page assembly


#: The band at a figure's top that plotly's mode bar (its toolbar, top right) takes, in px:
#: titles start below it, so the mode bar never covers them.
MODEBAR_PX = 36
#: Space between a title's last line (or a subplot's title) and the plot area, in px.
TITLE_GAP_PX = 14
#: The narrowest a figure is drawn on a page: a :class:`Row`'s cell (``.row`` in :data:`CSS`).
CELL_MIN_PX = 440
#: Plotly's line spacing and the width of an average title character, in font sizes.
LINE_EM, CHAR_EM = 1.3, 0.6


def _title_lines(title: str, width_px: float, size: float) -> list[str]:
    """The title's lines: its own ``<br>`` breaks, and plain-text parts wrapped to fit
    ``width_px`` (parts with other markup tags, ``<b>`` etc., are kept whole)."""
    import textwrap

    fits = max(12, int(0.9 * width_px / (CHAR_EM * size)))
    lines: list[str] = []
    for part in re.split(r"<br\s*/?>", title):
        tagged = re.search(r"</?[A-Za-z]", part)
        lines += [part] if tagged else textwrap.wrap(part, fits) or [part]
    return lines


def page_layout(fig: go.Figure) -> go.Figure:
    """A copy of ``fig`` laid out for a page, the one place every figure's top is set: the title
    is wrapped to the figure's width and placed below the mode bar's band (:data:`MODEBAR_PX`,
    ``yref="container"``), the top margin holds the band, the title's lines and the top
    subplot's title, and a fixed height grows by as much, so the plot keeps its area."""
    fig = go.Figure(fig)
    layout = fig.layout
    size = layout.title.font.size or round(1.4 * (layout.font.size or 12))
    top = MODEBAR_PX
    if layout.title.text:
        lines = _title_lines(layout.title.text, float(layout.width or CELL_MIN_PX), float(size))
        fig.update_layout(
            title={
                "text": "<br>".join(lines),
                "yref": "container",
                "y": 1,
                "yanchor": "top",
                # plotly's pad places the first line's baseline: its top sits one font size
                # higher (Chromium measured a title 15 px into the band with pad = the band)
                "pad": {"t": MODEBAR_PX + round(size)},
            }
        )
        top += round(LINE_EM * size * len(lines))
    # subplot titles (make_subplots) sit on the top plot's edge, in the margin
    above = [
        a
        for a in layout.annotations
        if a.yref == "paper" and a.y is not None and a.y >= 1 and a.yanchor == "bottom"
    ]
    if above:
        top += round(LINE_EM * max(a.font.size or 16 for a in above)) + 4
    top += TITLE_GAP_PX
    before = layout.margin.t if layout.margin.t is not None else 100  # plotly's default
    if top > before and layout.height is not None:
        fig.update_layout(height=layout.height + top - before)
    fig.update_layout(margin={"t": max(top, before if layout.margin.t is not None else 0)})
    return fig


#: How every figure is drawn on a page (plotly's ``config``).
FIGURE_CONFIG = {"displaylogo": False, "responsive": True}


def _item_html(item: Item, state: dict[str, bool]) -> str:
    if isinstance(item, Row):
        caps = item.captions or [""] * len(item.items)
        cells = "".join(
            f'<div class="cell">{text(c, "div", "caption") if c else ""}{_item_html(it, state)}</div>'
            for it, c in zip(item.items, caps, strict=False)
        )
        return f'<div class="{item.cls}">{cells}</div>'
    if isinstance(item, go.Figure):
        state["plotly"] = True
        fig = page_layout(item).to_html(
            full_html=False, include_plotlyjs=False, config=FIGURE_CONFIG
        )
        return f'<div class="fig">{fig}</div>'
    if isinstance(item, RenderedHTML):
        item = item.local_src
    if isinstance(item, str):
        frag, used = cv.page_fragment(item)
        state["circuitsvis"] |= used
        return frag
    raise TypeError(f"cannot put a {type(item).__name__} in a report")


CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;background:#f6f7f9;color:#1d232b}
header{background:#23395b;color:#fff;padding:18px 32px}
header h1{margin:0;font-size:1.6em} header p{margin:6px 0 0;opacity:.85}
nav{padding:8px 32px;background:#e8ecf2;font-size:.9em} nav a{margin-right:14px;color:#23395b}
main{max-width:1280px;margin:0 auto;padding:8px 32px 40px}
section{background:#fff;border-radius:8px;box-shadow:0 1px 3px rgba(0,0,0,.08);margin:18px 0;padding:6px 20px 16px}
h2{color:#23395b;border-bottom:1px solid #dde3ea;padding-bottom:4px}
table{border-collapse:collapse;margin:8px 0;font-size:.92em}
th,td{border:1px solid #d5dbe3;padding:4px 9px;text-align:left;vertical-align:top}
th{background:#eef2f7} table.kv td:first-child{font-family:ui-monospace,monospace;color:#445}
td.pass,span.pass{color:#1a7f37;font-weight:600} td.fail,span.fail{color:#c62828;font-weight:600}
.row{display:grid;grid-template-columns:repeat(auto-fill,minmax(CELL_MINpx,1fr));gap:16px}.cell{min-width:0}
.caption{font-weight:600;margin:6px 0}
pre.sample{white-space:pre-wrap;background:#f3f5f8;padding:8px;border-radius:6px;font-size:.9em}
.finding{font-size:1.05em;background:#fff8e1;border-left:4px solid #f0b400;padding:8px 14px}
.note{color:#556;font-size:.9em}
details.section>summary{cursor:pointer;list-style:none} details.section>summary h2{display:inline}
details.section>summary::before{content:"▸ ";color:#23395b} details.section[open]>summary::before{content:"▾ "}
.first{display:grid;grid-template-columns:minmax(0,1fr) 480px;gap:14px;align-items:start}
table.claims{font-size:.8em;margin:4px 0} table.claims td,table.claims th{padding:3px 6px}
table.claims .ours{font-weight:400;color:#333} table.claims td.post,table.claims td.criterion{color:#556}
td.reproduced b{color:#1a7f37} td.not-reproduced b{color:#c62828} td.partly b{color:#b26a00}
td.not-measured b{color:#666;font-weight:500}
""".replace("CELL_MIN", str(CELL_MIN_PX))


#: Plotly sizes a figure drawn inside a closed ``<details>`` to nothing: opening one tells the
#: figures the window changed, so they take their place's width.
FOLD_SCRIPT = (
    "<script>document.addEventListener('toggle',function(e){if(e.target.open)"
    "window.dispatchEvent(new Event('resize'))},true)</script>"
)


def render_report(
    sections: Sequence[Section],
    *,
    title: str = "interp-toolkit report",
    subtitle: str = "",
    nav: bool = True,
) -> str:
    """One self-contained offline HTML page (plotly and circuitsvis JS inlined once each);
    ``nav``: a bar of links to the sections (when there are several)."""
    state = {"plotly": False, "circuitsvis": False}
    body, links = [], []
    for i, sec in enumerate(sections):
        anchor = sec.anchor or f"s{i}-" + re.sub(r"[^a-z0-9]+", "-", sec.title.lower()).strip("-")
        links.append(f'<a href="#{anchor}">{html.escape(sec.title)}</a>')
        items = "\n".join(_item_html(it, state) for it in sec.items)
        intro = text(sec.intro, "p", "note") if sec.intro else ""
        head = f"<h2>{html.escape(sec.title)}</h2>"
        if sec.folded:
            inner = f'<details class="section"><summary>{head}</summary>{intro}\n{items}</details>'
        else:
            inner = f"{head}{intro}\n{items}"
        body.append(f'<section id="{anchor}">{inner}</section>')
    if any(sec.folded for sec in sections):
        body.append(FOLD_SCRIPT)
    scripts = []
    if state["plotly"]:
        from plotly.offline import get_plotlyjs

        scripts.append(f'<script type="text/javascript">{get_plotlyjs()}</script>')
    if state["circuitsvis"]:
        scripts.append(f'<script type="text/javascript">{cv.bundle()}</script>')
    sub = f"<p>{html.escape(subtitle)}</p>" if subtitle else ""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{CSS}</style>\n"
        + "\n".join(scripts)
        + f"\n</head><body><header><h1>{html.escape(title)}</h1>{sub}</header>"
        + (f"<nav>{''.join(links)}</nav>" if nav and len(links) > 1 else "")
        + "<main>\n"
        + "\n".join(body)
        + "\n</main></body></html>\n"
    )


def verdict(passed: bool, error: str = "") -> str:
    """``pass`` / ``fail`` (coloured), or ``skipped: error`` when the check could not run."""
    if error:
        return f'<span class="fail">skipped: {html.escape(error)}</span>'
    return '<span class="pass">pass</span>' if passed else '<span class="fail">fail</span>'
