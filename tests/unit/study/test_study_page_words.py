"""One page, one meaning per word (issue 32): the study page built from hand-made measurements.
The single-prompt exams and the period exams have different names in every table row, sentence
and study.json key; a route share is printed only for a head whose own effect passes its
interval, and a share above 1 only with its note; a head's name and its score never share a
colon; long edge lists fold; a circuit graph draws at most its cap of edges."""

from __future__ import annotations

import dataclasses
import json
import re
from html import unescape as html_unescape
from html.parser import HTMLParser
from pathlib import Path

import plotly.graph_objects as go
import pytest
from findings_helpers import depth, exams

from interp_toolkit.causal.circuit import Circuit, CircuitEdge
from interp_toolkit.causal.compare import Disagreement
from interp_toolkit.causal.graph import Edge, Node
from interp_toolkit.causal.routes import (
    Estimate,
    ModelRoute,
    PathEffect,
    RouteName,
    head_route,
    model_route_name,
)
from interp_toolkit.causal.summary import CircuitSummary
from interp_toolkit.heads.registry import HeadId
from interp_toolkit.measures.claims import verdicts
from interp_toolkit.measures.run import ExamRow, ExamSummary, RunSummary, TopHead
from interp_toolkit.reports.circuit_report import (
    MAX_DRAWN,
    NO_EFFECT_TO_ROUTE,
    circuit_section,
    circuit_sentence,
    route_rows,
    route_section,
)
from interp_toolkit.reports.findings import route_phrase
from interp_toolkit.reports.study_report import (
    PROMPT_EXAMS,
    comparison_sections,
    depth_section,
    describe_run,
)
from interp_toolkit.views.circuit import circuit_figure
from interp_toolkit.views.page import FOLD_AT, Row, Section, render_report
from interp_toolkit.views.plots import head_score_heatmap

SNAPSHOT = Path(__file__).resolve().parents[2] / "snapshots" / "small_study.json"

# ---------------------------------------------------------------- hand-made measurements


def summary(name: str, n_layers: int, *, induction: tuple[str, ...] = ()) -> RunSummary:
    """A run whose two single-prompt exams both pass, with or without induction heads."""
    grid = [[0.05 * (i + j) for j in range(4)] for i in range(n_layers)]
    rows = [
        ExamRow(n, p, tgt, True, 0, 0.9, "")
        for n, p, tgt in (("ABCD", "A B C D A B C", " D"), ("repeat", "x y x", " y"))
    ]
    return RunSummary(
        name=name,
        href=f"{name}/report.html",
        n_layers=n_layers,
        n_heads=4,
        final_loss=2.1,
        tokens_seen=1000,
        prompt_exams=ExamSummary(True, 2, 2, rows),
        heads={"induction": list(induction), "previous-token": ["0.1"]},
        has_induction_head=bool(induction),
        top_induction=TopHead("induction_vw", "0.1", 0.05, 0.12, 0.4),
        top_previous_token=TopHead("previous_token", "0.2", 0.91, 0.2, 0.001),
        feeder=None,
        route=ModelRoute(
            "induction", 8, 1.0, 0.0, Estimate(1.0, 1.0, 1.0), None, (), RouteName.NOT_FOUND
        ),
        decides={"induction": "induction_vw", "previous-token": "previous_token"},
        test="p <= 0.05",
        floors={"induction_vw": 0.4, "previous_token": 0.4},
        scores={"induction_vw": grid},
        tau={"induction_vw": grid},
        p_value={"induction_vw": grid},
        passes={"induction_vw": [[False] * 4 for _ in range(n_layers)]},
        loss_curve=[],
    )


