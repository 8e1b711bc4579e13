"""Hugging Face models of many architectures (tests/hf_helpers.py): each loads with its facts, the
hand-set heads of two families are found and no others (near misses rejected), the scores agree
with TransformerLens's own ``detect_head`` as docs/study.md §1.3 states, and every reader of the
circuit graph forks exactly (resampling every edge gives the corrupt run, none the clean one)."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from hf_helpers import ARCHITECTURES, PLANTED_INDUCTION, PLANTED_PREV, build_planted_llama
from transformer_lens.head_detector import (
    detect_head,
    get_duplicate_token_head_detection_pattern,
    get_induction_head_detection_pattern,
)

from interp_toolkit import scores_on
from interp_toolkit.errors import UserError
from interp_toolkit.heads.discovery import discover
from interp_toolkit.models.architecture import architecture_of
from interp_toolkit.runs import hf, hf_checks
from interp_toolkit.runs.targets import load_target
from interp_toolkit.text.codecs import TokenizerCodec

#: What each tiny architecture is (hf_helpers._configs): K/V heads, positions, norm, parallel
#: attention and MLP, a norm after the attention, the smallest sliding window.
FACTS = {
    "gpt2": (4, "learned", "LN", False, False, None),
    "gpt_neox": (4, "rotary", "LN", True, False, None),
    "llama": (2, "rotary", "RMS", False, False, None),
    "mistral": (2, "rotary", "RMS", False, False, 24),
    "qwen2": (1, "rotary", "RMS", False, False, None),
    "gemma2": (2, "rotary", "RMS", False, True, 24),
    "opt": (4, "learned", "LN", False, False, None),
    "gptj": (4, "rotary", "LN", True, False, None),
    "phi": (4, "rotary", "LN", True, False, None),
}
#: Each of B..G twice, 7 apart; A and 0 once: no exact periodic repeat, so scores_on reads it as
#: text: at the queries whose token and the token before it recur together (C..G: the second B
#: follows 0, not A), where its relation to detect_head is exact (docs/study.md §1.3).
TEXT = "A B C D E F G 0 B C D E F G"


def _target(folder):
    return load_target(str(folder), "cpu", for_weights=False)


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_each_architecture_loads_with_its_own_tokenizer_and_facts(arch, arch_dirs):
    tgt = _target(arch_dirs[arch])
    assert tgt.kind == "hf" and isinstance(tgt.codec, TokenizerCodec)
    assert len(tgt.codec.encode(" B")) == 1  # the folder's own (trained) tokenizer
    a = architecture_of(tgt.model)
    n_kv, positional, norm, parallel, post_norm, window = FACTS[arch]
    got = (a.n_kv_heads, a.positional, a.normalization, a.parallel, a.post_attention_norm)
    assert got == (n_kv, positional, norm, parallel, post_norm)
    assert a.smallest_window == window
    notes = " ".join(a.notes("heads", period=12) + a.notes("copying") + a.notes("circuit"))
    assert ("grouped-query" in notes) == (n_kv < 4)
    assert ("sliding-window" in notes) == (window is not None)
    assert ("rotary" in notes) == (positional == "rotary")


@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_known_heads_are_found_and_no_others(family, planted_dirs):
    tgt = _target(planted_dirs[family])
    roles = discover(tgt.model, tgt.codec).report.to_dict()["roles"]
    prev, ind = PLANTED_PREV[family], PLANTED_INDUCTION[family]
    assert roles == {
        "induction": [f"{ind[0]}.{ind[1]}"],
        "previous-token": [f"{prev[0]}.{prev[1]}"],
        "duplicate-token": [],
    }


@pytest.mark.parametrize(
    "variant, head, not_role",
    [
        ({"prev_shift": 2}, "0.0", "previous-token"),  # attends two back
        ({"induction_key": "tok"}, "1.2", "induction"),  # keyed on the token itself
    ],
)
def test_near_misses_get_no_role(variant, head, not_role, tmp_path):
    tgt = _target(build_planted_llama(tmp_path / "m", **variant))
    roles = discover(tgt.model, tgt.codec).report.to_dict()["roles"]
    assert head not in roles[not_role], roles


def _parity(model) -> None:
    """scores_on against detect_head's "mul" score: ours is the mean over the queries we read,
    TL's the sum over its detection pattern divided by every query's attention (n rows)."""
    s = scores_on(model, TEXT)
    tokens = model.to_tokens(TEXT)
    n = tokens.shape[1]
    ids = tokens[0].tolist()
    pairs = list(zip(ids, ids[1:], strict=False))
    read = [q for q in range(1, n) if (ids[q - 1], ids[q]) in pairs[: q - 1]]  # C..G again
    for kind, pattern in (
        ("induction", get_induction_head_detection_pattern),
        ("duplicate_token", get_duplicate_token_head_detection_pattern),
    ):
        # TL's own detection pattern, on the rows scores_on reads
        rows = torch.zeros(n, 1)
        rows[read] = 1
        detection = pattern(tokens.cpu()) * rows
        tl = detect_head(model, TEXT, detection, exclude_bos=False, exclude_current_token=False)
        assert s.queries[kind] == len(read) == 5
        assert torch.allclose(s.get(kind), tl.float() * n / s.queries[kind], atol=1e-5), kind
    # previous-token: TL also reads query 1's key 0 (BOS when there is one); we leave BOS out
    tl = detect_head(
        model, TEXT, "previous_token_head", exclude_bos=False, exclude_current_token=False
    )
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names_filter=lambda x: x.endswith("hook_pattern"))
    bos = bool(tokens[0, 0] == model.tokenizer.bos_token_id) and model.cfg.default_prepend_bos
    for layer in range(model.cfg.n_layers):
        first = cache[f"blocks.{layer}.attn.hook_pattern"][0, :, 1, 0].float()
        want = (tl[layer].float() * n - (first if bos else 0)) / s.queries["previous_token"]
        assert torch.allclose(s.previous_token[layer], want, atol=1e-5), layer


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_scores_agree_with_transformerlens_detect_head(arch, arch_dirs):
    _parity(_target(arch_dirs[arch]).model)


@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_planted_scores_agree_with_detect_head(family, planted_dirs):
    model = _target(planted_dirs[family]).model
    _parity(model)
    prev, ind = PLANTED_PREV[family], PLANTED_INDUCTION[family]
    assert float(scores_on(model, TEXT).induction[ind]) > 0.99
    assert float(scores_on(model, TEXT).previous_token[prev]) > 0.99


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_every_reader_forks_exactly(arch, arch_dirs):
    """Resampling every edge from the corrupt prompts gives the corrupt run, none the clean one:
    each reader's input is rebuilt from the writers (forks, GQA copy, post-attention norm)."""
    from interp_toolkit.causal.attribution import ablated_metric, task_runs
    from interp_toolkit.causal.fork import per_query_kv
    from interp_toolkit.causal.graph import graph_of
    from interp_toolkit.causal.tasks import induction_task

    tgt = _target(arch_dirs[arch])
    model = per_query_kv(tgt.model)
    task = induction_task(tgt.codec, 16, n_prompts=3, seed=0)
    graph = graph_of(model)
    runs = task_runs(model, task)
    differ = float((runs.clean - runs.corrupt).abs().max())
    assert differ > 1e-4
    dropped = ablated_metric(model, task, graph.allowed.clone(), runs)
    kept = ablated_metric(model, task, torch.zeros_like(graph.allowed), runs)
    assert float((dropped - runs.corrupt).abs().max()) < 1e-3 * differ
    assert float((kept - runs.clean).abs().max()) < 1e-3 * differ
    if model is not tgt.model:  # GQA: the copy with one K/V head per query head
        toks = task.clean
        with torch.no_grad():
            assert torch.allclose(model(toks), tgt.model(toks), atol=1e-5)


