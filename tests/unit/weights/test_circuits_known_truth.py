"""Discovery, circuits, composition, ablation and the exam against hand-built circuits whose answer
is known (``tests/planting/circuits.py`` describes the weights).

Planted: a previous-token head 0.0 feeding a K-composition induction head 1.0 (``k``), and a
duplicate-token head 0.0 feeding a Q-composition induction head 1.0 (``q``); in both, 0.1 is an
unrelated copying head and 1.1 is empty. The controls are the same models with 0.0's OV zeroed.
"""

from __future__ import annotations

import json
import math
import random

import pytest
import torch
from planting import ALPHA, BLOCK, LETTERS, letters_codec
from planting.circuits import CFG, CIRCUITS, GAIN, UNRELATED_GAIN, control_model

from interp_toolkit.causal.ablation import induction_after_ablation
from interp_toolkit.exams.single import BUILTIN_EXAMS, run_exam
from interp_toolkit.heads.discovery import discover_heads
from interp_toolkit.heads.options import DiscoveryOptions
from interp_toolkit.heads.registry import HeadId
from interp_toolkit.heads.repeats import default_probe
from interp_toolkit.weights import circuits as C
from interp_toolkit.weights import composition as CO

KINDS = tuple(CIRCUITS)
CIRCUIT_ROLES = ("induction", "previous-token", "duplicate-token")
#: A planted head's attention where it should look, at the longest context: e^α / (e^α + 31).
SHARP = math.exp(ALPHA) / (math.exp(ALPHA) + BLOCK - 1)
#: p(target) when 1.0 attends sharply and copies (logit GAIN), 0.1 copies the current token
#: (logit UNRELATED_GAIN) and the other BLOCK - 2 logits are 0.
P_TARGET = math.exp(GAIN) / (math.exp(GAIN) + math.exp(UNRELATED_GAIN) + BLOCK - 2)


@pytest.fixture(scope="module")
def codec():
    return letters_codec()


def _model(kind: str):
    return CIRCUITS[kind][0]()


@pytest.fixture(scope="module")
def probe(codec):
    return default_probe(codec, BLOCK, n_seqs=32, seed=5)


def _planted_roles(report) -> dict[str, list[str]]:
    return {role: [str(h) for h in report.heads_with_role(role)] for role in CIRCUIT_ROLES}


# ---------------------------------------------------------------- discovery


@pytest.mark.parametrize("kind", KINDS)
def test_discovery_labels_exactly_the_planted_heads(kind, codec):
    report = discover_heads(_model(kind), codec, DiscoveryOptions(n_seqs=32))
    want = {role: [] for role in CIRCUIT_ROLES}
    want["induction"] = ["1.0"]
    want[CIRCUITS[kind][1]] = ["0.0"]
    assert _planted_roles(report) == want, report.to_dict()["heads"]
    assert report.roles == [[CIRCUITS[kind][1], "none"], ["induction", "none"]]


@pytest.mark.parametrize("kind", KINDS)
def test_discovery_finds_no_induction_in_the_control(kind, codec):
    report = discover_heads(control_model(kind), codec, DiscoveryOptions(n_seqs=32))
    want = {role: [] for role in CIRCUIT_ROLES}
    want[CIRCUITS[kind][1]] = ["0.0"]  # its attention is untouched: it keeps its role
    assert _planted_roles(report) == want, report.to_dict()["heads"]


# ---------------------------------------------------------------- circuits


@pytest.mark.parametrize("kind", KINDS)
def test_copying_heads_copy_and_heads_that_do_not_reach_the_logits_are_empty(kind):
    model = _model(kind)
    scores = C.copying_scores(model)
    # 1.0 and 0.1 write the attended token into the block the unembedding reads: OV = gain * I.
    for head, gain in ((HeadId(1, 0), GAIN), (HeadId(0, 1), UNRELATED_GAIN)):
        assert float(scores[head]) == pytest.approx(1.0, abs=1e-6)
        for t in (0, 7, BLOCK - 1):
            top = C.top_boosted_tokens(model, *head, token_id=t, k=2)
            assert top[0] == (t, pytest.approx(gain)) and top[1][1] == 0.0
    acc = C.copy_accuracy(model, (1,))[1]
    assert acc.tolist() == [[0.0, 1.0], [1.0, 0.0]]  # the empty heads tie everywhere: rank > 0
    # 0.0 writes only the block layer 1 reads, 1.1 nothing: no direct path to the logits.
    assert torch.isnan(scores).tolist() == [[True, False], [False, True]]
    assert C.ov_gain(model)[0, 0] == 0.0