class _Page(HTMLParser):
    """The page's visible text (no script or style), its tables' rows of cells, and the raw
    HTML of every cell."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.rows: list[list[str]] = []
        self._skip = 0
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self._skip += 1
        elif tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("script", "style"):
            self._skip -= 1
        elif tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data):
        if self._skip:
            return
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)


def parse(page: str) -> _Page:
    p = _Page()
    p.feed(page)
    return p


def study_page(deep_passes: int | dict) -> tuple[str, list[str]]:
    """The study page's runs, side-by-side and depth sections for 1 and 3 layers, where the
    3-layer model passes both single-prompt exams and ``deep_passes`` sets its period exams; and
    why each claim that needs a 2-layer model is not measured."""
    ms = [depth(1), depth(3, period_exams=exams(deep_passes))]
    runs = [summary("cpu-1l", 1), summary("cpu-3l", 3, induction=("1.0", "1.2"))]
    sections = comparison_sections(runs)
    sections.append(depth_section(ms, curves={}))
    return render_report(sections, title="Study"), [v.why for v in verdicts(ms)]


# ---------------------------------------------------------------- the two exams, two names


def test_the_two_exams_have_different_names_in_every_row_sentence_and_key():
    page, findings = study_page({("letters", 2): 180})
    p = parse(page)
    labels = [r[0] for r in p.rows if r]
    assert PROMPT_EXAMS in labels and "period exams passing the 90% rule" in labels
    assert "exam" not in labels and "period exam" not in labels
    # every word "exam" on the page says which kind it is
    visible = " ".join(p.text)
    for m in re.finditer(r"\bexams?\b", visible):
        before = visible[max(0, m.start() - 14) : m.start()]
        assert before.lower().endswith(("period ", "single-prompt ")), visible[m.start() - 60 :]
    # the cells say what the finding says: the side-by-side row is the single-prompt exams
    # (2/2 passed), the period exams' row holds the failing 29/30 the finding names
    row = {r[0]: r[1:] for r in p.rows if r}
    assert row[PROMPT_EXAMS] == ["pass (2/2 passed)"] * 2
    assert row["period exams passing the 90% rule"] == ["0", "29"]
    assert row["lowest period exam (top-1)"][1] == "90%"
    # no 2-layer model: the claims that compare 1 with 2 layers say what the setting lacks
    assert "this setting has no 2-layer model" in findings[0]
    assert "passes the single-prompt exams (2/2)" in describe_run(summary("cpu-3l", 3))
    # study.json: runs[].prompt_exams, depths[].period_exams; no bare "exam"/"exams" key
    run, d = summary("r", 2).to_dict(), depth(2).to_dict()
    assert "prompt_exams" in run and "exam" not in run and "exams" not in run
    assert "period_exams" in d and "exams" not in d and "exam" not in d
    snap = json.loads(SNAPSHOT.read_text())
    assert all("prompt_exams" in r and "exam" not in r for r in snap["runs"])
    assert all("period_exams" in d and "exams" not in d for d in snap["depths"])


# ---------------------------------------------------------------- route shares


B, FEEDER, CONTROL = HeadId(4, 3), HeadId(0, 0), HeadId(0, 3)


def head(effect: Estimate, k_share: Estimate):
    inputs = {"q": Estimate(0.02, -0.01, 0.05), "k": k_share, "v": Estimate(0.03, -0.02, 0.06)}
    paths = [
        PathEffect(s, B, c, inputs[c] if s == FEEDER else Estimate(0.0, -0.01, 0.01), 0.1)
        for s in (FEEDER, CONTROL)
        for c in "qkv"
    ]
    return head_route(B, effect, inputs, paths, CONTROL)


def model(*heads) -> ModelRoute:
    gap = Estimate(3.0, 2.8, 3.2)
    return ModelRoute("induction", 64, 3.1, 0.1, gap, 0.05, heads, model_route_name(heads, gap))


def words(route: ModelRoute) -> str:
    """Everything the page says about a route: its section's text and table cells."""
    p = parse(render_report([route_section([("cpu-8l", route)])]))
    return " ".join(p.text)


