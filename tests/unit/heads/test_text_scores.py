"""Head scores on any text, checked against TransformerLens's own ``head_detector`` on hand-built
heads with known answers and on random heads, and against the period rule on periodic prompts."""

from __future__ import annotations

import warnings

import pytest
import torch
from planting import letters_codec
from planting.circuits import control_model, k_composition_model
from transformer_lens.head_detector import (
    compute_head_attention_similarity_score,
    detect_head,
    get_duplicate_token_head_detection_pattern,
    get_induction_head_detection_pattern,
    get_previous_token_head_detection_pattern,
)

from interp_toolkit import scores_on
from interp_toolkit.errors import UnknownTokensWarning, UserError
from interp_toolkit.heads.registry import SCORE
from interp_toolkit.heads.repeats import prompt_probe
from interp_toolkit.heads.text_scorer import previous_occurrence, stripe_keys, text_head_scores
from interp_toolkit.models.build import ModelConfig, build_model
from interp_toolkit.text.tl_tokenizer import attach_tokenizer

#: The leading "A" is another token than " A": no exact periodic repeat, six tokens recur.
TEXT = "A B C D E F G A B C D E F G"
UNK = 31  # the letters vocabulary's <unk>


@pytest.fixture
def k_model():
    model = k_composition_model()
    attach_tokenizer(model, letters_codec())
    return model


def _pattern_of(kind: str, tokens: torch.Tensor) -> torch.Tensor:
    """The (q, k) entries our stripe reads, as a 0/1 matrix (TransformerLens's layout)."""
    keys = stripe_keys(SCORE[kind].stripe, previous_occurrence(tokens, first=1), first_key=1)[0]
    pat = torch.zeros(tokens.shape[1], tokens.shape[1])
    for q, k in enumerate(keys.tolist()):
        if k >= 0:
            pat[q, k] = 1.0
    return pat


def test_previous_occurrence_is_the_latest_earlier_one_never_bos():
    toks = torch.tensor([[0, 5, 6, 5, 7, 5, 0, 6]])
    assert previous_occurrence(toks, first=1).tolist() == [[-1, -1, -1, 1, -1, 3, -1, 2]]
    assert previous_occurrence(toks, first=0).tolist() == [[-1, -1, -1, 1, -1, 3, 0, 2]]


def test_stripes_are_transformerlens_detection_patterns(k_model):
    """Where every token occurs at most twice, the entries each score reads are exactly
    TransformerLens's detection patterns (previous-token: without the BOS key)."""
    tokens = k_model.to_tokens(TEXT).cpu()
    tl_ind = get_induction_head_detection_pattern(tokens)
    tl_dup = get_duplicate_token_head_detection_pattern(tokens)
    tl_prev = get_previous_token_head_detection_pattern(tokens)
    tl_prev[:, 0] = 0  # our relative stripes never read BOS
    assert torch.equal(_pattern_of("induction", tokens), tl_ind)
    assert torch.equal(_pattern_of("duplicate_token", tokens), tl_dup)
    assert torch.equal(_pattern_of("previous_token", tokens), tl_prev)


def test_known_heads_score_as_planted_and_as_transformerlens_says(k_model):
    """The K-composition circuit: 1.0 is an induction head, 0.0 a previous-token head; on TEXT
    both score ~1 here. TransformerLens's detect_head averages over all 15 queries (its score is
    ours times the share of queries we read: 6 of 15 for induction)."""
    s = text_head_scores(k_model, k_model.to_tokens(TEXT).cpu(), has_bos=True, longest=False)
    assert s.queries["induction"] == 6 and s.queries["previous_token"] == 13
    assert float(s.induction[1, 0]) > 0.999 and float(s.previous_token[0, 0]) > 0.999
    assert float(s.induction[0].max()) < 0.01 and float(s.induction[1, 1]) < 0.5
    tl = detect_head(k_model, TEXT, "induction_head")
    assert torch.allclose(s.induction, tl.float() * 15 / 6, atol=1e-5)
    # scores_on's reading skips " B", whose token before (" A") is another than "A": one
    # recurring token is no repeated span
    mine = scores_on(k_model, TEXT)
    assert mine.queries["induction"] == 5 and float(mine.induction[1, 0]) > 0.999
    # the control (0.0's output zeroed) has no induction head: 1.0 attends uniformly
    control = control_model("k")
    attach_tokenizer(control, letters_codec())
    assert float(scores_on(control, TEXT).induction[1, 0]) < 0.3


