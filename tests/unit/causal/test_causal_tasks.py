"""The task layer: the induction task's corrupt prompts have the same layout and no repeat; the
metric is the one definition; GPT-2 tasks build equal-length prompts with single-token answers
(on a GPT-2-shaped random model from a local folder) and refuse a toy vocabulary."""

from __future__ import annotations

import pytest
import torch
from planting import letters_codec
from planting.circuits import k_composition_model

from interp_toolkit.causal.tasks import (
    Task,
    TokenMetric,
    induction_task,
    make_task,
    previous_token_task,
)
from interp_toolkit.errors import UserError


def test_induction_task_corrupts_only_the_first_repeat():
    codec = letters_codec()
    task = induction_task(codec, 32, n_prompts=6, seed=4)
    period = 13
    for clean, corrupt, scored in zip(task.clean, task.corrupt, task.metric.scored, strict=True):
        diff = torch.nonzero(clean != corrupt)[:, 0]
        assert len(diff) == period and int(diff[-1] - diff[0]) == period - 1  # one segment
        start = int(diff[0])
        seg = clean[start : start + period]
        assert torch.equal(clean[start + period : start + 2 * period], seg)  # clean repeats
        body = corrupt[1:].tolist()
        assert len(set(body)) == len(body)  # nothing repeats in the corrupt row
        q = torch.nonzero(scored)[:, 0]
        assert q.tolist() == list(range(start + period, start + 2 * period - 1))


def test_a_byte_model_gets_a_shorter_period_with_fresh_corrupt_tokens():
    """Bytes: 95 printable ids cannot hold the probe's 50-token segment, its 16-token prefix and
    50 fresh ones; the task's period shrinks to what fits (39), the corrupt segment shares no id
    with its row, and a vocabulary that fits keeps the head-score probe's rows exactly."""
    from interp_toolkit.heads.repeats import default_probe
    from interp_toolkit.text.codecs import ByteCodec

    task = induction_task(ByteCodec(), 256, n_prompts=4, seed=3)
    period = 39
    assert int(task.metric.scored[0].sum()) == period - 1
    for clean, corrupt in zip(task.clean, task.corrupt, strict=True):
        diff = torch.nonzero(clean != corrupt)[:, 0]
        assert len(diff) == period
        fresh = set(corrupt[diff].tolist())
        assert len(fresh) == period and not fresh & set(clean.tolist())
        assert all(32 <= t < 127 for t in clean[1:].tolist())  # printable bytes
    with pytest.raises(UserError, match="too small for a corrupt prompt"):
        from interp_toolkit.causal.tasks import _fresh

        probe = default_probe(ByteCodec(), 256, n_seqs=1, seed=3)  # the probe's period 50
        _fresh(probe.tokens[0], probe.period, probe.low, probe.high, None, torch.Generator())
    codec = letters_codec()
    assert torch.equal(
        induction_task(codec, 32, n_prompts=5, seed=2).clean,
        default_probe(codec, 32, n_seqs=5, seed=2).tokens,
    )


def test_induction_metric_is_the_repeated_tokens_logit_minus_the_mean():
    codec = letters_codec()
    task = induction_task(codec, 32, n_prompts=3, seed=0)
    n = task.clean.shape[1]
    logits = torch.zeros(3, n, 32)
    right = task.metric.right
    for b in range(3):  # +5 on the right token at every position, scored or not
        logits[b, torch.arange(n), right[b]] = 5.0
    assert task.metric(logits).tolist() == pytest.approx([5.0 - 5.0 / 32] * 3)
    logp = TokenMetric(task.metric.scored, right, None, "logprob")(logits)
    want = 5.0 - torch.logsumexp(torch.tensor([5.0] + [0.0] * 31), 0)
    assert logp.tolist() == pytest.approx([float(want)] * 3, abs=1e-5)
    # the hand-built induction model does the task; the metric sees it
    model = k_composition_model()
    with torch.no_grad():
        gap = task.metric(model(task.clean)) - task.metric(model(task.corrupt))
    assert bool((gap > 3.5).all())


def test_previous_token_task_changes_the_token_before_each_scored_position():
    codec = letters_codec()
    model = k_composition_model()
    task = previous_token_task(model, codec, n_prompts=4, seed=0)
    changed = torch.nonzero((task.clean != task.corrupt)[0])[:, 0].tolist()
    scored = torch.nonzero(task.metric.scored[0])[:, 0].tolist()
    assert changed == [q - 1 for q in scored if q - 1 in changed] and changed
    assert all(q - 1 in changed for q in scored if q + 1 < task.clean.shape[1])


@pytest.mark.parametrize("name", ["ioi", "docstring"])
def test_gpt2_tasks_on_a_gpt2_shaped_model(name, gpt2_dirs):
    from interp_toolkit.runs.targets import load_target

    tgt = load_target(str(gpt2_dirs["good"]), "cpu", for_weights=False)
    task = make_task(name, tgt.model, tgt.codec, n_prompts=6, seed=0)
    assert task.clean.shape == task.corrupt.shape and task.clean.shape[0] == 6
    m = task.metric
    assert m.scored[:, -1].all() and m.scored.sum() == 6  # the answer follows the last token
    assert bool((m.right[:, -1] != m.wrong[:, -1]).all())
    for b in range(6):  # the right answer is in the clean prompt and not in the corrupt one
        right = int(m.right[b, -1])
        assert right in task.clean[b].tolist() and right not in task.corrupt[b].tolist()
    with torch.no_grad():
        assert task.metric(tgt.model(task.clean)).shape == (6,)


@pytest.mark.parametrize("name", ["ioi", "docstring"])
def test_gpt2_tasks_refuse_a_toy_vocabulary(name):
    with pytest.raises(UserError, match="GPT-2's vocabulary"):
        make_task(name, k_composition_model(), letters_codec(), n_prompts=4)


def test_own_task_through_the_api_and_bad_shapes():
    clean = torch.randint(0, 32, (4, 10))
    scored = torch.zeros_like(clean, dtype=torch.bool)
    scored[:, -1] = True
    task = Task("mine", clean, clean.flip(0), TokenMetric(scored, clean)).check(
        k_composition_model()
    )
    assert task.rows(torch.tensor([1, 2])).n_prompts == 2
    with pytest.raises(UserError, match="same shape"):
        Task("bad", clean, clean[:, :5], TokenMetric(scored, clean))
    with pytest.raises(UserError):
        Task("big", clean + 100, clean, TokenMetric(scored, clean)).check(k_composition_model())
    with pytest.raises(UserError, match="unknown"):
        make_task("nope", k_composition_model(), letters_codec())