def test_the_memory_a_load_needs_is_checked_before_booting(planted_dirs, monkeypatch):
    monkeypatch.setattr(hf_checks, "available_memory", lambda device: 2**20)
    monkeypatch.setattr(hf, "_boot", lambda *a, **k: pytest.fail("booted"))
    with pytest.raises(UserError) as exc:
        hf.load(planted_dirs["llama"])
    msg = str(exc.value)
    assert "needs about" in msg and "GiB available" in msg and "--dtype bf16" in msg


def test_bf16_weights_load_and_score(planted_dirs):
    tgt = load_target(str(planted_dirs["llama"]), "cpu", for_weights=False, dtype="bf16")
    assert next(tgt.model.parameters()).dtype == torch.bfloat16
    s = scores_on(tgt, TEXT)
    assert float(s.induction[1, 2]) > 0.95 and float(s.previous_token[0, 0]) > 0.95


def test_a_hub_id_is_read_from_the_cache_offline(planted_dirs, tmp_path, monkeypatch):
    repo = tmp_path / "hf" / "hub" / "models--tiny-org--planted-llama"
    commit = "0" * 40
    shutil.copytree(planted_dirs["llama"], repo / "snapshots" / commit)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    tgt = load_target("tiny-org/planted-llama", "cpu", for_weights=False)
    assert tgt.kind == "hf" and tgt.name == "planted-llama"


def test_heads_cli_on_a_folder_names_the_heads_and_the_facts(planted_dirs, tmp_path):
    from cli_helpers import run_main

    out = tmp_path / "heads.json"
    assert (
        run_main(["heads", str(planted_dirs["llama"]), "--device", "cpu", "--json", str(out)]) == 0
    )
    data = json.loads(out.read_text())
    assert data["roles"]["induction"] == ["1.2"] and data["roles"]["previous-token"] == ["0.0"]
    assert data["architecture"]["n_kv_heads"] == 2
    assert any("grouped-query" in n for n in data["notes"])


@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_the_planted_circuit_is_found_on_both_families(family, planted_dirs):
    """EAP-IG on the induction task: the four edges of the planted circuit (the previous-token
    head's value from the embedding, its write into the induction head's key, the induction
    head's value from the embedding and its write to the logits), and nothing else, recover the
    gap (GQA read through one K/V head per query head)."""
    from interp_toolkit.causal.circuit import discover_circuit
    from interp_toolkit.causal.tasks import induction_task

    tgt = _target(planted_dirs[family])
    task = induction_task(tgt.codec, 24, n_prompts=6, seed=0)
    found = discover_circuit(tgt.model, task, seed=0)
    p, i = (".".join(map(str, PLANTED_PREV[family])), ".".join(map(str, PLANTED_INDUCTION[family])))
    edges = {e.edge.key() for e in found.edges}
    assert edges == {("embed", p, "v"), (p, i, "k"), ("embed", i, "v"), (i, "logits", "logits")}
    assert found.faithfulness is not None and found.faithfulness > 0.95


@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_the_planted_models_pass_the_seeds_exams_through_their_tokenizer(family, planted_dirs):
    from interp_toolkit import exam

    results = exam(_target(planted_dirs[family]))
    assert results and all(r.rank == 0 for r in results), [(r.name, r.rank) for r in results]