def test_previous_token_head_reads_positions_only():
    model = _model("k")
    # from W_pos alone, query p attends to p - 1 with weight e^α / (e^α + p)
    assert C.pos_prev_token_score(model, 0, 0) > SHARP
    pattern = C.pos_qk_pattern(model, 0, 0)
    assert torch.equal(pattern.diagonal(-1) > 0.99, torch.ones(BLOCK - 1, dtype=torch.bool))
    # and reads no token: its full QK circuit is zero
    assert float(C.full_qk(model, 0, 0).norm()) == 0.0
    # the induction head's key reads what 0.0 writes, not the embedding: from tokens alone it is 0
    assert float(C.full_qk(model, 1, 0).norm()) == 0.0


def test_duplicate_token_head_by_position_only_avoids_itself():
    model = _model("q")
    # from positions alone, 0.0 sees only "not myself" (-α on the diagonal): query p >= 1 spreads
    # 1/p over keys 0..p-1, so the mean sub-diagonal is H(n-1)/(n-1), n = n_ctx
    want = sum(1 / p for p in range(1, BLOCK)) / (BLOCK - 1)
    assert C.pos_prev_token_score(model, 0, 0) == pytest.approx(want, rel=1e-6)
    # from tokens alone, it matches identical tokens: the full QK circuit is alpha*sqrt(d_head)*I
    qk = C.full_qk(model, 0, 0).AB
    assert torch.equal(qk, qk.diagonal().diag()) and bool((qk.diagonal() > 0).all())


@pytest.mark.parametrize("kind", KINDS)
def test_empty_ov_head_of_the_control_says_empty(kind, codec):
    model = control_model(kind)
    assert float(C.ov_gain(model)[0, 0]) == 0.0 and torch.isnan(C.copying_scores(model)[0, 0])
    res = C.head_circuit(model, codec, 0, 0, token_ids=[3], k=2)
    assert res.copying_score is None and res.copying_note.startswith("empty OV circuit")
    assert res.top1_accuracy == 0.0  # every logit ties, and a tie counts against the token
    assert res.pos_prev_token == pytest.approx(C.pos_prev_token_score(_model(kind), 0, 0))
    live = C.head_circuit(model, codec, 1, 0, token_ids=[3], k=2)
    assert live.copying_note is None and live.copying_score == pytest.approx(1.0, abs=1e-6)
    assert live.top1_accuracy == 1.0 and live.boosted[0]["top"][0]["token_id"] == 3


@pytest.mark.parametrize("kind", KINDS)
def test_copying_table_says_which_heads_are_empty(kind):
    """The study's circuits.json: no NaN; the heads with no direct path to the logits are named."""
    table = C.copying_table(control_model(kind))
    json.dumps(table, allow_nan=False)
    assert table["copying_score"] == [[None, 1.0], [1.0, None]]
    assert table["empty"] == ["0.0", "1.1"] and table["empty_rule"].startswith("empty OV circuit")


def _cli(argv, capsys):
    from interp_toolkit.cli import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
        raise SystemExit(0)
    return exc.value.code, capsys.readouterr().out


def test_circuits_command_says_empty_for_an_empty_ov_circuit(tmp_path, codec, capsys):
    from interp_toolkit.runs.folder import save_run

    run = save_run(tmp_path / "control", control_model("k"), codec, CFG)
    out = tmp_path / "c.json"
    code, stdout = _cli(["copying", str(run), "--head", "0.0", "--json", str(out)], capsys)
    assert code == 0
    data = json.loads(out.read_text())
    assert data["copying_score"] is None and data["copying_note"].startswith("empty OV circuit")
    assert "copying score: empty OV circuit" in " ".join(stdout.split())
    code, stdout = _cli(["copying", str(run), "--head", "1.0", "--json", str(out)], capsys)
    data = json.loads(out.read_text())
    assert code == 0 and data["copying_note"] is None and "empty" not in stdout
    assert data["copying_score"] == pytest.approx(1.0, abs=1e-6) and data["top1_accuracy"] == 1.0
    # ' A'..' D' are shown by default; each boosts itself by GAIN
    assert [b["top"][0]["token"] for b in data["boosted"]] == [" A", " B", " C", " D"]
    assert all(b["top"][0]["logit"] == pytest.approx(GAIN) for b in data["boosted"])


