"""Self-contained, offline HTML reports: one run (``build_run_report``) or a study (``render_comparison``).

A page is a list of :class:`Section`; each item is a plotly Figure, a circuitsvis view (its
``local_src``), a :class:`Row` of items shown side by side, or trusted HTML (build it with
:func:`text`, :func:`table`, :func:`kv_table`). Plotly's JS is inlined once in ``<head>``; the
circuitsvis bundle is inlined once too (its views then only carry their render call). No CDN.
"""

from __future__ import annotations

import html
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp_toolkit.errors import UserError
from interp_toolkit.views.attention import (
    attention_heads_html,
    attention_patterns,
    fix_local_src,
    token_labels,
)

REPORT = "report.html"
SAMPLES = "samples.json"


@dataclass
class Row:
    """Items shown side by side (e.g. one figure per run)."""

    items: list[Any]
    captions: list[str] | None = None


@dataclass
class Section:
    title: str
    items: list[Any] = field(default_factory=list)
    intro: str = ""  # plain text, escaped
    anchor: str | None = None


# ---------------------------------------------------------------- HTML helpers


def text(s: str, tag: str = "p", cls: str | None = None) -> str:
    c = f' class="{cls}"' if cls else ""
    return f"<{tag}{c}>{html.escape(s)}</{tag}>"


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (list, tuple)):
        return html.escape(", ".join(map(str, v))) if v else "—"
    if v is None or v == "":
        return "—"
    return html.escape(str(v))


def table(
    header: Sequence[str], rows: Sequence[Sequence[Any]], *, raw: Sequence[int] = (), cls: str = ""
) -> str:
    """An HTML table; cells are escaped except in the column indices listed in ``raw``."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>"
        + "".join(f"<td>{v if i in raw else _cell(v)}</td>" for i, v in enumerate(r))
        + "</tr>"
        for r in rows
    )
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _flatten(d: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.extend(_flatten(v, key + "."))
        else:
            out.append(
                (
                    key,
                    v
                    if not isinstance(v, (dict, list)) or len(json.dumps(v)) < 200
                    else json.dumps(v)[:200] + "…",
                )
            )
    return out


def kv_table(d: dict[str, Any]) -> str:
    """A two-column table of a (nested) dict."""
    return table(["setting", "value"], _flatten(d), cls="kv")


# ---------------------------------------------------------------- page assembly


@lru_cache(maxsize=1)
def circuitsvis_bundle() -> str:
    """The circuitsvis JS exactly as ``local_src`` inlines it."""
    import circuitsvis

    path = Path(circuitsvis.__file__).parent / "dist" / "cdn" / "iife.js"
    return path.read_text(encoding="utf-8").replace("</script>", "")


def _figure_html(fig: Any) -> str:
    return fig.to_html(
        full_html=False, include_plotlyjs=False, config={"displaylogo": False, "responsive": True}
    )


_RENDER = re.compile(r"CircuitsVis\.render\(")


def _circuitsvis_fragment(src: str) -> tuple[str, bool]:
    """Strip the bundle from one circuitsvis fragment (the page inlines it once); make the
    render call's props safe inside ``<script>``. Returns (html, used_circuitsvis)."""
    src = fix_local_src(src)
    if "CircuitsVis" not in src:
        return src, False
    bundle = circuitsvis_bundle()
    if bundle in src:
        src = src.replace(bundle, "")
    # Escape "<" in the render call's JSON props (token labels such as "</script>" or "<!--").
    starts = [m.start() for m in _RENDER.finditer(src)]
    out, last = [], 0
    for start in starts:
        end = src.find("</script>", start)
        if end < 0:
            break
        out.append(src[last:start])
        out.append(src[start:end].replace("<", "\\u003c"))
        last = end
    out.append(src[last:])
    return "".join(out), True


