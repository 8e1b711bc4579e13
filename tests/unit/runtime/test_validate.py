"""Public API entry points check what they are given (shape, dtype, id range, layer and head
range) and say what is wrong in one UserError line, instead of flattening, casting or a bare
IndexError deep inside the model."""

import pytest
import torch

from interp_toolkit.causal.ablation import head_impact, induction_after_ablation
from interp_toolkit.errors import UserError
from interp_toolkit.heads.patterns import attention_patterns
from interp_toolkit.heads.registry import HeadId
from interp_toolkit.heads.repeats import repeated_tokens
from interp_toolkit.models.sampling import sample
from interp_toolkit.reports.attention import attention_view
from interp_toolkit.text.codecs import EOT_ID, CompactVocab, GPT2Codec
from interp_toolkit.weights.circuits import head_circuit


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
    from interp_toolkit.heads.patterns import prompt_tokens

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


API_PATHS = """
import json, sys
from interp_toolkit import load, train
from interp_toolkit.errors import UserError
out = []
for name, call in [
    ("load(None)", lambda: load(None)),
    ("load(123)", lambda: load(123)),
    ("load('')", lambda: load("")),
    ("train(None)", lambda: train(None)),
    ("train(seed=-5)", lambda: train(sys.argv[1], seed=-5)),
]:
    try:
        call()
        out.append([name, "returned"])
    except UserError as exc:
        out.append([name, "UserError: " + str(exc)])
    except Exception as exc:
        out.append([name, type(exc).__name__ + ": " + str(exc)])
print(json.dumps(out))
"""


def test_api_path_and_seed_arguments_are_one_line(tmp_path):
    """As a user calls them (a plain interpreter: the tests' runtime type checker would answer
    first): a path that is None, a number or '' is a UserError naming the argument (``''`` would
    read the current folder), and ``train(seed=-5)`` is refused before its folder is made."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.run(
        [sys.executable, "-c", API_PATHS, str(tmp_path / "run")],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    got = dict(json.loads(proc.stdout.strip().splitlines()[-1]))
    assert (
        got["load(None)"].startswith("UserError: target must be a path")
        and "NoneType" in got["load(None)"]
    )
    assert (
        got["load(123)"].startswith("UserError: target must be a path")
        and "int 123" in got["load(123)"]
    )
    assert (
        got["load('')"]
        == 'UserError: target is an empty path: name a folder, e.g. target="runs/cpu-2l".'
    )
    assert got["train(None)"].startswith("UserError: out must be a path")
    assert got["train(seed=-5)"].startswith("UserError: seed=-5 cannot work")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"temperature": float("nan")}, "temperature=nan cannot work"),
        ({"temperature": -0.5}, "temperature=-0.5 cannot work"),
        ({"seed": -1}, "seed=-1 cannot work"),
        ({"seed": 2**64}, "a seed is a whole number from 0 to 9223372036854775807"),
        ({"n_tokens": -1}, "n_tokens=-1 cannot work"),
        ({"top_k": 0}, "top_k=0 cannot work"),
    ],
)
def test_sampling_arguments_are_checked(tiny_model, codec, kwargs, match):
    with pytest.raises(UserError, match=match):
        sample(tiny_model, codec, "", **kwargs)


def test_tiny_temperatures_sample_the_argmax(tiny_model, codec):
    """float64 and a shifted max: 1e-300 draws what greedy (0) picks, never a NaN."""
    greedy = sample(tiny_model, codec, "", n_tokens=5, temperature=0.0)
    assert sample(tiny_model, codec, "", n_tokens=5, temperature=1e-300) == greedy