def test_random_heads_match_transformerlens_on_every_score():
    """Random weights (attention spread everywhere): each score is TransformerLens's "mul"
    similarity to its detection pattern, rescaled from all queries to the queries we read."""
    cfg = ModelConfig(n_layers=2, d_model=64, n_heads=4, d_head=16, n_ctx=32, d_vocab=32, seed=3)
    model = build_model(cfg, codec=letters_codec())
    tokens = model.to_tokens(TEXT)
    s = text_head_scores(model, tokens.cpu(), has_bos=True, longest=False)
    _, cache = model.run_with_cache(tokens, remove_batch_dim=True)
    n = tokens.shape[1]
    for kind in ("induction", "duplicate_token", "previous_token"):
        pat = _pattern_of(kind, tokens.cpu())
        for layer in range(2):
            for head in range(4):
                a = cache["pattern", layer, "attn"][head].detach().cpu()
                tl = compute_head_attention_similarity_score(
                    a, pat, exclude_bos=False, exclude_current_token=False, error_measure="mul"
                )
                want = tl * n / pat.sum().item()
                assert abs(float(s.get(kind)[layer, head]) - want) < 1e-5, (kind, layer, head)


def test_periodic_prompts_read_the_same_as_the_period_rule(k_model):
    """On [BOS] seg seg (no filler) the text rule (latest occurrence) reads the period rule's
    entries."""
    cfg = ModelConfig(n_layers=2, d_model=64, n_heads=4, d_head=16, n_ctx=32, d_vocab=32, seed=5)
    model = build_model(cfg, codec=letters_codec())
    text = " A B C D E F A B C D E F"
    tokens = model.to_tokens(text).cpu()
    period_rule = scores_on(model, text)  # inferred period 6
    as_text = text_head_scores(model, tokens, has_bos=True, longest=False)
    for kind in SCORE:
        assert torch.allclose(period_rule.get(kind), as_text.get(kind), atol=1e-6), kind
    assert period_rule.queries == as_text.queries


def test_text_without_a_repeated_token_has_nan_repeat_scores(k_model):
    """Decided: no token occurs twice -> the scores that read repeats are NaN (nothing to
    average; ``.queries`` is 0), the positional scores are still measured."""
    s = scores_on(k_model, " A B C D E F G")
    for kind in ("induction", "induction_vw", "duplicate_token"):
        assert s.queries[kind] == 0 and bool(s.get(kind).isnan().all()), kind
    assert s.queries["previous_token"] == 6 and float(s.previous_token[0, 0]) > 0.999


def test_rows_of_another_period_or_no_period_are_read_as_text():
    """Batches the period rule refuses (rows of different periods, a span repeated only in
    part) are scored as text, token by token."""
    cfg = ModelConfig(n_layers=1, d_model=32, n_heads=2, d_head=16, n_ctx=32, d_vocab=32, seed=1)
    model = build_model(cfg, codec=letters_codec())
    rows = [[0, 3, 4, 3, 4, 9, 9], [0, 3, 4, 5, 3, 4, 5]]
    s = scores_on(model, rows)
    # row 0: 3, 4 recur 2 back and 9 1 back (too close to read); row 1: 3, 4, 5 recur 3 back
    # (the first 3 alone: its token before, BOS, is no match)
    assert s.queries["induction"] == 2 and not bool(s.induction.isnan().any())


def test_close_repeats_are_not_read_so_a_previous_token_head_is_no_induction_head():
    """At distance 2 the induction key is the token before the query: a previous-token head
    would score 1 there. Repeats closer than MIN_DISTANCE (3) are not read; at 3 they are."""
    from analysis_helpers import make_prev_token_head, tiny_codec

    from interp_toolkit.heads.text_scorer import MIN_DISTANCE

    cfg = ModelConfig(n_layers=1, d_model=32, n_heads=4, d_head=8, n_ctx=32, d_vocab=64, seed=0)
    model = build_model(cfg, codec=tiny_codec(64))
    make_prev_token_head(model, 0, 0)
    close = torch.tensor([[0, 5, 6, 5, 7, 8, 7, 9, 10, 9]])  # every repeat 2 back
    s = text_head_scores(model, close, has_bos=True, longest=False)
    assert MIN_DISTANCE == 3 and s.queries["induction"] == 0
    assert bool(s.induction.isnan().all()) and float(s.previous_token[0, 0]) > 0.99
    far = torch.tensor([[0, 5, 6, 7, 5, 8, 9, 10, 8]])  # every repeat 3 back
    f = text_head_scores(model, far, has_bos=True, longest=False)
    assert f.queries["induction"] == 2 and float(f.induction[0, 0]) < 0.01


#: English the 32-id letters vocabulary cannot read: every word but `` A`` is ``<unk>``.
ENGLISH = "import os\nThe quick brown fox jumps over A lazy dog"


def test_a_run_of_unk_is_never_a_repeat(k_model):
    """Runs of ``<unk>`` are words the vocabulary could not read, not a span followed by itself:
    the previous-token head 0.0 (which reads as a perfect induction head on a period-2 prompt)
    has no induction score on English with no repeats (NaN: no query to read), where reading
    ``<unk>`` as a token gave it 1.0; the notice names the vocabulary and the share unknown."""
    with pytest.warns(UnknownTokensWarning, match=r"92% of the text's tokens are <unk>.*32-id"):
        s = scores_on(k_model, ENGLISH)
    assert s.queries["induction"] == 0 and s.queries["duplicate_token"] == 0
    assert torch.isnan(s.induction).all()
    assert float(s.previous_token[0, 0]) > 0.999  # the head still reads as what it is
    tokens = k_model.to_tokens(ENGLISH).cpu()
    assert len(prompt_probe_or_none(tokens, unk_id=None) or []) == 1  # the old reading: period 2
    assert prompt_probe_or_none(tokens, unk_id=UNK) is None


