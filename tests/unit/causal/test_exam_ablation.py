"""The exam (results and bad input) and per-head ablation (tiny models, fast). The known-truth
ablation and exam checks on hand-built circuits are in test_circuits_known_truth.py."""

from __future__ import annotations

import pytest
import torch

from interp_toolkit.causal.ablation import head_impact
from interp_toolkit.errors import UserError
from interp_toolkit.exams.single import BUILTIN_EXAMS, run_exam
from interp_toolkit.heads.repeats import repeated_tokens
from interp_toolkit.text.codecs import CompactVocab, gpt2_encoding


def test_builtin_exams():
    by_name = {e.name: e for e in BUILTIN_EXAMS}
    assert len(BUILTIN_EXAMS) == 2
    assert by_name["ABCXDEF"].prompt == "A B C X D E F A B C X D E F A B C X D E"
    assert by_name["ABCXDEF"].target == " F"
    assert by_name["ABCD"].prompt == "A B C D A B C D A B C D A B C D A B C"
    assert by_name["ABCD"].target == " D"


def _letters_codec(extra: str = "") -> CompactVocab:
    """BOS, the exam letters (with and without a leading space) and ``extra`` words; d_vocab 16."""
    enc = gpt2_encoding()
    words = ["A", " A", " B", " C", " D", " E", " F", " X"] + ([extra] if extra else [])
    ids = [50256] + [enc.encode_ordinary(w)[0] for w in words]
    ids += [i for i in range(100, 200) if i not in ids][: 15 - len(ids)]
    return CompactVocab(ids)


def _model(d_vocab: int, n_ctx: int = 32):
    from interp_toolkit.models.build import ModelConfig, build_model

    return build_model(
        ModelConfig(n_layers=1, d_model=16, n_heads=2, d_head=8, n_ctx=n_ctx, d_vocab=d_vocab)
    )


def test_run_exam_result():
    codec = _letters_codec()
    model = _model(codec.d_vocab)
    exam = BUILTIN_EXAMS[1]
    res = run_exam(model, codec, exam.prompt, exam.target, top_k=5)
    assert res.target_id == codec.encode(" D")[0]
    assert len(res.top) == 5 and res.top[0][1] >= res.top[-1][1]
    assert res.n_tokens == 1 + len(codec.encode(exam.prompt))
    with torch.no_grad():
        ids = torch.tensor([[codec.bos_id] + codec.encode(exam.prompt)])
        logp = model(ids)[0, -1].log_softmax(-1)
    assert res.prob == pytest.approx(float(logp[res.target_id].exp()), rel=1e-5)
    assert res.rank == int((logp > logp[res.target_id]).sum())
    d = res.to_dict()
    assert set(d) >= {"prompt", "target", "target_id", "rank", "prob", "top", "passed"}
    assert d["top"][0]["token_id"] == res.top_ids[0]


def test_exam_errors():
    codec = _letters_codec()
    model = _model(codec.d_vocab, n_ctx=16)
    with pytest.raises(UserError, match="not one"):
        run_exam(model, codec, "A B", " D E")
    with pytest.raises(UserError, match="target ' Z'.*<unk>"):
        run_exam(model, codec, "A B", " Z")
    with pytest.raises(UserError, match="' Q'.*<unk>"):
        run_exam(model, codec, "A B Q", " D")
    with pytest.raises(UserError, match="context is 16"):
        run_exam(model, codec, " ".join(["A"] * 20), " D")


def test_head_impact_matches_a_hand_ablation(tiny_model):
    b = repeated_tokens(4, 6, low=0, high=63, bos_id=0, prefix_max=2, seed=0)
    zero = head_impact(tiny_model, b.tokens, mode="zero")
    mean = head_impact(tiny_model, b.tokens, mode="mean")
    assert zero.shape == mean.shape == (2, 4, b.tokens.shape[1] - 1)
    # one head checked by hand
    with torch.no_grad():
        clean = tiny_model(b.tokens).log_softmax(-1)

        def hook(z, hook):
            z = z.clone()
            z[:, :, 2] = 0
            return z

        ablated = tiny_model.run_with_hooks(
            b.tokens, fwd_hooks=[("blocks.1.attn.hook_z", hook)]
        ).log_softmax(-1)
    nxt = b.tokens[:, 1:, None]
    want = (clean[:, :-1].gather(-1, nxt) - ablated[:, :-1].gather(-1, nxt))[..., 0].mean(0)
    torch.testing.assert_close(zero[1, 2], want, atol=1e-5, rtol=1e-4)
    with pytest.raises(UserError):
        head_impact(tiny_model, b.tokens, mode="nope")


def test_head_impact_on_a_hand_built_induction_circuit():
    """The K-composition circuit of planting.circuits on ``BOS seg seg`` (period 6, no prefix):
    position p predicts token p+1, and induction can only help from the first token of the second
    repeat (p = 7) on."""
    from planting.circuits import k_composition_model

    model = k_composition_model()
    period = 6
    b = repeated_tokens(8, period, low=1, high=32, bos_id=0, prefix_max=0, seed=3)
    zero = head_impact(model, b.tokens, mode="zero")
    first, second = slice(0, period), slice(period + 1, None)
    # the circuit helps in the second repeat ...
    assert bool((zero[0, 0, second] > 0).all()) and bool((zero[1, 0, second] > 0).all())
    # ... and before it 0.0 changes nothing (no key's previous token is the query's token, with
    # or without it), while 1.0 attends uniformly and copies tokens that never come next: it hurts
    assert bool((zero[0, 0, : period + 1] == 0).all()), zero[0, 0]
    assert bool((zero[1, 0, first] < 0).all()), zero[1, 0]
    # 0.1 raises the current token's logit, never the next one's: removing it helps everywhere
    assert bool((zero[0, 1] < 0).all()), zero[0, 1]
    # 1.1 is empty: ablating it changes nothing, whether zeroed or replaced by its (zero) mean
    assert bool((zero[1, 1] == 0).all())
    assert bool((head_impact(model, b.tokens, mode="mean")[1, 1] == 0).all())
