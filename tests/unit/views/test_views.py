"""Views: offline circuitsvis pages, plotly figures, the run report and the study comparison."""

from __future__ import annotations

import json
import re

import pytest
import torch
from _views_fixtures import assert_offline, make_tiny_run, plotly_js, tiny_vocab

from interp_toolkit.errors import UserError

PROMPT = "The cat sat on the zebra"


@pytest.fixture
def vocab():
    return tiny_vocab()


@pytest.fixture
def model(tiny_cfg, vocab):
    from interp_toolkit.models.build import build_model

    return build_model(tiny_cfg.replace(d_vocab=vocab.d_vocab))


# ---------------------------------------------------------------- tokens


def test_visible_token_labels(vocab):
    from interp_toolkit.text.labels import token_labels, visible_token

    assert visible_token(" the") == "·the"
    assert visible_token("a\nb\t") == "a↵b→"
    assert visible_token("<unk>") == "<unk>"
    ids = [vocab.bos_id, *vocab.encode(PROMPT)]
    labels = token_labels(vocab, ids)
    assert labels[0] == "<|endoftext|>"
    assert "·cat" in labels and "<unk>" in labels  # " zebra" is not in the tiny vocabulary


def test_prompt_tokens_checks_context(vocab):
    from interp_toolkit.heads.patterns import prompt_tokens

    toks = prompt_tokens(vocab, PROMPT, n_ctx=32)
    assert toks[0] == vocab.bos_id and toks.dtype == torch.long
    assert prompt_tokens(vocab, PROMPT, n_ctx=32, prepend_bos=False).shape[0] == toks.shape[0] - 1
    with pytest.raises(UserError, match="context is 4"):
        prompt_tokens(vocab, PROMPT, n_ctx=4)
    with pytest.raises(UserError, match="empty"):
        prompt_tokens(vocab, "", n_ctx=8, prepend_bos=False)


# ---------------------------------------------------------------- attention views


def test_attention_patterns_caches_only_needed_hooks(model, vocab):
    from interp_toolkit.heads.patterns import attention_patterns, prompt_tokens

    seen: list[str] = []
    original = model.run_with_cache

    def spy(*args, **kwargs):
        logits, cache = original(*args, **kwargs)
        seen.extend(cache.keys())
        return logits, cache

    model.run_with_cache = spy
    toks = prompt_tokens(vocab, PROMPT, n_ctx=32)
    pats = attention_patterns(model, toks, [1])
    assert list(pats) == [1] and pats[1].shape == (4, len(toks), len(toks))
    assert torch.allclose(pats[1].sum(-1), torch.ones(4, len(toks)), atol=1e-5)
    assert seen == ["blocks.1.attn.hook_pattern"]


def test_attention_view_objects(model, vocab):
    from interp_toolkit.reports.attention import attention_view

    one = attention_view(model, PROMPT, codec=vocab, layer=1, heads=[0, 2])
    assert list(one) == [1] and '"attentionHeadNames": ["1.0", "1.2"]' in one[1].local_src
    assert "<h4>Layer 1</h4>" in one._repr_html_()  # renders inline in Jupyter
    views = attention_view(model, PROMPT, codec=vocab)
    assert list(views) == [0, 1]
    pairs = attention_view(model, PROMPT, codec=vocab, heads=[(0, 1), (1, 3)])
    assert list(pairs) == [0, 1] and '"attentionHeadNames": ["1.3"]' in pairs[1].local_src
    with pytest.raises(UserError, match="layer 5 does not exist"):
        attention_view(model, PROMPT, codec=vocab, layer=5)
    with pytest.raises(UserError, match="context"):
        attention_view(model, "the cat " * 40, codec=vocab)


def _view_props(view) -> dict:
    """The props a circuitsvis view renders (its first ``{"attention": ...}`` object)."""
    src = view.local_src
    return json.JSONDecoder().raw_decode(src[src.index('{"attention": ') :])[0]


