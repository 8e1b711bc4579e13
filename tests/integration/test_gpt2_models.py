"""GPT-2 loading and head discovery, offline (models from tests/gpt2_helpers.py).

The meaningful test plants a previous-token head (layer 0 head 3): discovery must label exactly
that head previous-token and no other head.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from analysis_helpers import greedy_tokens
from gpt2_helpers import N_CTX, N_HEAD, N_LAYER, PLANTED

from interp_toolkit.heads.discovery import discover
from interp_toolkit.heads.options import DiscoveryOptions
from interp_toolkit.heads.patterns import head_patterns
from interp_toolkit.heads.registry import SCORE_KINDS
from interp_toolkit.runs import hf
from interp_toolkit.text.codecs import GPT2Codec


@pytest.fixture(scope="session")
def planted_model(gpt2_dirs):
    return hf.load(gpt2_dirs["good"])


@pytest.fixture(scope="session")
def planted_discovery(planted_model):
    return discover(planted_model, GPT2Codec(), DiscoveryOptions(n_seqs=16, seed=0))


# ----------------------------------------------------------------------------- loading


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


def test_folder_without_tokenizer_falls_back_to_offline_bpe(gpt2_dirs, planted_model):
    m = hf.load(gpt2_dirs["no_tokenizer"])
    assert len(m.tokenizer) == 50257
    assert m.to_tokens("Hello world").tolist() == [[50256, 15496, 995]]
    toks = torch.tensor([[50256, 1000, 2000, 3000]])
    with torch.no_grad():
        assert torch.allclose(m(toks), planted_model(toks), atol=1e-5)


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
    target = hf.load_hf_target("gpt2")
    assert target.kind == "hf" and target.name == "gpt2"
    assert target.codec.d_vocab == 50257 and target.n_ctx == N_CTX
    assert Path(target.source) == snap


def test_targets_dispatch_to_hf(gpt2_dirs):
    from interp_toolkit.runs.targets import load_target

    target = load_target(str(gpt2_dirs["good"]))
    assert target.kind == "hf" and target.name == "planted"
    assert target.codec.bos_id == 50256


# ----------------------------------------------------------------------------- discovery


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
    assert planted_discovery.labelled["previous-token"] == PLANTED
    assert planted_discovery.top["previous-token"] == PLANTED
    assert planted_discovery.labelled["induction"] is None


def test_discovery_probe_and_view(planted_model, planted_discovery):
    d = planted_discovery
    toks = d.tokens
    assert toks[0] == 50256 and len(toks) <= N_CTX
    assert len(d.str_tokens) == len(toks) and d.str_tokens[0] == "<|endoftext|>"
    heads = d.view_heads()
    assert heads["previous-token"] == PLANTED
    pats = head_patterns(planted_model, toks, [heads["previous-token"], heads["induction"]])
    assert pats.shape == (2, len(toks), len(toks))
    assert torch.allclose(pats.sum(-1), torch.ones(2, len(toks)), atol=1e-4)
    assert pats[0].diagonal(-1)[1:].mean() > 0.9  # dest q attends to q-1
    out = json.loads(json.dumps(d.to_dict()))
    assert out["view"]["previous_token_head"] == "0.3"
    assert out["roles"]["previous-token"] == ["0.3"]
    assert len(out["heads"]) == N_LAYER * N_HEAD


def test_scores_do_not_depend_on_compatibility_mode(gpt2_dirs, planted_discovery):
    """Folding LN / centring weights leaves attention patterns, hence the scores, unchanged."""
    raw = hf.load(gpt2_dirs["good"], compat=False)
    again = discover(raw, GPT2Codec(), DiscoveryOptions(n_seqs=16, seed=0))
    for kind in SCORE_KINDS:
        a, b = planted_discovery.report.scores.get(kind), again.report.scores.get(kind)
        assert torch.allclose(a, b, atol=1e-4), kind
    assert again.report.roles == planted_discovery.report.roles


# ----------------------------------------------------------------------------- CLI


def test_cli_heads_on_a_gpt2_folder(gpt2_dirs, tmp_path, capsys):
    from interp_toolkit.cli import main

    out_json = tmp_path / "heads.json"
    try:
        main(["heads", str(gpt2_dirs["good"]), "--json", str(out_json), "--n-seqs", "16"])
    except SystemExit as exc:
        assert not exc.code, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "0.3" in out and "previous-token" in out
    data = json.loads(out_json.read_text())
    assert data["target"] == "planted"
    assert data["roles"]["previous-token"] == ["0.3"]
    assert data["roles"]["induction"] == [] and data["roles"]["duplicate-token"] == []


def test_cli_heads_fdr_on_a_gpt2_folder(gpt2_dirs, tmp_path, capsys):
    """Benjamini-Hochberg over all 144 tests of a GPT-2-architecture model can return the planted
    role (the draws reach alpha / m); with 99 draws it cannot, and says so."""
    from interp_toolkit.cli import main

    out_json = tmp_path / "heads.json"
    argv = ["heads", str(gpt2_dirs["good"]), "--n-seqs", "16", "--fdr"]
    for extra in (["--json", str(out_json)], ["--n-draws", "99"]):
        try:
            main([*argv, *extra])
        except SystemExit as exc:
            assert not exc.code, capsys.readouterr().err
    out = capsys.readouterr().out
    data = json.loads(out_json.read_text())
    assert data["test"]["n_tests"] == N_LAYER * N_HEAD * len(SCORE_KINDS)
    assert data["test"]["smallest_p"] <= 0.05 / data["test"]["n_tests"]
    assert data["test"]["warnings"] == []
    assert data["roles"] == {"induction": [], "previous-token": ["0.3"], "duplicate-token": []}
    assert "cannot reject fewer than" in out
