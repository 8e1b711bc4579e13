"""The exam (results and bad input) and per-head ablation (tiny models, fast)."""

from __future__ import annotations

import pytest
import torch
from analysis_helpers import make_prev_token_head, tiny_codec

from interp_toolkit.analysis.ablation import head_impact, induction_after_ablation
from interp_toolkit.analysis.batches import repeated_tokens
from interp_toolkit.analysis.exam import BUILTIN_EXAMS, get_exam, run_exam
from interp_toolkit.errors import UserError
from interp_toolkit.tokenizer import CompactVocab, gpt2_encoding


def test_builtin_exams():
    by_name = {e.name: e for e in BUILTIN_EXAMS}
    assert len(BUILTIN_EXAMS) == 2
    assert by_name["ABCXDEF"].prompt == "A B C X D E F A B C X D E F A B C X D E"
    assert by_name["ABCXDEF"].target == " F"
    assert by_name["ABCD"].prompt == "A B C D A B C D A B C D A B C D A B C"
    assert by_name["ABCD"].target == " D"
    assert get_exam("abcd") is by_name["ABCD"]
    with pytest.raises(UserError):
        get_exam("nope")


def _letters_codec(extra: str = "") -> CompactVocab:
    """BOS, the exam letters (with and without a leading space) and ``extra`` words; d_vocab 16."""
    enc = gpt2_encoding()
    words = ["A", " A", " B", " C", " D", " E", " F", " X"] + ([extra] if extra else [])
    ids = [50256] + [enc.encode_ordinary(w)[0] for w in words]
    ids += [i for i in range(100, 200) if i not in ids][: 15 - len(ids)]
    return CompactVocab(ids)


def _model(d_vocab: int, n_ctx: int = 32):
    from interp_toolkit.models import AttnOnlyConfig, build_model

    return build_model(
        AttnOnlyConfig(n_layers=1, d_model=16, n_heads=2, d_head=8, n_ctx=n_ctx, d_vocab=d_vocab)
    )


def test_run_exam_result():
    codec = _letters_codec()
    model = _model(codec.d_vocab)
    exam = BUILTIN_EXAMS[1]
    res = run_exam(model, codec, exam.prompt, exam.target, top_k=5)
    assert res.target_id == codec.encode(" D")[0]
    assert 0 <= res.rank < codec.d_vocab and 0 < res.prob < 1
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


def test_head_impact_shape_and_effect(tiny_model):
    b = repeated_tokens(4, 6, low=0, high=63, bos_id=0, prefix_max=2, seed=0)
    zero = head_impact(tiny_model, b.tokens, mode="zero")
    mean = head_impact(tiny_model, b.tokens, mode="mean")
    assert zero.shape == mean.shape == (2, 4, b.tokens.shape[1] - 1)
    assert zero.abs().max() > 1e-3  # ablating a head changes log-probs
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


def test_ablating_prev_head_removes_its_score(tiny_cfg):
    from interp_toolkit.models import build_model

    model = build_model(tiny_cfg)
    make_prev_token_head(model, 0, 0)
    b = repeated_tokens(4, 6, low=0, high=63, bos_id=0, prefix_max=2, seed=0)
    clean = induction_after_ablation(model, b, [])
    ablated = induction_after_ablation(model, b, [(0, 0)])
    # layer-0 patterns do not depend on layer-0 outputs; layer-1 patterns do
    torch.testing.assert_close(clean.previous_token[0], ablated.previous_token[0])
    assert not torch.allclose(clean.induction[1], ablated.induction[1])
    codec = tiny_codec(64)
    assert codec.bos_id == 0