def test_the_planted_induction_head_still_scores_between_unknown_words(k_model):
    """Readable repeats between ``<unk>`` words are still read: the induction head 1.0 scores
    ~1 on them, the previous-token head 0.0 near 0; the ``<unk>`` around them are not queries."""
    text = "The fox A B C D E jumps over A B C D E"
    with pytest.warns(UnknownTokensWarning, match="29%"):
        s = scores_on(k_model, text)
    assert s.queries["induction"] == 4  # the second A B C D E but its A; no <unk> is a query
    assert float(s.induction[1, 0]) > 0.99 and float(s.induction[0, 0]) < 0.01


def test_readable_text_carries_no_notice(k_model):
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnknownTokensWarning)
        scores_on(k_model, TEXT)


def prompt_probe_or_none(tokens, *, unk_id):
    """The period the periodic reading finds (as a one-item list), or None when it finds none."""
    try:
        return [prompt_probe(tokens, bos_id=0, unk_id=unk_id).period]
    except UserError:
        return None


# ------------------------------------------------------------------ which reading (issue 47)

#: A span whose copy is cut short by one token, with a run of one token in it: the shape of
#: ``"def fib(n):\n    return n\n\n" + "def fib(n):\n    return n\n"``, whose four spaces the
#: old rule took for a period-2 repeat (2 queries), reading the previous-token head as an
#: induction head (1.000) and the induction head at 0.028.
CUT = " A B C C C C D E E A B C C C C D E"


def test_a_run_of_one_token_is_no_period_and_the_text_reading_finds_the_heads(k_model):
    """The near miss is refused: the old inference found period 2 (the run of C), the new one
    finds no whole-prompt period (the span's tokens are not distinct), so the text reading
    applies: the planted induction head 1.0 scores highest (it spreads its attention over
    every C's successor inside the run, so below 1), the previous-token head 0.0 ~0."""
    tokens = k_model.to_tokens(CUT).cpu()
    assert prompt_probe(tokens, bos_id=0, unk_id=UNK).period == 2  # the old reading's period
    old = scores_on(k_model, CUT, period=2)  # what it read: 0.0 as a perfect induction head
    assert float(old.induction[0, 0]) > 0.99 and old.queries["induction"] == 2
    s = scores_on(k_model, CUT)
    assert s.reading == "text" and s.queries["induction"] >= 6
    assert divmod(int(s.induction.argmax()), 2) == (1, 0) and float(s.induction[1, 0]) > 0.4
    assert float(s.induction[0, 0]) < 0.05


@pytest.mark.parametrize(
    "text, period",
    [
        (" A B C D A B C D", 4),
        (" A B C D A B C D A B", 4),  # a last copy cut short
        (" A B C A B C A B C", 3),
        (" A B A B A B", None),  # a span of 2: the induction key is the previous token
        (" C C C C C C", None),  # a run of one token
        (" A C C D A C C D", None),  # a span whose tokens are not distinct
        (" A B C D E A B C", None),  # less than two whole copies
        (" X A B C A B C", None),  # not the whole prompt
    ],
)
def test_the_periodic_reading_needs_a_whole_prompt_span_of_distinct_tokens(k_model, text, period):
    from interp_toolkit.heads.repeats import whole_period

    assert whole_period(k_model.to_tokens(text).cpu(), bos_id=0, unk_id=UNK) == period
    assert scores_on(k_model, text).reading == ("period" if period else "text")


def test_a_score_on_few_queries_warns_and_names_its_counts(k_model):
    from interp_toolkit.api import MIN_QUERIES
    from interp_toolkit.errors import FewQueriesWarning

    with pytest.warns(FewQueriesWarning, match=rf"fewer than {MIN_QUERIES} tokens \(.*induction 4"):
        s = scores_on(k_model, " A B C D A B C D")
    assert s.reading == "period" and s.queries["induction"] == 4
    with warnings.catch_warnings():
        warnings.simplefilter("error", FewQueriesWarning)
        scores_on(k_model, " A B C D E F G H I J K L" * 2)


def test_the_text_reading_takes_the_occurrence_whose_context_matches_furthest():
    """In a repeated passage the induction key is the token after the query's place in the
    first copy, not after a closer occurrence elsewhere (the latest one); one token recurring
    alone (no token before it in common) is not read."""
    toks = torch.tensor([[0, 5, 6, 7, 9, 6, 8, 5, 6, 7]])
    assert previous_occurrence(toks, first=1)[0, 8].item() == 5  # latest 6
    longest = previous_occurrence(toks, first=1, longest=True, min_distance=3)
    assert longest[0].tolist() == [-1, -1, -1, -1, -1, -1, -1, -1, 2, 3]  # 6 after 5: pos 2
