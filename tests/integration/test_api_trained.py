"""The notebook API and the run report's key heads on the trained 2-layer fixture."""

from __future__ import annotations

import warnings

import pytest
import torch

from interp_toolkit import discover, scores_on, train
from interp_toolkit.errors import UnknownTokensWarning
from interp_toolkit.exams.single import BUILTIN_EXAMS
from interp_toolkit.heads.registry import top_head
from interp_toolkit.measures.run import analyse_run
from interp_toolkit.reports.run_report import run_report_html
from interp_toolkit.stats.thresholds import ARENA_FLOOR


def test_scores_on_a_prompt_agree_with_discovery(trained_2l):
    """On the exam prompt, the heads discovery calls induction heads attend along the induction
    stripe (an untrained head spreads ~1/20 there), and the strongest previous-token head is
    discovery's."""
    found = discover(trained_2l, n_seqs=32)
    report = found.report
    mine = scores_on(trained_2l, BUILTIN_EXAMS[0].prompt)
    assert report.heads_with_role("induction")
    for head in report.heads_with_role("induction"):
        assert float(mine.induction[head]) > 0.5, head
    assert top_head(mine.previous_token) == report.strongest("previous-token")


#: English with no repeated word: under the 1,024-id vocabulary of the stdlib corpus much of it
#: is <unk>, which used to read as "a span followed by itself" (the previous-token head scored
#: 0.998 as an induction head on it).
ENGLISH = "import os\nThe quick brown fox jumps over a lazy dog. Alice went to the market"
#: Code the vocabulary reads, repeated: the induction heads' own text.
CODE = "import os\nimport sys\nimport re\n" * 2


def test_scores_on_text_with_unknown_words_are_no_induction_score(trained_2l):
    """The previous-token head gets no induction score at the floor on English with no repeats
    (and a notice naming the vocabulary and the share unknown), while each induction head still
    scores at the floor on readable repeated code (three heads share the stripe: 0.44-0.45
    each, seen), with no notice."""
    report = discover(trained_2l, n_seqs=32).report
    prev = report.strongest("previous-token")
    with pytest.warns(UnknownTokensWarning, match=r"of the text's tokens are <unk>.*1,024-id"):
        english = scores_on(trained_2l, ENGLISH)
    assert not float(english.induction[prev]) >= ARENA_FLOOR  # NaN (nothing read) or below
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnknownTokensWarning)
        code = scores_on(trained_2l, CODE)
    assert report.heads_with_role("induction")
    for head in report.heads_with_role("induction"):  # each at the role's own floor on code
        assert float(code.induction[head]) >= ARENA_FLOOR, (head, code.induction)
    assert float(code.induction[prev]) < 0.05  # (0.00001 seen) the previous-token head is not


def test_train_exist_ok_load_returns_the_trained_run(trained_2l):
    recipe = trained_2l.settings["train"]  # the fixture's: seed 2, 700 steps, scored every 25
    again = train(
        trained_2l.path,
        layers=2,
        exist_ok="load",
        seed=trained_2l.model_cfg.seed,
        steps=recipe["steps"],
        score_every=recipe["score_every"],
        quiet=True,
    )
    a, b = trained_2l.model.state_dict(), again.model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_report_key_heads_are_the_heads_that_matter(trained_2l):
    analysis = analyse_run(trained_2l)
    rep, route = analysis.head_report, analysis.route
    with_role = {h for role in ("induction", "previous-token", "duplicate-token")
                 for h in rep.heads_with_role(role)}  # fmt: skip
    key = set(analysis.key_heads())
    assert with_role <= key
    feeders = {h.feeder for h in route.heads if h.feeder is not None}
    assert feeders and key - with_role <= {analysis.induction_head, *feeders}
    # the head that feeds the induction heads by path is part of the circuit: it has a role
    assert all(rep.roles[f.layer][f.head] != "none" for f in feeders)
    html = run_report_html(analysis)
    assert "<h2>Route by path</h2>" in html
    want = f"{analysis.feeder()} (previous-token) feeds {analysis.induction_head}&#x27;s k input"
    assert want in html


#: Code the cpu preset's vocabulary reads, each without and with one of its lines repeated (the
#: context is 32 tokens). Issue 47: the text reading used to take each token's latest earlier
#: occurrence, so on a repeated sentence it read mostly other occurrences, and the induction head
#: scored no higher with the repeat than without.
PARAGRAPHS = [
    ("def f(x):\n  y = g(x)\n  return y\n", "  y = g(x)\n"),
    ("x = f(a)\ny = g(x)\nprint(y)\n", "y = g(x)\n"),
]


def test_the_text_reading_responds_to_a_repeated_sentence(trained_2l):
    """The strongest induction head (discovery's) scores higher on each paragraph with a
    repeated line than on the paragraph alone, reading more tokens there."""
    head = discover(trained_2l, n_seqs=32).report.strongest("induction")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # few tokens read without the repeat: warned, as it should
        for paragraph, line in PARAGRAPHS:
            alone, repeated = (
                scores_on(trained_2l, paragraph),
                scores_on(trained_2l, paragraph + line),
            )
            assert alone.reading == repeated.reading == "text"
            assert repeated.queries["induction"] > alone.queries["induction"]
            assert float(repeated.induction[head]) > float(alone.induction[head]), paragraph


def test_code_with_an_indent_is_read_as_text_and_its_top_head_is_an_induction_head(trained_2l):
    """The issue's snippet: its four spaces made it a period-2 prompt, which gave layer-0
    heads induction scores near 1. Now: the text reading, the top head one of discovery's
    induction heads, every layer-0 head far below the floor."""
    report = discover(trained_2l, n_seqs=32).report
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnknownTokensWarning)
        s = scores_on(trained_2l, "def fib(n):\n    return n\n\ndef fib(n):\n    return n\n")
    assert s.reading == "text"
    assert top_head(s.induction) in report.heads_with_role("induction")
    assert float(s.induction[0].max()) < 0.2