def test_a_head_without_effect_gets_no_share_printed():
    idle = head(Estimate(0.01, -0.02, 0.04), Estimate(11.78, 2.1, 30.5))
    assert idle.name == RouteName.NO_EFFECT
    said = words(model(idle))
    assert "11.78" not in said and "0.02 [" not in said  # no input's share of it
    assert f"{B} has no effect to route" in said
    assert "runs on no effect" not in said and "runs on not found" not in said
    (row,) = route_rows("cpu-8l", model(idle))
    assert row[3:6] == [NO_EFFECT_TO_ROUTE] * 3 and row[8:] == ["—", "—"]
    assert f"{B} has no effect to route" in route_phrase(model(idle))


def test_a_share_above_one_is_starred_and_its_note_said_once():
    weak = head(Estimate(0.01, 0.004, 0.02), Estimate(11.78, 2.1, 30.5))  # ~1% of the gap
    assert weak.name != RouteName.NO_EFFECT
    said = words(model(weak))
    hits = [m.end() for m in re.finditer(r"11\.78 \[2\.10, 30\.50\]", said)]
    assert len(hits) >= 2  # the phrase, the table
    assert all(said[end:].startswith("*") for end in hits), said
    # the note is said once per phrase and once under the table, not after every share
    assert said.count("a share above 1") == 2
    fine = words(model(head(Estimate(0.4, 0.3, 0.5), Estimate(0.9, 0.85, 0.95))))
    assert "a share above 1" not in fine and "]*" not in fine


# ---------------------------------------------------------------- no "head: score"

HEAD_COLON_SCORE = re.compile(r"\b\d+\.\d+: [≤<>\-−]?\s*\d")


def test_a_head_name_and_its_score_never_share_a_colon():
    page, _ = study_page(200)
    route = model(head(Estimate(0.4, 0.3, 0.5), Estimate(0.9, 0.85, 0.95)))
    page += render_report([route_section([("cpu-8l", route)])])
    visible = " ".join(parse(page).text)
    assert not HEAD_COLON_SCORE.findall(visible), HEAD_COLON_SCORE.findall(visible)
    one = summary("cpu-1l", 1)
    assert "best head 0.1 scores 0.05 on" in describe_run(one)
    assert "0.1 scores 0.050 (τ 0.12, p 0.4)" in visible  # the side-by-side best score
    fig = head_score_heatmap([[0.1, 0.52]], kind="induction_vw")
    hover = [t for row in fig.data[0].customdata for t in row]
    assert hover == ["head 0.0 scores 0.100", "head 0.1 scores 0.520"]


# ---------------------------------------------------------------- edges: fold and cap


def edges(n: int, n_layers: int = 8, n_heads: int = 8) -> list[CircuitEdge]:
    out = []
    for src in range(n_layers - 1):
        for h in range(n_heads):
            for c in "qkv":
                out.append(Edge(Node("head", src, h), Node(c, src + 1, (h + 1) % n_heads)))
    return [CircuitEdge(e, 1.0 / (i + 1)) for i, e in enumerate(out[:n])]


def circuit(n: int, n_route: int, n_only: int) -> CircuitSummary:
    kept = edges(n)
    ig = Circuit(
        "induction", "EAP-IG (5 steps)", 64, 3.1, 0.1, Estimate(3.0, 2.8, 3.2), kept, 400,
        0.8, [(10, 0.4), (n, 0.85)], n, kept, 0.85, True,
    )  # fmt: skip
    eap = dataclasses.replace(ig, method="EAP", pruned=False)
    only = tuple((str(e.edge), 100 + i) for i, e in enumerate(kept[:n_only]))
    diff = Disagreement(
        ("EAP", ig.method), n, 0.7, {f"top_{n}_only_{m}": only for m in ("EAP", ig.method)}
    )
    route = tuple((str(e.edge), True, True) for e in kept[:n_route])
    return CircuitSummary("cpu-8l", 8, 8, ig, eap, diff, route, 1.0)


