"""The head vocabulary: HeadId, the score registry, head queries, and the two registry scores
added through it (current-token, first-token), each on a hand-built head with a known answer."""

from __future__ import annotations

import pytest
import torch
from analysis_helpers import (
    make_first_token_head,
    make_offset_head,
    make_prev_token_head,
    tiny_codec,
)

from interp_toolkit.errors import UserError
from interp_toolkit.heads.discovery import discover_heads, head_scores
from interp_toolkit.heads.options import DiscoveryOptions
from interp_toolkit.heads.registry import (
    DEFAULT_DECIDERS,
    INDUCTION_SCORES,
    ROLE_PRECEDENCE,
    ROLES,
    SCORE_KINDS,
    SCORES,
    HeadId,
    deciders,
    partner_of,
    top_head,
)
from interp_toolkit.heads.repeats import repeated_tokens


def test_head_id_prints_and_parses():
    head = HeadId(1, 3)
    assert str(head) == "1.3" and f"{head}" == "1.3" and head == (1, 3)
    assert HeadId.parse(" 2.10 ") == HeadId(2, 10)
    for bad in ("1", "a.b", "1.2.3", "L1H3"):
        with pytest.raises(UserError, match="L.H"):
            HeadId.parse(bad)
    assert HeadId(1, 3).check(2, 4) == head
    with pytest.raises(UserError, match="head 2.0 does not exist"):
        HeadId(2, 0).check(2, 4)
    scores = torch.arange(8.0).reshape(2, 4)
    assert float(scores[head]) == 7.0  # a HeadId indexes [layer, head] directly


def test_registry_names_each_score_once():
    assert SCORE_KINDS[:4] == ("previous_token", "duplicate_token", "induction", "induction_vw")
    assert SCORE_KINDS[4:] == ("current_token", "first_token")
    assert len({s.label for s in SCORES}) == len({s.title for s in SCORES}) == len(SCORES)
    assert all(s.definition and 0 < s.floor < 1 for s in SCORES)
    # the role precedence is unchanged by the added scores (they carry no role)
    assert ROLES == (*ROLE_PRECEDENCE, "none")
    assert ROLE_PRECEDENCE == ("induction", "previous-token", "duplicate-token")
    # one source of truth: the default decider of a role is the registry entry whose role it is
    assert {s.name: s.role for s in SCORES if s.role} == {k: r for r, k in DEFAULT_DECIDERS.items()}
    assert DEFAULT_DECIDERS["induction"] == "induction_vw"
    assert set(INDUCTION_SCORES.values()) == {"induction_vw", "induction"}
    assert deciders("plain") == {**DEFAULT_DECIDERS, "induction": "induction"}
    with pytest.raises(UserError, match="vw or plain"):
        deciders("induction_vw")


def test_top_head_and_partner():
    s = torch.tensor([[0.1, 0.9, 0.2], [0.9, 0.3, 0.95]])
    assert top_head(s) == HeadId(1, 2)
    assert top_head(s, layers=range(1)) == HeadId(0, 1)
    assert top_head(torch.tensor([[0.5, 0.5], [0.5, 0.1]])) == HeadId(0, 0)  # first on a tie
    assert top_head(s, among=[(1, 0), (0, 2)]) == HeadId(1, 0)
    assert top_head(s, among=[]) is None
    assert partner_of(s, HeadId(1, 1)) == HeadId(0, 1)
    assert partner_of(s, HeadId(0, 1)) is None


@pytest.fixture
def probe():
    return repeated_tokens(8, 6, low=0, high=63, bos_id=0, prefix_max=4, seed=1)


def _model(tiny_cfg):
    from interp_toolkit.models.build import build_model

    return build_model(tiny_cfg)


def test_current_token_score_on_a_hand_built_head(tiny_cfg, probe):
    model = _model(tiny_cfg)
    make_offset_head(model, layer=0, head=1, offset=0)  # attends to itself
    make_prev_token_head(model, layer=0, head=2)
    with torch.no_grad():
        s = head_scores(model, probe)
    assert s.current_token[0, 1] > 0.95  # the known answer: ~1
    assert s.previous_token[0, 1] < 0.05 and s.first_token[0, 1] < 0.05
    assert s.current_token[0, 2] < 0.05 and s.previous_token[0, 2] > 0.95


def test_first_token_score_on_a_hand_built_head(tiny_cfg, probe):
    model = _model(tiny_cfg)
    make_first_token_head(model, layer=1, head=0)  # every query rests on position 0 (BOS)
    with torch.no_grad():
        s = head_scores(model, probe)
    assert s.first_token[1, 0] > 0.95  # the known answer: ~1
    assert s.current_token[1, 0] < 0.05 and s.previous_token[1, 0] < 0.05


def test_added_scores_decide_no_role(tiny_cfg):
    model = _model(tiny_cfg)
    make_offset_head(model, layer=0, head=1, offset=0)
    make_first_token_head(model, layer=1, head=0)
    report = discover_heads(model, tiny_codec(tiny_cfg.d_vocab), DiscoveryOptions(n_seqs=16))
    assert report.scores.current_token[0, 1] > 0.95 and report.scores.first_token[1, 0] > 0.95
    # both pass their specificity test, and still decide no role
    assert report.significant["current_token"][0, 1] and report.significant["first_token"][1, 0]
    assert report.roles[0][1] == "none" and report.roles[1][0] == "none"
    head = report.to_dict()["heads"][1]
    assert head["head"] == "0.1" and head["scores"]["current_token"] > 0.95
    assert set(head["tau"]) == set(head["p_value"]) == set(SCORE_KINDS)