def _item_html(item: Any, state: dict[str, bool]) -> str:
    if isinstance(item, Row):
        caps = item.captions or [""] * len(item.items)
        cells = "".join(
            f'<div class="cell">{text(c, "div", "caption") if c else ""}{_item_html(it, state)}</div>'
            for it, c in zip(item.items, caps, strict=False)
        )
        return f'<div class="row">{cells}</div>'
    if hasattr(item, "to_html") and hasattr(item, "layout"):  # plotly Figure
        state["plotly"] = True
        return f'<div class="fig">{_figure_html(item)}</div>'
    if hasattr(item, "local_src"):  # circuitsvis RenderedHTML
        item = item.local_src
    if isinstance(item, str):
        frag, used = _circuitsvis_fragment(item) if "CircuitsVis" in item else (item, False)
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
.row{display:grid;grid-template-columns:repeat(auto-fill,minmax(440px,1fr));gap:16px}.cell{min-width:0}
.caption{font-weight:600;margin:6px 0}
pre.sample{white-space:pre-wrap;background:#f3f5f8;padding:8px;border-radius:6px;font-size:.9em}
.finding{font-size:1.05em;background:#fff8e1;border-left:4px solid #f0b400;padding:8px 14px}
.note{color:#556;font-size:.9em}
"""


def _anchor(title: str, i: int) -> str:
    return "s" + str(i) + "-" + re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def render_report(
    sections: Sequence[Section], *, title: str = "interp-toolkit report", subtitle: str = ""
) -> str:
    """One self-contained offline HTML page (plotly and circuitsvis JS inlined once each)."""
    state = {"plotly": False, "circuitsvis": False}
    body, nav = [], []
    for i, sec in enumerate(sections):
        anchor = sec.anchor or _anchor(sec.title, i)
        nav.append(f'<a href="#{anchor}">{html.escape(sec.title)}</a>')
        items = "\n".join(_item_html(it, state) for it in sec.items)
        intro = text(sec.intro, "p", "note") if sec.intro else ""
        body.append(
            f'<section id="{anchor}"><h2>{html.escape(sec.title)}</h2>{intro}\n{items}</section>'
        )
    scripts = []
    if state["plotly"]:
        from plotly.offline import get_plotlyjs

        scripts.append(f'<script type="text/javascript">{get_plotlyjs()}</script>')
    if state["circuitsvis"]:
        scripts.append(f'<script type="text/javascript">{circuitsvis_bundle()}</script>')
    sub = f"<p>{html.escape(subtitle)}</p>" if subtitle else ""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{CSS}</style>\n"
        + "\n".join(scripts)
        + f"\n</head><body><header><h1>{html.escape(title)}</h1>{sub}</header>"
        + (f"<nav>{''.join(nav)}</nav>" if len(nav) > 1 else "")
        + "<main>\n"
        + "\n".join(body)
        + "\n</main></body></html>\n"
    )


# ---------------------------------------------------------------- one run


def _head(layer: int, head: int) -> str:
    return f"{layer}.{head}"


def _argmax(scores: Float[Tensor, "layer head"]) -> tuple[int, int]:
    flat = int(scores.reshape(-1).argmax())
    return flat // scores.shape[1], flat % scores.shape[1]


@dataclass
class ExamOutcome:
    name: str
    prompt: str
    target: str
    result: Any = None  # ExamResult, or None when the exam could not run
    error: str = ""

    @property
    def passed(self) -> bool:
        if self.result is None:
            return False
        return bool(getattr(self.result, "passed", self.result.rank == 0))


@dataclass
class RunAnalysis:
    """Everything a run report shows; :meth:`summary` is what ``render_comparison`` takes."""

    run: Any
    rows: list[dict[str, Any]]
    head_report: Any
    exams: list[ExamOutcome]
    samples: list[dict[str, str]]
    repeated: Int[Tensor, " pos"]
    period: int
    impact: Float[Tensor, "layer head impact_pos"] | None
    induction_head: tuple[int, int]
    prev_token_head: tuple[int, int]

    @property
    def name(self) -> str:
        return self.run.path.name

    def has_role(self, head: tuple[int, int], role: str) -> bool:
        return self.head_report.roles[head[0]][head[1]] == role

    def heads_with_role(self, role: str) -> list[str]:
        return [
            _head(ly, h)
            for ly, row in enumerate(self.head_report.roles)
            for h, r in enumerate(row)
            if r == role
        ]

    def partner(self) -> str | None:
        """The strongest previous-token head in a layer before the induction head."""
        layer = self.induction_head[0]
        prev = self.head_report.scores.previous_token
        if layer == 0:
            return None
        ly, h = _argmax(prev[:layer])
        return _head(ly, h) if self.head_report.roles[ly][h] == "previous-token" else None

    def summary(self, href: str | None = None) -> dict[str, Any]:
        """JSON-safe summary for :func:`render_comparison`."""
        cfg = self.run.model_cfg
        sc = self.head_report.scores
        n_passed = sum(e.passed for e in self.exams)
        ran = [e for e in self.exams if e.result is not None]
        losses = [r for r in self.rows if "loss" in r]
        step = max(1, len(losses) // 200)
        ind = self.heads_with_role("induction")
        return {
            "name": self.name,
            "href": href if href is not None else f"{self.name}/{REPORT}",
            "n_layers": cfg.n_layers,
            "n_heads": cfg.n_heads,
            "final_loss": float(losses[-1]["loss"]) if losses else None,
            "tokens_seen": losses[-1].get("tokens") if losses else None,
            "exam": {
                "passed": bool(ran) and n_passed == len(ran),
                "n_passed": n_passed,
                "n_total": len(ran),
                "results": [
                    {
                        "name": e.name,
                        "prompt": e.prompt,
                        "target": e.target,
                        "passed": e.passed,
                        "rank": None if e.result is None else int(e.result.rank),
                        "prob": None if e.result is None else float(e.result.prob),
                        "error": e.error,
                    }
                    for e in self.exams
                ],
            },
            "heads": {
                role: self.heads_with_role(role)
                for role in ("previous-token", "induction", "duplicate-token")
            },
            "has_induction_head": bool(ind),
            "top_induction": {
                "head": _head(*self.induction_head),
                "score": float(sc.induction[self.induction_head]),
            },
            "top_previous_token": {
                "head": _head(*self.prev_token_head),
                "score": float(sc.previous_token[self.prev_token_head]),
            },
            "partner": self.partner() if ind else None,
            "taus": {k: float(v) for k, v in self.head_report.taus.items()},
            "floors": {
                k: float(v) for k, v in (getattr(self.head_report, "floors", None) or {}).items()
            },
            "scores": {
                "previous_token": sc.previous_token.tolist(),
                "induction": sc.induction.tolist(),
            },
            "loss_curve": [
                [r.get("tokens", r.get("step")), float(r["loss"])] for r in losses[::step]
            ],
        }


def _tau(report: Any, *keys: str) -> float | None:
    for k in keys:
        if k in report.taus:
            return float(report.taus[k])
    return None


def _floor(report: Any, kind: str) -> float | None:
    floors = getattr(report, "floors", None) or {}
    return float(floors[kind]) if kind in floors else None


def _passes(report: Any, kind: str, layer: int, head: int) -> bool:
    v = float(getattr(report.scores, kind)[layer, head])
    tau, floor = report.taus.get(kind), _floor(report, kind)
    return (tau is None or v > tau) and (floor is None or v >= floor)


def read_samples(run_path: str | Path) -> list[dict[str, str]]:
    """``RUN/samples.json`` (a list of {"prompt", "text"}), or [] when absent or unreadable."""
    file = Path(run_path) / SAMPLES
    if not file.is_file():
        return []
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        return []
    if not isinstance(data, list):
        return []
    return [
        {"prompt": str(d.get("prompt", "")), "text": str(d.get("text", ""))}
        for d in data
        if isinstance(d, dict)
    ]


def _repeated_batch(codec: Any, n_seqs: int, period: int, seed: int) -> Int[Tensor, "batch pos"]:
    from interp_toolkit.analysis.batches import default_token_range, repeated_tokens

    low, high = default_token_range(codec)
    return repeated_tokens(
        n_seqs, period, low=low, high=high, bos_id=int(codec.bos_id), seed=seed
    ).tokens


def analyse_run(
    run: Any,
    *,
    samples: list[dict[str, str]] | None = None,
    head_report: Any = None,
    exams: Sequence[Any] | None = None,
    n_seqs: int = 16,
    seed: int = 0,
) -> RunAnalysis:
    """Run the analysis a report shows: head scores and roles, exams, impact curves."""
    from interp_toolkit.analysis.ablation import head_impact
    from interp_toolkit.analysis.exam import BUILTIN_EXAMS, run_exam
    from interp_toolkit.analysis.scores import discover_heads

    model, codec = run.model, run.codec
    n_ctx = int(model.cfg.n_ctx)
    if head_report is None:
        head_report = discover_heads(model, codec, seed=seed)
    outcomes = []
    for exam in BUILTIN_EXAMS if exams is None else exams:
        try:
            result = run_exam(model, codec, exam.prompt, exam.target, name=exam.name)
            outcomes.append(ExamOutcome(exam.name, exam.prompt, exam.target, result))
        except UserError as exc:
            outcomes.append(ExamOutcome(exam.name, exam.prompt, exam.target, None, str(exc)))
    period = max(2, min(24, (n_ctx - 1) // 2))
    batch = _repeated_batch(codec, n_seqs, period, seed)
    with torch.no_grad():
        impact = head_impact(model, batch, mode="mean").detach().float().cpu()
    sc = head_report.scores
    induction_head = _argmax(sc.induction)
    prev_token_head = _argmax(sc.previous_token)
    if induction_head[0] > 0:  # prefer the induction head's partner in an earlier layer
        prev_token_head = _argmax(sc.previous_token[: induction_head[0]])
    return RunAnalysis(
        run=run,
        rows=_rows(run),
        head_report=head_report,
        exams=outcomes,
        samples=read_samples(run.path) if samples is None else list(samples),
        repeated=batch[0].cpu(),
        period=period,
        impact=impact,
        induction_head=induction_head,
        prev_token_head=prev_token_head,
    )


def _rows(run: Any) -> list[dict[str, Any]]:
    from interp_toolkit.runs import read_metrics

    return read_metrics(run.path)


def _exam_section(analysis: RunAnalysis) -> Section:
    from interp_toolkit.views.plots import exam_topk

    rows, figs, caps = [], [], []
    for e in analysis.exams:
        if e.result is None:
            rows.append(
                [
                    e.name,
                    e.prompt,
                    e.target,
                    None,
                    None,
                    f'<span class="fail">skipped: {html.escape(e.error)}</span>',
                ]
            )
            continue
        verdict = '<span class="pass">pass</span>' if e.passed else '<span class="fail">fail</span>'
        rows.append([e.name, e.prompt, e.target, int(e.result.rank), float(e.result.prob), verdict])
        figs.append(exam_topk(e.result))
        caps.append(e.name)
    items: list[Any] = [
        table(["exam", "prompt", "target", "rank (0 = top)", "p(target)", "result"], rows, raw=(5,))
    ]
    if figs:
        items.append(Row(figs, caps))
    return Section(
        "Exam",
        items,
        intro="Does the model continue the repeated pattern? Rank 0 is its top prediction: a pass.",
    )


def _head_table(analysis: RunAnalysis) -> str:
    rep = analysis.head_report
    sc = rep.scores
    kinds = [
        ("previous_token", "prev-token"),
        ("duplicate_token", "duplicate"),
        ("induction", "induction"),
        ("induction_vw", "induction (vw)"),
    ]
    rows = []
    for ly, roles in enumerate(rep.roles):
        for h, role in enumerate(roles):
            cells = []
            for k, _ in kinds:
                v = float(getattr(sc, k)[ly, h])
                mark = " ★" if _passes(rep, k, ly, h) else ""
                cells.append(f"{v:.3f}{mark}")
            cls = "pass" if role != "none" else ""
            rows.append([_head(ly, h), *cells, f'<span class="{cls}">{html.escape(role)}</span>'])
    taus = "; ".join(f"τ({k}) = {v:.3g}" for k, v in rep.taus.items())
    floors = getattr(rep, "floors", None) or {}
    floor_text = (
        "; floors " + ", ".join(f"{k} {v:.2g}" for k, v in floors.items()) if floors else ""
    )
    header = ["head", *[label for _, label in kinds], "role"]
    note = text(
        f"{taus}{floor_text}. Null model: {rep.null} ({rep.n_null_samples} samples). "
        "★ = score > τ and ≥ floor. A head's role is the first of induction, previous-token, "
        "duplicate-token it passes.",
        "p",
        "note",
    )
    return note + table(header, rows, raw=(len(header) - 1,))


def run_report_sections(analysis: RunAnalysis) -> list[Section]:
    from interp_toolkit.views import plots

    run, rep = analysis.run, analysis.head_report
    sc = rep.scores
    sections: list[Section] = []
    cfg_items: list[Any] = [kv_table({"model": run.model_cfg.to_dict()})]
    if run.settings:
        cfg_items.append(kv_table({"recipe": run.settings}))
    sections.append(Section("Config and recipe", cfg_items))

    if analysis.rows:
        sections.append(
            Section(
                "Training",
                [plots.loss_curve(analysis.rows)],
                intro="Loss and, if logged, per-head scores over training (the phase change).",
            )
        )
    else:
        sections.append(Section("Training", [text("No metrics.jsonl in this run folder.")]))

    if analysis.samples:
        rows = [
            [s["prompt"], f'<pre class="sample">{html.escape(s["text"])}</pre>']
            for s in analysis.samples
        ]
        sections.append(Section("Samples", [table(["prompt", "text"], rows, raw=(1,))]))

    sections.append(_exam_section(analysis))

    heat = Row(
        [
            plots.head_score_heatmap(
                sc.previous_token,
                kind="previous_token",
                tau=_tau(rep, "previous_token"),
                floor=_floor(rep, "previous_token"),
            ),
            plots.head_score_heatmap(
                sc.induction,
                kind="induction",
                tau=_tau(rep, "induction"),
                floor=_floor(rep, "induction"),
            ),
        ]
    )
    sections.append(
        Section(
            "Heads",
            [heat, _head_table(analysis)],
            intro="Per-head scores on repeated random tokens; τ is the null threshold.",
        )
    )

    labels = token_labels(run.codec, analysis.repeated)
    key_items: list[Any] = []
    if analysis.impact is not None:
        key_items.append(
            plots.head_impact_curves(
                analysis.impact,
                labels=labels[:-1],
                title="Drop in log-prob of the next token when one head is mean-ablated "
                f"(repeated random tokens, period {analysis.period})",
            )
        )
    ly, h = analysis.induction_head
    pats = attention_patterns(run.model, analysis.repeated, [ly])
    role = (
        "induction head"
        if analysis.has_role((ly, h), "induction")
        else "top induction score, below τ"
    )
    key_items.append(
        plots.attention_heatmap(
            pats[ly][h],
            labels,
            period=analysis.period,
            stripe_from=analysis.period + 1,
            title=f"{_head(ly, h)} ({role}) on a repeated sequence",
        )
    )
    sections.append(Section("Impact and the induction stripe", key_items))

    pl, ph = analysis.prev_token_head

    def describe(head: tuple[int, int], kind: str, role: str) -> str:
        tau = rep.taus.get(kind)
        score = float(getattr(sc, kind)[head])
        article = "an" if role[0] in "aeiou" else "a"
        verdict = f"role {role}" if analysis.has_role(head, role) else f"not {article} {role} head"
        return f"{_head(*head)}: strongest {role} score {score:.3f} (τ {tau:.3g}; {verdict})"

    views = attention_heads_html(
        run.model, analysis.repeated, codec=run.codec, heads=sorted({(pl, ph), (ly, h)})
    )
    sections.append(
        Section(
            "Attention of the key heads",
            [views],
            intro=f"{describe((pl, ph), 'previous_token', 'previous-token')}. "
            f"{describe((ly, h), 'induction', 'induction')}. On a repeated random sequence "
            f"(period {analysis.period}): hover a head, click a token to see where it attends.",
        )
    )
    return sections


def run_report_html(analysis: RunAnalysis) -> str:
    cfg = analysis.run.model_cfg
    return render_report(
        run_report_sections(analysis),
        title=f"Run report: {analysis.name}",
        subtitle=f"{cfg.n_layers} layer(s) x {cfg.n_heads} heads, d_model {cfg.d_model}, n_ctx {cfg.n_ctx}, "
        f"vocabulary {cfg.d_vocab}",
    )


def report_path(run_path: str | Path, out: str | Path | None) -> Path:
    """Where the report goes, checked writable (UserError otherwise) before any work is done."""
    from interp_toolkit.io import check_writable_dir

    path = Path(out) if out is not None else Path(run_path) / REPORT
    if path.is_dir():
        raise UserError(f"output {path} is a folder: give a file name such as {path / REPORT}.")
    check_writable_dir(path.parent, "report folder")
    if path.exists() and not os.access(path, os.W_OK):
        raise UserError(f"output {path} is not writable: choose another file with --out.")
    return path


def build_run_report(
    run_path: str | Path,
    out: str | Path | None = None,
    *,
    samples: list[dict[str, str]] | None = None,
    head_report: Any = None,
    device: str = "cpu",
) -> Path:
    """Load the run, analyse it and write RUN/report.html (or ``out``) atomically."""
    from interp_toolkit.io import write_text
    from interp_toolkit.runs import load_run

    run = load_run(run_path, device=device)
    path = report_path(run_path, out)
    analysis = analyse_run(run, samples=samples, head_report=head_report)
    return write_text(path, run_report_html(analysis))


# ---------------------------------------------------------------- study comparison


def describe_run(summary: dict[str, Any]) -> str:
    """One sentence: 'L layers: passes/fails the exam (k/n); induction head … / no induction head.'"""
    exam = summary.get("exam", {})
    verdict = "passes" if exam.get("passed") else "fails"
    s = (
        f"{summary['n_layers']} layer{'s' if summary['n_layers'] != 1 else ''} ({summary['name']}): "
        f"{verdict} the exam ({exam.get('n_passed', 0)}/{exam.get('n_total', 0)})"
    )
    ind = summary.get("heads", {}).get("induction", [])
    if ind:
        s += f"; induction head {', '.join(ind)}"
        if summary.get("partner"):
            s += f" with previous-token partner {summary['partner']}"
    else:
        top = summary.get("top_induction", {})
        s += "; no induction head"
        if top:
            tau = summary.get("taus", {}).get("induction")
            floor = summary.get("floors", {}).get("induction")
            need = [f"> τ {tau:.2f}"] if tau is not None else []
            if floor is not None:
                need.append(f"≥ {floor:.2f}")
            s += f" (best {top['head']}: {top['score']:.2f}"
            s += f"; a head needs {' and '.join(need)})" if need else ")"
    return s + "."


def comparison_sections(
    runs: Sequence[dict[str, Any]], *, finding: str | None = None
) -> list[Section]:
    from interp_toolkit.views import plots

    lines = [finding] if finding else [describe_run(r) for r in runs]
    sections = [Section("Finding", ["".join(text(x, "p", "finding") for x in lines)])]

    def link(r: dict[str, Any]) -> str:
        href = r.get("href")
        return (
            f'<a href="{html.escape(href)}">{html.escape(r["name"])}</a>'
            if href
            else html.escape(r["name"])
        )

    def verdict(r: dict[str, Any]) -> str:
        e = r.get("exam", {})
        cls = "pass" if e.get("passed") else "fail"
        word = "pass" if e.get("passed") else "fail"
        return f'<span class="{cls}">{word}</span> ({e.get("n_passed", 0)}/{e.get("n_total", 0)})'

    def heads(r: dict[str, Any], role: str) -> str:
        return html.escape(", ".join(r.get("heads", {}).get(role, [])) or "none")

    def tau(r: dict[str, Any], k: str) -> str:
        v = r.get("taus", {}).get(k)
        return "—" if v is None else f"{v:.3g}"

    rows = [
        ["run (report)", *[link(r) for r in runs]],
        ["layers", *[str(r["n_layers"]) for r in runs]],
        ["final loss", *[_cell(r.get("final_loss")) for r in runs]],
        ["exam", *[verdict(r) for r in runs]],
        ["induction heads", *[heads(r, "induction") for r in runs]],
        ["previous-token heads", *[heads(r, "previous-token") for r in runs]],
        ["previous-token partner", *[html.escape(r.get("partner") or "—") for r in runs]],
        [
            "best induction score",
            *[
                html.escape(f"{r['top_induction']['head']}: {r['top_induction']['score']:.3f}")
                if r.get("top_induction")
                else "—"
                for r in runs
            ],
        ],
        ["τ (induction)", *[tau(r, "induction") for r in runs]],
        ["τ (previous-token)", *[tau(r, "previous_token") for r in runs]],
    ]
    sections.append(
        Section(
            "Side by side",
            [table(["", *[r["name"] for r in runs]], rows, raw=tuple(range(1, len(runs) + 1)))],
        )
    )

    for key, kind in (("induction", "induction"), ("previous_token", "previous_token")):
        figs, caps = [], []
        for r in runs:
            if key in r.get("scores", {}):
                figs.append(
                    plots.head_score_heatmap(
                        plots.score_matrix(r["scores"][key]),
                        kind=kind,
                        tau=r.get("taus", {}).get(key),
                        floor=r.get("floors", {}).get(key),
                        title=r["name"],
                    )
                )
                caps.append(
                    f"{r['name']} ({r['n_layers']} layer{'s' if r['n_layers'] != 1 else ''})"
                )
        if figs:
            sections.append(Section(f"{plots.SCORE_TITLES[kind].capitalize()}s", [Row(figs, caps)]))

    if any(r.get("loss_curve") for r in runs):
        import plotly.graph_objects as go

        fig = go.Figure()
        for r in runs:
            pts = r.get("loss_curve") or []
            fig.add_trace(
                go.Scatter(
                    x=[p[0] for p in pts], y=[p[1] for p in pts], mode="lines", name=r["name"]
                )
            )
        fig.update_layout(
            title="Training loss", height=380, xaxis={"title": "tokens"}, yaxis={"title": "loss"}
        )
        sections.append(Section("Training loss", [fig]))

    exam_rows = []
    for r in runs:
        for e in r.get("exam", {}).get("results", []):
            res = (
                '<span class="pass">pass</span>'
                if e.get("passed")
                else '<span class="fail">fail</span>'
            )
            if e.get("error"):
                res = f'<span class="fail">skipped: {html.escape(e["error"])}</span>'
            exam_rows.append(
                [r["name"], e["name"], e["prompt"], e["target"], e.get("rank"), e.get("prob"), res]
            )
    if exam_rows:
        sections.append(
            Section(
                "Exam results",
                [
                    table(
                        ["run", "exam", "prompt", "target", "rank", "p(target)", "result"],
                        exam_rows,
                        raw=(6,),
                    )
                ],
            )
        )
    return sections


def render_comparison(
    runs: Sequence[dict[str, Any]],
    *,
    title: str = "Induction heads: study",
    subtitle: str = "",
    finding: str | None = None,
    extra: Sequence[Section] = (),
) -> str:
    """A study index page comparing runs side by side. ``runs``: summaries as returned by
    :meth:`RunAnalysis.summary` (JSON-safe dicts; ``href`` links each run's report.html,
    relative to the page). ``finding`` replaces the automatic one-line-per-run description."""
    if not runs:
        raise UserError("nothing to compare: give at least one run summary.")
    return render_report(
        [*comparison_sections(runs, finding=finding), *extra], title=title, subtitle=subtitle
    )
