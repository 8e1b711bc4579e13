"""GPT-2 loading and head discovery, offline.

Small GPT-2-architecture models are built with ``transformers`` (3 layers x 8 heads, n_embd 64,
the full 50,257-token vocabulary), saved with ``save_pretrained`` plus our offline GPT-2 BPE
tokenizer files, and loaded through the same :func:`interp_toolkit.gpt2.load` path as real GPT-2.

The meaningful test plants a previous-token head: layer 0 head 3 reads sinusoidal positional
embeddings, with its query rotated back by one position, so ``q_i . k_j`` peaks at ``j = i - 1``.
Discovery must label exactly that head previous-token and no other head.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from pathlib import Path

import pytest
import torch
from analysis_helpers import greedy_tokens

from interp_toolkit import gpt2
from interp_toolkit.errors import UserError

N_LAYER, N_HEAD, N_EMBD, N_CTX = 3, 8, 64, 64
PLANTED = (0, 3)
# Four frequencies whose kernel sum_f cos(w_f d) over d in [-1, 63] peaks at d = 0 (value 4) with
# every other value <= 1.93 (found by random search), so the head attends to q - 1 alone.
FREQS = (0.5536, 0.9404, 2.764, 3.0485)
PEAK_SCORE = 20.0  # attention logit at the previous token; the next best key is >= 10 nats lower


def _gpt2_config(**kw):
    from transformers import GPT2Config

    base = dict(n_layer=N_LAYER, n_head=N_HEAD, n_embd=N_EMBD, n_positions=N_CTX, vocab_size=50257)
    base.update(kw)
    return GPT2Config(**base)


def plant_previous_token_head(hf, layer0_head: int) -> None:
    """Make layer 0's ``layer0_head`` attend to the previous token through positions alone.

    Positions: dims [0, dh) of ``wpe`` hold (cos w_f p, sin w_f p) pairs and dims [dh, 2dh) their
    negatives (so LayerNorm's mean is 0); token embeddings are zero there. After ln_1 those dims
    are x / std with a position-independent std. The head's keys copy the pairs; its queries
    rotate each pair back by w_f, so ``q_i . k_j ∝ sum_f cos(w_f (i - 1 - j))``.
    """
    cfg = hf.config
    d, dh = cfg.n_embd, cfg.n_embd // cfg.n_head
    nf = dh // 2
    with torch.no_grad():
        tr = hf.transformer
        p = torch.arange(cfg.n_positions, dtype=torch.float32)[:, None]
        w = torch.tensor(FREQS[:nf])[None, :]
        pos = torch.zeros(cfg.n_positions, d)
        pos[:, 0:dh:2] = torch.cos(p * w)
        pos[:, 1:dh:2] = torch.sin(p * w)
        pos[:, dh : 2 * dh] = -pos[:, 0:dh]
        tr.wpe.weight.copy_(pos)
        tr.wte.weight[:, : 2 * dh] = 0.0
        # ln_1: sum of squares over d dims is 2 * nf = dh, so y = x / sqrt(dh / d).
        inv_var = d / dh
        # score(i, j) = c * inv_var * K(i-1-j) / sqrt(dh); K peaks at nf.
        c = PEAK_SCORE * math.sqrt(dh) / (inv_var * nf)
        attn = tr.h[0].attn.c_attn  # Conv1D: out = x @ weight + bias, weight [d, 3d]
        q0, k0 = layer0_head * dh, d + layer0_head * dh
        attn.weight[:, q0 : q0 + dh] = 0.0
        attn.weight[:, k0 : k0 + dh] = 0.0
        attn.bias[q0 : q0 + dh] = 0.0
        attn.bias[k0 : k0 + dh] = 0.0
        for f in range(nf):
            om, r = FREQS[f], 2 * f
            rot = torch.tensor([[math.cos(om), -math.sin(om)], [math.sin(om), math.cos(om)]])
            attn.weight[r : r + 2, q0 + r : q0 + r + 2] = c * rot
            attn.weight[r : r + 2, k0 + r : k0 + r + 2] = torch.eye(2)


def _copy_model_files(src: Path, dst: Path, files=("config.json", "model.safetensors")) -> Path:
    dst.mkdir(parents=True, exist_ok=True)
    for f in files:
        shutil.copyfile(src / f, dst / f)
    return dst


@pytest.fixture(scope="session")
def gpt2_dirs(tmp_path_factory):
    """Folders built once: the planted model (with tokenizer), and bad variants of it."""
    from transformers import GPT2LMHeadModel
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    root = tmp_path_factory.mktemp("gpt2")
    torch.manual_seed(0)
    hf = GPT2LMHeadModel(_gpt2_config()).eval()
    plant_previous_token_head(hf, PLANTED[1])
    good = root / "planted"
    hf.save_pretrained(good)
    gpt2.save_gpt2_tokenizer(good)

    dirs = {"good": good}
    dirs["no_tokenizer"] = _copy_model_files(good, root / "no_tokenizer")
    dirs["no_weights"] = _copy_model_files(good, root / "no_weights", ("config.json",))
    dirs["no_config"] = _copy_model_files(good, root / "no_config", ("model.safetensors",))
    mism = _copy_model_files(good, root / "mismatched")
    cfg = json.loads((mism / "config.json").read_text())
    cfg["n_embd"] = 128
    (mism / "config.json").write_text(json.dumps(cfg))
    dirs["mismatched"] = mism
    badtok = _copy_model_files(good, root / "bad_tokenizer")
    (badtok / "vocab.json").write_text(json.dumps({"a": 0, "b": 1, "<|endoftext|>": 2}))
    (badtok / "merges.txt").write_text("#version: 0.2\n")
    dirs["bad_tokenizer"] = badtok
    llama = root / "llama"
    llama.mkdir()
    (llama / "config.json").write_text(
        json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"]})
    )
    (llama / "model.safetensors").write_bytes(b"")
    dirs["llama"] = llama
    run = root / "toy_run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"format_version": 1, "model": {}}))
    dirs["toy_run"] = run
    return dirs


@pytest.fixture(scope="session")
def planted_model(gpt2_dirs):
    return gpt2.load(gpt2_dirs["good"])


@pytest.fixture(scope="session")
def planted_discovery(planted_model):
    return gpt2.discover(planted_model, n_seqs=16, n_null=4, seed=0)


def _one_line(exc: pytest.ExceptionInfo) -> str:
    msg = str(exc.value)
    assert "\n" not in msg and msg
    return msg


# ----------------------------------------------------------------------------- specs


def test_is_gpt2_spec(gpt2_dirs, tmp_path):
    for name in ("gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl", "distilgpt2", "GPT2"):
        assert gpt2.is_gpt2_spec(name)
    assert gpt2.is_gpt2_spec("openai-community/gpt2")
    assert gpt2.is_gpt2_spec("gpt-5")  # claimed, so the error names the known sizes
    assert gpt2.is_gpt2_spec(gpt2_dirs["good"])
    assert gpt2.is_gpt2_spec(str(gpt2_dirs["no_tokenizer"]))
    assert gpt2.is_gpt2_spec(gpt2_dirs["no_config"])
    assert gpt2.is_gpt2_spec(gpt2_dirs["llama"])
    assert not gpt2.is_gpt2_spec(gpt2_dirs["toy_run"])  # our run folder: format_version
    assert not gpt2.is_gpt2_spec(tmp_path / "missing_run")
    assert not gpt2.is_gpt2_spec(tmp_path)  # an empty folder is nobody's model


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("name", ["gpt-5", "gpt2-small", "openai-community/gpt3"])
def test_unknown_name_is_one_fast_line(name):
    t0 = time.perf_counter()
    with pytest.raises(UserError) as exc:
        gpt2.load(name)
    assert time.perf_counter() - t0 < 2.0
    msg = _one_line(exc)
    assert "unknown model" in msg and "gpt2-medium" in msg


def test_hub_name_not_cached_is_one_fast_line(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    t0 = time.perf_counter()
    with pytest.raises(UserError) as exc:
        gpt2.load("gpt2")
    assert time.perf_counter() - t0 < 2.0
    msg = _one_line(exc)
    assert "not in the Hugging Face cache" in msg
    assert "HF_HOME" in msg and "save_pretrained" in msg


@pytest.mark.parametrize(
    "which, needle",
    [
        ("no_weights", "no weights"),
        ("no_config", "no config.json"),
        ("mismatched", "do not match its config.json"),
        ("llama", "not a GPT-2-like"),
        ("bad_tokenizer", "tokenizer"),
    ],
)
def test_bad_folders_are_one_line(gpt2_dirs, which, needle):
    with pytest.raises(UserError) as exc:
        gpt2.load(gpt2_dirs[which])
    assert needle in _one_line(exc)


def test_a_file_is_not_a_folder(gpt2_dirs):
    with pytest.raises(UserError) as exc:
        gpt2.load(gpt2_dirs["good"] / "config.json")
    assert "not a model folder" in _one_line(exc)


def test_small_vocab_is_refused(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2", "vocab_size": 100}))
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(UserError) as exc:
        gpt2.load(tmp_path)
    assert "vocab_size=100" in _one_line(exc)


# ----------------------------------------------------------------------------- loading


@pytest.mark.slow
def test_load_folder_with_tokenizer(planted_model):
    m = planted_model
    assert len(m.tokenizer) == 50257
    assert m.to_tokens("Hello world").tolist() == [[50256, 15496, 995]]
    assert (m.cfg.n_layers, m.cfg.n_heads, m.cfg.n_ctx) == (N_LAYER, N_HEAD, N_CTX)
    assert "blocks.0.attn.hook_pattern" in m.hook_dict
    assert not m.training


def test_tl_text_methods_on_a_gpt2_target(planted_model):
    """TL's own text helpers on a GPT-2 target: BOS first, greedy generate, the planted head."""
    from transformer_lens import head_detector

    m = planted_model
    assert m.to_str_tokens("Hello world") == ["<|endoftext|>", "Hello", " world"]
    assert m.to_tokens("Hello world", prepend_bos=False).tolist() == [[15496, 995]]
    prompt = m.to_tokens("Hello world")
    greedy = greedy_tokens(m, prompt, 3)
    kw = dict(max_new_tokens=3, do_sample=False, stop_at_eos=False, verbose=False)
    with torch.no_grad():
        assert m.generate(prompt, use_past_kv_cache=False, **kw).tolist() == greedy.tolist()
    text = "The quick brown fox jumps over the lazy dog, and then it runs far away."
    tl = head_detector.detect_head(m, text, "previous_token_head")
    assert divmod(int(tl.argmax()), N_HEAD) == PLANTED


@pytest.mark.xfail(strict=True, reason="TL 4.3: GPT-2 bridge generate() with its KV cache")
def test_tl_generate_with_kv_cache_on_a_gpt2_target(planted_model):
    """TL 4.3's GPT-2 ``generate`` with ``use_past_kv_cache=True`` (its default) gets the first
    new token right, then departs from greedy decoding by full forward passes (and from HF's own
    ``generate``): pass ``use_past_kv_cache=False``. Remove the mark when TL fixes it."""
    m = planted_model
    prompt = m.to_tokens("Hello world")
    with torch.no_grad():
        out = m.generate(
            prompt, max_new_tokens=3, do_sample=False, stop_at_eos=False, verbose=False
        )
    assert out.tolist() == greedy_tokens(m, prompt, 3).tolist()


@pytest.mark.slow
def test_folder_without_tokenizer_falls_back_to_offline_bpe(gpt2_dirs, planted_model):
    m = gpt2.load(gpt2_dirs["no_tokenizer"])
    assert len(m.tokenizer) == 50257
    assert m.to_tokens("Hello world").tolist() == [[50256, 15496, 995]]
    toks = torch.tensor([[50256, 1000, 2000, 3000]])
    with torch.no_grad():
        assert torch.allclose(m(toks), planted_model(toks), atol=1e-5)


@pytest.mark.slow
def test_hub_name_from_the_hf_cache(gpt2_dirs, tmp_path, monkeypatch):
    """A cached ``gpt2`` (HF cache layout under HF_HOME) loads without touching the network."""
    repo = tmp_path / "hf" / "hub" / "models--openai-community--gpt2"
    commit = "0" * 40
    snap = repo / "snapshots" / commit
    shutil.copytree(gpt2_dirs["good"], snap)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    target = gpt2.load_target("gpt2")
    assert target.kind == "gpt2" and target.name == "gpt2"
    assert target.codec.d_vocab == 50257 and target.n_ctx == N_CTX
    assert Path(target.source) == snap


@pytest.mark.slow
def test_targets_dispatch_to_gpt2(gpt2_dirs):
    from interp_toolkit.targets import load_target

    target = load_target(str(gpt2_dirs["good"]))
    assert target.kind == "gpt2" and target.name == "planted"
    assert target.codec.bos_id == 50256


# ----------------------------------------------------------------------------- discovery


@pytest.mark.slow
def test_planted_previous_token_head_is_found_and_nothing_else(planted_discovery):
    rep = planted_discovery.report
    assert len(rep.roles) == N_LAYER and all(len(r) == N_HEAD for r in rep.roles)
    labelled = {
        (layer, head): role
        for layer, row in enumerate(rep.roles)
        for head, role in enumerate(row)
        if role != "none"
    }
    assert labelled == {PLANTED: "previous-token"}
    assert rep.heads_with_role("previous-token") == [PLANTED]
    prev = rep.scores.previous_token
    assert prev[PLANTED] > 0.9
    others = prev.clone()
    others[PLANTED] = 0
    assert others.max() < 0.2
    assert planted_discovery.prev_head == PLANTED
    assert planted_discovery.top_prev == PLANTED
    assert planted_discovery.induction_head is None


@pytest.mark.slow
def test_discovery_probe_and_view(planted_model, planted_discovery):
    d = planted_discovery
    toks = d.tokens
    assert toks[0] == 50256 and len(toks) <= N_CTX
    assert len(d.str_tokens) == len(toks) and d.str_tokens[0] == "<|endoftext|>"
    heads = d.view_heads()
    assert heads["previous-token"] == PLANTED
    pats = gpt2.attention_patterns(
        planted_model, toks, [heads["previous-token"], heads["induction"]]
    )
    assert pats.shape == (2, len(toks), len(toks))
    assert torch.allclose(pats.sum(-1), torch.ones(2, len(toks)), atol=1e-4)
    assert pats[0].diagonal(-1)[1:].mean() > 0.9  # dest q attends to q-1
    out = json.loads(json.dumps(d.to_dict()))
    assert out["view"]["previous_token_head"] == "0.3"
    assert out["roles"]["previous-token"] == ["0.3"]
    assert len(out["heads"]) == N_LAYER * N_HEAD


@pytest.mark.slow
def test_scores_do_not_depend_on_compatibility_mode(gpt2_dirs, planted_discovery):
    """Folding LN / centring weights leaves attention patterns, hence the scores, unchanged."""
    raw = gpt2.load(gpt2_dirs["good"], compat=False)
    again = gpt2.discover(raw, n_seqs=16, n_null=4, seed=0)
    for kind in ("previous_token", "duplicate_token", "induction", "induction_vw"):
        a, b = planted_discovery.report.scores.get(kind), again.report.scores.get(kind)
        assert torch.allclose(a, b, atol=1e-4), kind
    assert again.report.roles == planted_discovery.report.roles


# ----------------------------------------------------------------------------- CLI


def _cli_available() -> bool:
    try:
        import interp_toolkit.cli  # noqa: F401
        import interp_toolkit.commands.analysis  # noqa: F401
    except ImportError:
        return False
    return True


def _run_cli(capsys, *args: str) -> tuple[int, str, str]:
    """``interp-toolkit ARGS`` in this process (``cli.main``, as the console script runs it)."""
    from interp_toolkit.cli import main

    code = 0
    try:
        main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.skipif(not _cli_available(), reason="the heads command is not wired up yet")
@pytest.mark.parametrize("spec", ["gpt-5", "gpt2"])
def test_cli_bad_name_exits_2_with_one_line(spec, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    code, _, err = _run_cli(capsys, "heads", spec)
    assert code == 2, err
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err


@pytest.mark.slow
@pytest.mark.skipif(not _cli_available(), reason="the heads command is not wired up yet")
def test_cli_heads_on_a_gpt2_folder(gpt2_dirs, tmp_path, capsys):
    out_json = tmp_path / "heads.json"
    code, out, err = _run_cli(
        capsys, "heads", str(gpt2_dirs["good"]), "--json", str(out_json), "--n-seqs", "16"
    )
    assert code == 0, err
    assert "0.3" in out and "previous-token" in out
    out = json.loads(out_json.read_text())
    assert out["target"] == "planted"
    assert out["roles"]["previous-token"] == ["0.3"]
    assert out["roles"]["induction"] == [] and out["roles"]["duplicate-token"] == []
