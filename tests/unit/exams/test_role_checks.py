"""The causal check of each role (issue 30) on hand-built models whose answer is known
(``tests/planting/circuits.py``): in :func:`role_check_model` the previous-token head 0.0 feeds
induction head 1.0 by K-composition, and two planted negatives attend like a role without doing
its work: 1.1 attends like 1.0 and writes nothing, 0.1 attends to the previous token and writes it
where no induction head reads. Discovery gives all four their role from the scores; the causal
check passes the two that work and flags the two that do not."""

from __future__ import annotations

import pytest
import torch
from planting import letters_codec
from planting.circuits import control_model, role_check_model

from interp_toolkit.causal.paths import route_by_path
from interp_toolkit.causal.routes import Estimate
from interp_toolkit.causal.tasks import induction_task
from interp_toolkit.exams.role_checks import RoleChecks, passage_drops, role_checks
from interp_toolkit.exams.text_measures import passage_tokens
from interp_toolkit.heads.discovery import discover_heads
from interp_toolkit.heads.options import DiscoveryOptions
from interp_toolkit.heads.registry import HeadId
from interp_toolkit.reports.findings import role_check_phrase
from interp_toolkit.stats.thresholds import THRESHOLDS, Thresholds

IND, LOOKS, PREV, PREV_ELSEWHERE = HeadId(1, 0), HeadId(1, 1), HeadId(0, 0), HeadId(0, 1)
ROLES = {"induction": [IND, LOOKS], "previous-token": [PREV, PREV_ELSEWHERE]}


@pytest.fixture(scope="module")
def windows():
    return torch.randint(1, 32, (64, 32), generator=torch.Generator().manual_seed(0))


def _checks(model, windows, t: Thresholds = THRESHOLDS) -> RoleChecks:
    task = induction_task(letters_codec(), 32, n_prompts=16, seed=1)
    report = discover_heads(model, letters_codec(), DiscoveryOptions(seed=0))
    route = route_by_path(model, task, ROLES["induction"], report.roles)
    return role_checks(model, windows, ROLES, route, t=t)


def test_discovery_gives_the_planted_negatives_their_roles():
    """The negatives are near misses of the score-based rule: it gives them the role."""
    roles = discover_heads(role_check_model(), letters_codec(), DiscoveryOptions(seed=0)).roles
    assert roles == [["previous-token", "previous-token"], ["induction", "induction"]]


def test_the_check_passes_the_working_heads_and_flags_the_planted_negatives(windows):
    rc = _checks(role_check_model(), windows)
    by_head = {c.head: c for c in rc.checks}
    assert [c.head for c in rc.passing()] == [IND, PREV]
    assert [c.head for c in rc.flagged()] == [LOOKS, PREV_ELSEWHERE]
    # 1.0 is the only head writing the second copy's prediction: ablating it removes the drop
    assert by_head[IND].removed.value == pytest.approx(1.0, abs=0.01)
    assert by_head[LOOKS].removed == Estimate(0.0, 0.0, 0.0)  # it writes nothing
    assert rc.together.value == pytest.approx(1.0, abs=0.01)
    # 0.0's path into 1.0's key carries 1.0's effect; 0.1's paths carry nothing
    assert by_head[PREV].of == "1.0's effect (K path)"
    assert by_head[PREV].removed.value > 0.9
    assert by_head[PREV_ELSEWHERE].removed.value == pytest.approx(0.0, abs=1e-3)
    assert rc.drop.low > 2.0  # ~ln 32 on the first copy, ~0.5 on the second


def test_a_head_just_under_the_floor_fails(windows):
    """The rule reads Thresholds.role_effect: 1.0 removes ~100%, so a floor above that flags it."""
    rc = _checks(role_check_model(), windows, Thresholds(role_effect=1.01))
    assert IND in [c.head for c in rc.flagged()]


def test_a_model_without_induction_leaves_the_roles_untestable(windows):
    """The control (0.0's OV zeroed) does not do the induction task: no previous-token path has
    an effect to remove, and the check says so rather than passing or failing."""
    rc = _checks(control_model("k"), windows)
    prev = [c for c in rc.checks if c.role == "previous-token"]
    assert [c.passed for c in prev] == [None, None]
    assert "does not do the induction task" in prev[0].why


def test_no_drop_leaves_induction_roles_untestable():
    """Rows of one repeated token: the first copy is as predictable as the second (no drop)."""
    model = role_check_model()
    task = induction_task(letters_codec(), 32, n_prompts=8, seed=1)
    route = route_by_path(model, task, [IND], [["none", "none"], ["induction", "none"]])
    rc = role_checks(model, torch.full((8, 32), 5), {"induction": [IND]}, route)
    (c,) = rc.checks
    assert c.passed is None and "no repeated-passage drop" in c.why


def test_passage_drops_are_first_minus_second_copy(windows):
    model = role_check_model()
    passages = passage_tokens(windows, 16)
    d = passage_drops(model, passages)
    assert d.shape == (64,)
    assert float(d.mean()) > 2.0
    # with every head that writes mean-ablated, both copies are predicted alike
    from interp_toolkit.causal.ablation import mean_z

    flat = passage_drops(model, passages, [IND, PREV_ELSEWHERE], mean_z(model, passages))
    assert float(flat.abs().max()) < 0.2


def test_the_phrase_names_flagged_roles_and_round_trips(windows):
    rc = _checks(role_check_model(), windows)
    phrase = role_check_phrase(rc)
    assert "2 of 4 pass" in phrase
    assert "flagged: induction head 1.1 removes 0% [0%, 0%] of the repeated-passage drop" in phrase
    assert "previous-token head 0.1" in phrase
    assert RoleChecks.from_dict(rc.to_dict()) == rc