def test_attention_view_shows_the_planted_induction_head():
    """The K-composition circuit of planting.circuits on ``A B C D A B C``: the view of 1.0 shows
    ' B' and ' C' of the second repeat attending to the token after their first copy, and
    uniform attention where there is nothing to find (' A' has no earlier copy: the first ``A``
    has no space)."""
    from planting import letters_codec
    from planting.circuits import k_composition_model

    from interp_toolkit.reports.attention import attention_view

    model, codec = k_composition_model(), letters_codec()
    props = _view_props(attention_view(model, "A B C D A B C", codec=codec, layer=1, heads=[0])[1])
    assert props["attentionHeadNames"] == ["1.0"] and props["tokens"][6] == "·B"
    att = torch.tensor(props["attention"][0])  # [query, key]
    for q in range(6):
        torch.testing.assert_close(att[q, : q + 1], torch.full((q + 1,), 1 / (q + 1)))
    assert float(att[6, 3]) > 0.99 and float(att[7, 4]) > 0.99


def test_attention_page_is_offline(model, vocab):
    from interp_toolkit.reports.attention import attention_page, attention_view
    from interp_toolkit.views.cv import bundle as cv_bundle

    page = attention_page(attention_view(model, PROMPT, codec=vocab))
    assert_offline(page)
    bundle = cv_bundle()
    assert len(bundle) > 500_000 and page.count(bundle) == 1  # inlined once for both layers
    assert page.count("CircuitsVis.render(") == 2  # one attention_heads view per layer
    assert '/>\n    <script crossorigin type="module">' not in page  # the div is closed
    props = page[page.index("CircuitsVis.render(") :]
    tokens_json = json.dumps(["<|endoftext|>", "<unk>", "·cat"]).replace("<", "\\u003c")
    for label in json.loads(tokens_json):
        assert json.dumps(label).replace("<", "\\u003c") in props


# ---------------------------------------------------------------- plots


def test_plots_build(tmp_path):
    from interp_toolkit.views import plots

    run = make_tiny_run(tmp_path / "run")
    from interp_toolkit.runs.folder import read_metrics

    rows = read_metrics(run)
    fig = plots.loss_curve(rows)
    names = [t.name for t in fig.data]
    assert names[0] == "train loss" and names[1:9] == names[9:] and names[1] == "0.0"
    assert len(fig.data) == 1 + 8 + 8
    assert len(plots.loss_curve([{"step": 1, "tokens": 1, "loss": 2.0}]).data) == 1

    scores = torch.tensor([[0.1, 0.9, 0.2], [0.05, 0.3, 0.7]])
    passes = torch.tensor([[False, True, False], [False, False, True]])
    tau = torch.tensor([[0.2, 0.3, 0.4], [0.5, 0.6, 0.7]])
    p = torch.tensor([[0.5, 0.01, 0.3], [0.9, 0.2, 0.04]])
    heat = plots.head_score_heatmap(
        scores, kind="induction", passes=passes, floor=0.4, tau=tau, p_value=p, test="p <= 0.05"
    )
    assert heat.data[0].type == "heatmap"
    assert "★ = significant (p <= 0.05) and ≥ effect-size floor 0.4" in heat.layout.title.text
    assert len(heat.layout.shapes) == 2  # the two heads that pass are outlined
    assert "★" in heat.data[0].text[0][1] and "★" not in heat.data[0].text[0][0]
    assert "floor 0.4" in heat.data[0].colorbar.ticktext
    assert heat.data[0].customdata[1][2] == "head 1.2 scores 0.700, τ 0.7, p 0.04"  # τ on hover
    plain = plots.head_score_heatmap(scores, kind="induction")
    assert not plain.layout.shapes and "★" not in plain.layout.title.text

    impact = torch.rand(2, 3, 9)
    curves = plots.head_impact_curves(impact, labels=[f"t{i}" for i in range(9)])
    assert len(curves.data) == 6 and curves.data[0].name == "0.0"
    assert len(plots.head_impact_curves(impact, top=2).data) == 2

    pattern = torch.softmax(torch.randn(9, 9), -1).tril()
    att = plots.attention_heatmap(pattern, ["<|endoftext|>", *"abcdabcd"], period=4, stripe_from=5)
    assert att.data[0].type == "heatmap" and att.data[1].mode == "lines"
    assert list(att.data[1].y) == [5, 6, 7, 8] and list(att.data[1].x) == [2, 3, 4, 5]
    assert "&lt;|endoftext|&gt;" in att.layout.xaxis.ticktext


