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
        progress=False,
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