def test_a_circuit_sentence_gives_its_held_out_faithfulness_when_measured():
    """The number not chosen on its own prompts is said beside the in-sample one, with its
    interval, and only when it was measured."""
    c = circuit(5, 1, 1)
    assert "held-out" not in circuit_sentence(c)  # none measured: nothing said
    held = dataclasses.replace(
        c.circuit, heldout=Estimate(0.8234, 0.808, 0.838), heldout_prompts=64
    )
    said = circuit_sentence(dataclasses.replace(c, circuit=held))
    assert "recovers 85% of the induction gap alone" in said
    assert "; on 64 held-out prompts (the task drawn again) it recovers 82% [81%, 84%]" in said


def test_a_long_edge_list_folds_and_a_short_one_does_not():
    n = FOLD_AT + 4
    page = render_report([circuit_section([circuit(57, n, n), circuit(30, 2, 3)])])
    folded = re.findall(r"<details><summary>(\d+) ([^<]*)</summary>(.*?)</details>", page)
    # the long circuit: both disagreement cells and the route's edges in it; the short: none
    assert sorted((int(k), noun) for k, noun, _ in folded) == [
        (n, "edges"),
        (n, "edges"),
        (n, "route edges in the circuit"),
    ]
    assert all(body.count(" -&gt; ") == n for _, _, body in folded)
    assert f"it holds the route&#x27;s {n} edges" in page  # counted in the sentence
    cells = [c for r in parse(page).rows for c in r]
    short = "; ".join(f"0.0 -> 1.1 ({c}) (EAP rank {100 + i})" for i, c in enumerate("qkv"))
    assert short in cells  # the short circuit's list, unfolded


def test_a_graph_with_many_edges_draws_only_the_cap():
    many = [e.to_dict() for e in edges(57)]

    def drawn(fig: go.Figure) -> list[str]:
        return [t.name for t in fig.data if t.mode == "lines+markers"]

    fig = circuit_figure(many, n_layers=8, n_heads=8, max_edges=20)
    assert len(drawn(fig)) == 20
    # the largest |score| are drawn (scores fall with the index)
    assert set(drawn(fig)) == {f"{e['source']} -> {e['target']} ({e['input']})" for e in many[:20]}
    (note,) = [a.text for a in fig.layout.annotations]
    assert "top 20 of 57 edges" in note and "37 more are not drawn" in note
    assert len(drawn(circuit_figure(many[:12], n_layers=8, n_heads=8, max_edges=20))) == 12
    assert not circuit_figure(many[:12], n_layers=8, n_heads=8, max_edges=20).layout.annotations
    # the study page's circuit section draws at most MAX_DRAWN and says how many it left out
    sec = circuit_section([circuit(57, 2, 3)])
    graphs = next(it for it in sec.items if isinstance(it, Row))  # then the curves' row
    assert [len(drawn(f)) for f in graphs.items] == [MAX_DRAWN]
    page = render_report([sec])
    assert f"cpu-8l: the top {MAX_DRAWN} of 57 edges by |score| are drawn; 37 more" in page


@pytest.mark.parametrize("n", [FOLD_AT, FOLD_AT + 1])
def test_fold_starts_past_fold_at(n):
    from interp_toolkit.views.page import fold

    out = fold([f"e{i}" for i in range(n)], "edges")
    assert ("<details>" in out) is (n > FOLD_AT)


# ---------------------------------------------------------------- in a real browser

#: Measures each rendered figure in the browser: its title's top and its mode bar's bottom, in px
#: from the figure's top (the mode bar exists, hidden until hover, from the first draw).
GEOMETRY_JS = """<script>
window.addEventListener("load", () => setTimeout(() => {
  const out = [...document.querySelectorAll(".js-plotly-plot")].map((div) => {
    const top = div.getBoundingClientRect().top;
    const title = div.querySelector(".gtitle"), bar = div.querySelector(".modebar");
    return {title: title ? title.textContent : null,
            title_top: title ? title.getBoundingClientRect().top - top : null,
            title_x: title ? [title.getBoundingClientRect().left, title.getBoundingClientRect().right] : null,
            modebar_x: bar ? [bar.getBoundingClientRect().left, bar.getBoundingClientRect().right] : null,
            modebar_bottom: bar ? bar.getBoundingClientRect().bottom - top : null};
  });
  const pre = document.createElement("pre");
  pre.id = "geometry";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
}, 2000));
</script>"""