# ---------------------------------------------------------------- composition


@pytest.mark.parametrize("kind", KINDS)
def test_composition_names_the_planted_route_only(kind):
    model = _model(kind)
    comp = {k: CO.composition_scores(model, k)[0, :, 1, :] for k in ("q", "k", "v")}
    # 0.0's OV is a rank-32 partial isometry onto MID and 1.0 reads MID through a rank-32 partial
    # isometry: ||AB|| / (||A|| ||B||) = sqrt(32) / 32
    want = torch.zeros(2, 2)
    want[0, 0] = 1 / math.sqrt(BLOCK)
    for k, scores in comp.items():
        torch.testing.assert_close(
            scores, want if k == kind else torch.zeros(2, 2), atol=1e-6, rtol=0
        )
    assert float(comp[kind][0, 0]) > CO.composition_baseline(model)


def test_control_has_no_composition():
    for kind in KINDS:
        comp = torch.stack([CO.composition_scores(control_model(kind), k) for k in "qkv"])
        assert float(comp.nan_to_num().abs().max()) == 0.0


# ---------------------------------------------------------------- ablation


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_ablating_the_layer0_head_collapses_induction(kind, mode, probe):
    model = _model(kind)
    clean = induction_after_ablation(model, probe, [], mode=mode)
    assert float(clean.induction[1, 0]) > SHARP - 1e-6
    uniform = float(clean.induction[1, 1])  # 1.1 has no weights: uniform attention
    after = float(induction_after_ablation(model, probe, [(0, 0)], mode=mode).induction[1, 0])
    assert after < 0.2 * float(clean.induction[1, 0])  # collapses (the study's rule)
    if mode == "zero" or kind == "k":
        # nothing reaches 1.0's key (k) or query (q), or every key gets the same mean (k, mean)
        assert after == pytest.approx(uniform, abs=1e-6)
    for unrelated in ([(0, 1)], [(1, 1)]):  # writes only the logits' block / nothing
        other = induction_after_ablation(model, probe, unrelated, mode=mode)
        torch.testing.assert_close(other.induction, clean.induction, atol=0, rtol=0)


# ---------------------------------------------------------------- the exam


@pytest.mark.parametrize("kind", KINDS)
def test_circuits_pass_the_builtin_exams(kind, codec):
    model = _model(kind)
    for exam in BUILTIN_EXAMS:
        res = run_exam(model, codec, exam.prompt, exam.target)
        assert res.rank == 0, (exam.name, res.to_dict())
        if kind == "k":  # one sharp attention, whatever the number of earlier copies
            assert res.prob == pytest.approx(P_TARGET, rel=1e-5)


@pytest.mark.parametrize("kind", KINDS)
def test_controls_fail_the_builtin_exams(kind, codec):
    # uniform attention copies each token in proportion to its count: in ABCXDEF the target ' F'
    # occurs twice, ' B' ' C' ' X' ' D' ' E' three times and ' A' twice (the first A has no
    # space): a tie, which counts against the target (rank 6); in ABCD ' D' 4 times, ' B' ' C'
    # 5 and ' A' 4 (rank 3)
    model = control_model(kind)
    ranks = {e.name: run_exam(model, codec, e.prompt, e.target).rank for e in BUILTIN_EXAMS}
    assert ranks == {"ABCXDEF": 6, "ABCD": 3}


def _repeat_prompts(n_per_period: int, seed: int = 0):
    """Two-repeat letter prompts ``seg seg[:-1]`` -> ``seg[-1]`` (built-in style) for every
    period that fits the context with BOS."""
    rng = random.Random(seed)
    for period in range(2, BLOCK // 2 + 1):
        for _ in range(n_per_period):
            seg = rng.sample(LETTERS, period)
            yield period, "".join(seg + seg[:-1]), seg[-1]


@pytest.mark.parametrize("kind", KINDS)
def test_repeated_letter_exams_at_every_period(kind, codec):
    model, control = _model(kind), control_model(kind)
    for period, prompt, target in _repeat_prompts(3):
        res = run_exam(model, codec, prompt, target)
        assert res.rank == 0 and res.prob == pytest.approx(P_TARGET, rel=1e-5), (period, prompt)
        # the control: every other letter of the segment occurs twice, the target once, tied
        # with BOS (a tie counts against the target)
        assert run_exam(control, codec, prompt, target).rank == period, (period, prompt)
