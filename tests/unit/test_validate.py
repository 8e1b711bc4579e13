"""Public API entry points check what they are given (shape, dtype, id range, layer and head
range) and say what is wrong in one UserError line, instead of flattening, casting or a bare
IndexError deep inside the model."""

import pytest
import torch

from interp_toolkit.analysis.ablation import head_impact, induction_after_ablation
from interp_toolkit.analysis.batches import repeated_tokens
from interp_toolkit.analysis.circuits import head_circuit
from interp_toolkit.analysis.heads import HeadId
from interp_toolkit.analysis.patterns import attention_patterns
from interp_toolkit.errors import UserError
from interp_toolkit.reports.attention import attention_view
from interp_toolkit.sampling import sample
from interp_toolkit.tokenizer import EOT_ID, CompactVocab, GPT2Codec


@pytest.fixture
def codec(tiny_cfg):
    return CompactVocab([EOT_ID, *range(1, tiny_cfg.d_vocab - 1)])


@pytest.mark.parametrize(
    "tokens, match",
    [
        (torch.tensor([[1, 2, 3], [4, 5, 6]]), "batch of 2 sequences"),
        (torch.tensor([1.0, 2.0, 3.0]), "integer token ids"),
        ([1, 2, 999], "token id 999 is outside"),
        ([1, -1, 2], "token id -1 is outside"),
        (torch.zeros(1, 1, 3, dtype=torch.long), "shape 1x1x3"),
        ([], "empty"),
        (list(range(1, 40)), "39 tokens but the model's context is 32"),
    ],
)
def test_attention_view_checks_its_tokens(tiny_model, codec, tokens, match):
    with pytest.raises(UserError, match=match):
        attention_view(tiny_model, tokens, codec=codec)


def test_a_batch_of_one_is_one_sequence(tiny_model, codec):
    from interp_toolkit.analysis.patterns import prompt_tokens

    ids = prompt_tokens(codec, torch.tensor([[1, 2, 3]]), n_ctx=32)
    assert ids.tolist() == [1, 2, 3] and ids.dtype == torch.long
    assert set(attention_view(tiny_model, torch.tensor([[1, 2, 3]]), codec=codec)) == {0, 1}


def test_out_of_range_ids_layers_and_heads(tiny_model, codec):
    with pytest.raises(UserError, match="token id 64 is outside"):
        attention_patterns(tiny_model, torch.tensor([1, 64]), [0])
    with pytest.raises(UserError, match="layer 7 does not exist"):
        attention_patterns(tiny_model, torch.tensor([1, 2]), [7])
    with pytest.raises(UserError, match="token id 999 is outside"):
        head_circuit(tiny_model, codec, 0, 0, token_ids=[999])
    with pytest.raises(UserError, match="k=0 cannot work"):
        head_circuit(tiny_model, codec, 0, 0, token_ids=[1], k=0)
    batch = repeated_tokens(4, 5, low=1, high=60, bos_id=0, seed=0)
    with pytest.raises(UserError, match="head 5.0 does not exist"):
        induction_after_ablation(tiny_model, batch, [(5, 0)], mode="mean")
    too_high = repeated_tokens(4, 5, low=1, high=999, bos_id=0, seed=0)
    with pytest.raises(UserError, match="is outside this model's vocabulary"):
        induction_after_ablation(tiny_model, too_high, [(0, 0)])
    with pytest.raises(UserError, match="is outside this model's vocabulary"):
        head_impact(tiny_model, torch.full((2, 4), 64))


def test_a_codec_of_another_model_is_named(tiny_model):
    with pytest.raises(UserError, match="this model's own codec"):
        sample(tiny_model, GPT2Codec(), "hello world", n_tokens=1)


def test_a_missing_head_suggests_one_that_exists():
    with pytest.raises(UserError, match=r"layers 0\.\.0 and heads 0\.\.3 \(write L.H, e.g. 0.0\)"):
        HeadId.parse("1.0").check(1, 4)