@pytest.mark.browser
def test_the_page_in_chromium_agrees_with_itself_and_no_title_sits_under_the_mode_bar(tmp_path):
    """The study page's sections rendered by headless Chromium (the DOM after plotly ran): the
    two exam rows keep their names and the cells their finding's numbers, a share above 1 keeps
    its note, and every figure's title starts below the mode bar's band. The same heatmap laid
    out by plotly's defaults with a tight top margin (what the page had before page_layout) is
    measured too, and its title is caught under the band."""
    import shutil
    import subprocess

    binary = next(
        (p for n in ("chromium", "chromium-browser", "google-chrome") if (p := shutil.which(n))),
        None,
    )
    if binary is None:
        pytest.skip("headless Chromium not found: install it with `apt-get install -y chromium`")
    ms = [depth(1), depth(3, period_exams=exams({("letters", 2): 180}))]
    runs = [summary("cpu-1l", 1), summary("cpu-3l", 3, induction=("1.0", "1.2"))]
    weak = head(Estimate(0.01, 0.004, 0.02), Estimate(11.78, 2.1, 30.5))
    grid = [[0.1 * (i + j) for j in range(4)] for i in range(3)]
    title = "cpu-3l: induction scores, value-weighted, each head against its null model's tau"
    fig = head_score_heatmap(grid, title=title)
    sections = comparison_sections(runs)
    sections += [depth_section(ms, curves={}), route_section([("cpu-8l", model(weak))])]
    page = render_report([*sections, Section("Heads", [fig])], title="Study")
    bare = go.Figure(fig).update_layout(margin={"t": 24}, title={"text": "bare", "y": None})
    bare_div = bare.to_html(include_plotlyjs=False, full_html=False)
    doc = tmp_path / "page.html"
    doc.write_text(page.replace("</body>", f"{bare_div}{GEOMETRY_JS}</body>"), encoding="utf-8")
    done = subprocess.run(
        [binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=15000",
         "--window-size=1200,2000", "--dump-dom", doc.as_uri()],
        capture_output=True, timeout=180, env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    dom = done.stdout.decode("utf-8", "replace")
    assert done.returncode == 0 and "js-plotly-plot" in dom, done.stderr.decode()[-2000:]
    p = parse(re.sub(r"<script\b.*?</script>", "", dom, flags=re.S))
    row = {r[0]: r[1:] for r in p.rows if r}
    assert row[PROMPT_EXAMS] == ["pass (2/2 passed)"] * 2
    assert row["period exams passing the 90% rule"] == ["0", "29"]
    said = " ".join(" ".join(p.text).split())
    shares = [m.end() for m in re.finditer(r"11\.78 \[2\.10, 30\.50\]", said)]
    assert len(shares) >= 2
    assert all(said[end:].startswith("*") for end in shares) and "a share above 1" in said
    geometry = json.loads(html_unescape(re.search(r'<pre id="geometry">(.*?)</pre>', dom).group(1)))
    titled = [g for g in geometry if g["title"]]
    assert len(titled) >= 2 and titled[-1]["title"] == "bare", geometry
    for g in titled[:-1]:  # every figure the page laid out: its title starts below the mode bar
        assert g["modebar_bottom"] is not None and g["title_top"] >= g["modebar_bottom"], g
    assert any(g["title"].startswith("cpu-3l: induction scores") for g in titled)
    bare_g = titled[-1]  # plotly's own layout with a tight top: the check catches the overlap
    assert bare_g["title_top"] < bare_g["modebar_bottom"], bare_g