def test_exam_chart_highlights_target():
    from interp_toolkit.exams.single import ExamResult
    from interp_toolkit.views.plots import TARGET_COLOUR, exam_topk

    res = ExamResult(
        prompt="A B C A B",
        target=" C",
        target_id=3,
        rank=1,
        prob=0.3,
        top=[(" D", 0.5), (" C", 0.3), (" E", 0.1)],
    )
    fig = exam_topk(res)
    assert list(fig.data[0].marker.color).count(TARGET_COLOUR) == 1
    assert fig.data[0].marker.color[1] == TARGET_COLOUR and fig.data[0].y[1] == "#2 ·C"
    res.top, res.rank, res.prob = [(" D", 0.9)], 7, 0.01
    fig = exam_topk(res)
    assert len(fig.data[0].y) == 2 and "(target)" in fig.data[0].y[1]


# ---------------------------------------------------------------- report


def test_render_report_inlines_plotly_once():
    import plotly.graph_objects as go

    from interp_toolkit.views.page import Row, Section, render_report, table

    figs = [go.Figure(go.Scatter(x=[1, 2], y=[3, 4], name=f"f{i}")) for i in range(3)]
    page = render_report(
        [
            Section("A", [figs[0], Row(figs[1:], ["left", "right"])], intro="<b>x</b>"),
            Section("B", [table(["k"], [["<unk>"]])]),
        ],
        title="T <1>",
    )
    assert_offline(page)
    assert page.count(plotly_js()) == 1 and page.count('class="plotly-graph-div"') == 3
    assert (
        "&lt;unk&gt;" in page
        and "&lt;b&gt;x&lt;/b&gt;" in page
        and "<title>T &lt;1&gt;</title>" in page
    )
    assert "CircuitsVis" not in page  # no circuitsvis bundle when no view is on the page


def _n_figures(sections) -> int:
    """Plotly figures in report sections, rows included."""
    import plotly.graph_objects as go

    from interp_toolkit.views.page import Row

    items = [it for sec in sections for it in sec.items]
    items += [it for row in items if isinstance(row, Row) for it in row.items]
    return sum(isinstance(it, go.Figure) for it in items)


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("study")
    return make_tiny_run(root / "L1", n_layers=1), make_tiny_run(root / "L2", n_layers=2)


@pytest.fixture(scope="module")
def analyses(two_runs):
    from interp_toolkit.reports.run_analysis import analyse_run
    from interp_toolkit.runs.folder import load_run

    return [analyse_run(load_run(p)) for p in two_runs]


def test_run_report(two_runs, analyses):
    from interp_toolkit.reports.run_report import build_run_report, run_report_sections
    from interp_toolkit.views.cv import bundle as circuitsvis_bundle

    path = build_run_report(two_runs[1], head_report=analyses[1].head_report)
    assert path == two_runs[1] / "report.html"
    page = path.read_text(encoding="utf-8")
    assert_offline(page)
    assert page.count(plotly_js()) == 1 and page.count(circuitsvis_bundle()) == 1
    for heading in (
        "Config and recipe",
        "Training",
        "Samples",
        "Exam",
        "Heads",
        "Impact and the induction stripe",
        "Route by path",
        "Attention of the key heads",
    ):
        assert f"<h2>{heading}</h2>" in page
    assert "The cat &lt;sat&gt; &amp; ran" in page  # samples are escaped
    assert "tested for specificity against the head itself" in page
    assert "effect-size floor" in page
    assert "★ = significant (p &lt;= 0.05) and ≥ the effect-size floor" in page
    analysis = analyses[1]
    # every figure of the report's sections once; one attention view per layer holding a key head
    assert page.count('class="plotly-graph-div"') == _n_figures(run_report_sections(analysis))
    key_layers = {h.layer for h in analysis.key_heads()}
    assert page.count("CircuitsVis.render(") == len(key_layers)


def test_summary_and_comparison(analyses):
    from interp_toolkit.reports.study_report import (
        comparison_sections,
        describe_run,
        render_comparison,
    )

    summaries = [a.summary() for a in analyses]
    json.dumps([s.to_dict() for s in summaries])  # JSON-safe
    s1, s2 = summaries
    assert s1.n_layers == 1 and s1.href == "L1/report.html"
    assert len(s2.scores["induction_vw"]) == 2 and s1.feeder is None  # the deciding score
    assert set(s2.tau) == set(s2.p_value) == set(s2.passes) == {"induction_vw", "previous_token"}
    assert "1 layer (L1)" in describe_run(s1)
    assert "a head needs p <= 0.05 in its specificity test" in describe_run(s1)
    page = render_comparison(summaries, title="Study")
    assert_offline(page)
    assert '<a href="L1/report.html">L1</a>' in page and '<a href="L2/report.html">L2</a>' in page
    assert page.count(plotly_js()) == 1
    assert page.count('class="plotly-graph-div"') == _n_figures(comparison_sections(summaries))
    with pytest.raises(UserError):
        render_comparison([])


# ---------------------------------------------------------------- CLI


def _cli(argv, capsys):
    from interp_toolkit.cli import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
        raise SystemExit(0)
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def test_cli_view_and_bad_input(tmp_path, capsys):
    run = make_tiny_run(tmp_path / "run", n_layers=1, metrics=False)
    out = tmp_path / "v" / "view.html"
    code, stdout, err = _cli(["view", str(run), "--prompt", PROMPT, "--out", str(out)], capsys)
    assert code == 0 and out.is_file() and "wrote" in stdout
    # "The" and " zebra" (two tokens) are not in the 21-id vocabulary: 3 of 7, over 10%
    assert err.startswith("note: 43% of the text's tokens are <unk>: the model knows a 21-id ")
    code, _, err = _cli(["view", str(run), "--prompt", " the cat sat", "--out", str(out)], capsys)
    assert code == 0 and "<unk>" not in err
    assert_offline(out.read_text(encoding="utf-8"))

    long_out = tmp_path / "long.html"
    code, _, err = _cli(
        ["view", str(run), "--prompt", "the cat " * 40, "--out", str(long_out)], capsys
    )
    assert code == 2 and err.count("\n") == 1 and "context" in err and not long_out.exists()

    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, _, err = _cli(
        ["view", str(run), "--prompt", PROMPT, "--out", str(blocker / "v.html")], capsys
    )
    assert code == 2 and err.count("\n") == 1 and "not a folder" in err

    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "config.json").write_text((run / "config.json").read_text())
    code, _, err = _cli(["report", str(empty)], capsys)
    assert code == 2 and err.count("\n") == 1 and "no trained model" in err
    assert not (empty / "report.html").exists()
    assert not [p for p in tmp_path.rglob("*.tmp")]


def test_cli_report_bad_output(tmp_path, capsys):
    run = make_tiny_run(tmp_path / "run", n_layers=1, metrics=False)
    code, _, err = _cli(["report", str(run), "--out", str(tmp_path)], capsys)
    assert code == 2 and "is a folder" in err
    assert not (run / "report.html").exists()


def test_views_help_is_fast():
    import subprocess
    import sys

    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, interp_toolkit.cli.views; print('torch' in sys.modules)",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "False"


def _page_figures(page: str) -> list[tuple[dict, dict]]:
    """Every plotly figure's (layout, config) as the page draws it (its Plotly.newPlot call)."""
    dec = json.JSONDecoder()
    out = []
    for m in re.finditer(r'Plotly\.newPlot\(\s*"[^"]+",\s*', page):
        _, i = dec.raw_decode(page, m.end())  # the data
        layout, i = dec.raw_decode(page, re.compile(r",\s*").match(page, i).end())
        config, _ = dec.raw_decode(page, re.compile(r",\s*").match(page, i).end())
        out.append((layout, config))
    return out


def test_every_figure_title_sits_below_the_mode_bar():
    """The mode bar (plotly's toolbar, top right) covered the titles of the study page's
    heatmaps: on a page every figure's title starts below the mode bar's band, is wrapped to the
    figure's width, and the top margin holds band, title lines and subplot titles, with the plot
    area as tall as the view made it. The caller's figure is left as it was."""
    import plotly.graph_objects as go

    from interp_toolkit.views import plots
    from interp_toolkit.views.circuit import circuit_figure, faithfulness_curve
    from interp_toolkit.views.features import density_histogram
    from interp_toolkit.views.induction_plots import period_exam_plot
    from interp_toolkit.views.page import (
        CHAR_EM,
        LINE_EM,
        MODEBAR_PX,
        TITLE_GAP_PX,
        Row,
        Section,
        render_report,
    )

    scores = torch.tensor([[0.1, 0.9, 0.2, 0.3], [0.05, 0.3, 0.7, 0.1]])
    heat = [
        plots.head_score_heatmap(
            scores, kind="induction", passes=scores > 0.5, floor=0.4, test="p <= 0.05", title=n
        )
        for n in ("cpu-1l", "cpu-2l")
    ]
    rows = [{"step": s, "tokens": 10 * s, "loss": 3.0 / (s + 1)} for s in range(5)]
    edges = [{"source": "0.0", "target": "1.1", "input": "k", "score": 0.5}]
    figs = [
        plots.loss_curve(rows),
        period_exam_plot({}, lower_bound=0.9),
        circuit_figure(edges, n_layers=2, n_heads=2),
        faithfulness_curve({"ig": [(1, 0.2), (4, 0.9)]}, target=0.8),
        density_histogram(["-3", "-2"], [4, 9]),
        go.Figure(go.Scatter(x=[1], y=[1])),  # no title
    ]
    before = [f.to_plotly_json()["layout"] for f in (*heat, *figs)]
    page = render_report([Section("S", [Row(heat, ["a", "b"]), *figs])])
    drawn = _page_figures(page)
    assert len(drawn) == len(before) == 8
    assert [f.to_plotly_json()["layout"] for f in (*heat, *figs)] == before  # not mutated
    for (layout, _), old in zip(drawn, before, strict=True):
        title = layout.get("title", {})
        top = layout.get("margin", {}).get("t", 100)
        assert top >= MODEBAR_PX + TITLE_GAP_PX, old
        if old.get("title", {}).get("text"):
            assert title.get("yref") == "container" and title.get("y") == 1, title
            size = title.get("font", {}).get("size") or 17
            # plotly's top pad places the first line's baseline (measured in Chromium:
            # tests/unit/study/test_study_page_words.py), so the line's top is a size higher
            first_top = title["pad"]["t"] - size
            assert title.get("yanchor") == "top" and first_top >= MODEBAR_PX, title
            lines = title["text"].split("<br>")
            band = first_top + round(LINE_EM * size * len(lines))
            subplot_titles = [a for a in layout.get("annotations", []) if a.get("y", 0) >= 1]
            assert top >= band + TITLE_GAP_PX + 20 * bool(subplot_titles), (title, top)
            width = layout.get("width") or 440
            assert all(len(line) * CHAR_EM * size <= 0.9 * width for line in lines), lines
            # the words are all still there, in order
            assert " ".join(lines) == old["title"]["text"]
        if old.get("height") is not None:
            old_t = old.get("margin", {}).get("t", 100)
            assert layout["height"] - top >= old["height"] - old_t  # the plot keeps its height
    # the heatmap's long rule wraps (it overflowed a 460 px figure on one line)
    heat_title = drawn[0][0]["title"]["text"]
    assert heat_title.count("<br>") >= 1 and heat_title.startswith("cpu-1l (★ = significant")
