"""The SAE pipeline on a tiny model: activations through hooks (heads concatenated for hook_z),
SAELens's metrics on hand-built SAEs with known values, per-latent data (head shares, logit
effects), the ``sae`` command and its bad input."""

from __future__ import annotations

import json

import pytest
import torch
from _views_fixtures import assert_offline
from analysis_helpers import tiny_codec
from cli_helpers import run_main

from interp_toolkit.errors import UserError
from interp_toolkit.models.build import ModelConfig, build_model
from interp_toolkit.saes.activations import check_hook, hook_width, read_hook
from interp_toolkit.saes.config import SAEConfig
from interp_toolkit.saes.evaluate import evaluate_sae
from interp_toolkit.saes.features import decoder_out, head_shares
from interp_toolkit.saes.sae import SparseAutoencoder


def _mlp_cfg(**kw):
    base = dict(n_layers=2, d_model=32, n_heads=4, d_head=8, n_ctx=16, d_vocab=64, mlp=True)
    return ModelConfig(**{**base, "d_mlp": 24, "normalization": "LN", **kw})


def _tokens(n=6, seq=16, seed=0):
    return torch.randint(1, 62, (n, seq), generator=torch.Generator().manual_seed(seed))


def test_hook_z_is_read_with_the_heads_concatenated_in_order(tiny_model):
    tokens = _tokens()
    acts = read_hook(tiny_model, tokens, "blocks.1.attn.hook_z")
    _, cache = tiny_model.run_with_cache(tokens, names_filter=["blocks.1.attn.hook_z"])
    z = cache["blocks.1.attn.hook_z"]  # [b, pos, head, d_head]
    assert acts.shape == (6 * 16, 4 * 8) and hook_width(tiny_model, "blocks.1.attn.hook_z") == 32
    for h in range(4):
        assert torch.allclose(acts[:, h * 8 : (h + 1) * 8], z[:, :, h].reshape(-1, 8))


def test_hooks_an_sae_cannot_read_are_one_line_errors(tiny_model):
    for hook, msg in (
        ("blocks.9.hook_resid_pre", "does not exist"),
        ("blocks.0.attn.hook_pattern", "not offered"),
        ("blocks.0.mlp.hook_post", "attention-only"),
    ):
        with pytest.raises(UserError, match=msg):
            check_hook(tiny_model, hook)


def _identity_sae(d: int, hook: str) -> SparseAutoencoder:
    """f = [relu(x), relu(-x)], x_hat = relu(x) - relu(-x) = x: a perfect reconstruction."""
    sae = SparseAutoencoder(SAEConfig(d_in=d, d_sae=2 * d, arch="relu", k=0, hook_name=hook))
    eye = torch.eye(d)
    with torch.no_grad():
        sae.W_enc.copy_(torch.cat([eye, -eye], 1))
        sae.W_dec.copy_(torch.cat([eye, -eye], 0))
        sae.b_enc.zero_()
        sae.b_dec.zero_()
    return sae


@pytest.mark.parametrize("hook", ["blocks.1.attn.hook_z", "blocks.0.hook_resid_post"])
def test_metrics_of_a_perfect_and_of_a_zero_reconstruction(tiny_model, hook):
    tokens = _tokens(8)
    d = hook_width(tiny_model, hook)
    perfect = evaluate_sae(tiny_model, _identity_sae(d, hook), tokens)
    assert perfect.explained_variance == pytest.approx(1.0, abs=1e-6)
    assert perfect.ce_loss_score == pytest.approx(1.0, abs=1e-4)
    assert perfect.kl_div_with_sae == pytest.approx(0.0, abs=1e-6)
    assert perfect.kl_div_with_ablation > 0 and perfect.n_tokens == 8 * 16
    zero = _identity_sae(d, hook)
    with torch.no_grad():
        zero.W_dec.zero_()
    z = evaluate_sae(tiny_model, zero, tokens)  # x_hat = 0: the same run as zero-ablation
    assert z.ce_loss_score == pytest.approx(0.0, abs=1e-5)
    assert z.kl_div_with_sae == pytest.approx(z.kl_div_with_ablation, rel=1e-5)
    assert z.l0 == pytest.approx(perfect.l0)


def test_explained_variance_is_one_minus_mse_over_the_total_variance(tiny_model):
    """An SAE that always outputs the mean explains nothing: FVE 0 (SAELens's formula, not the
    per-token legacy one); density counts tokens a latent fires on."""
    hook = "blocks.0.hook_resid_post"
    tokens = _tokens(8)
    x = read_hook(tiny_model, tokens, hook)
    sae = SparseAutoencoder(SAEConfig(d_in=32, d_sae=4, arch="relu", k=0, hook_name=hook))
    with torch.no_grad():
        sae.W_dec.zero_()
        sae.b_dec.copy_(x.mean(0))
        sae.W_enc.zero_()
        sae.b_enc.copy_(torch.tensor([1.0, -1.0, 1.0, -1.0]))
    m = evaluate_sae(tiny_model, sae, tokens)
    assert m.explained_variance == pytest.approx(0.0, abs=1e-5)
    assert m.feature_density.tolist() == [1.0, 0.0, 1.0, 0.0] and m.dead == 2 and m.dense == 2
    assert m.l0 == pytest.approx(2.0)
    labels, counts = m.histogram()
    assert labels[0] == "dead" and counts[0] == 2 and counts[-1] == 2 and sum(counts) == 4


def _trained_free_sae(d: int, hook: str, seed: int = 3) -> SparseAutoencoder:
    """A random ReLU SAE (imperfect everywhere, so every metric has room to differ by rows)."""
    return SparseAutoencoder(
        SAEConfig(d_in=d, d_sae=4 * d, arch="relu", k=0, hook_name=hook), seed=seed
    )


def test_each_row_family_gets_the_metrics_of_its_rows_alone(tiny_model):
    """Metrics by family equal an evaluation on that family's rows only (an independent run), and
    the pooled ones equal an evaluation without families: per family is not pooled relabelled."""
    hook = "blocks.1.attn.hook_z"
    tokens = _tokens(10, seed=4)
    tokens[:4, 8:] = tokens[:4, :8]  # the first four rows repeat a span: another family
    synthetic = torch.arange(10) < 4
    sae = _trained_free_sae(32, hook)
    got = evaluate_sae(
        tiny_model, sae, tokens, families={"text": ~synthetic, "synthetic": synthetic}
    )
    pooled = evaluate_sae(tiny_model, sae, tokens)
    for name, mask in (("text", ~synthetic), ("synthetic", synthetic)):
        alone, fam = evaluate_sae(tiny_model, sae, tokens[mask]), got.by_family[name]
        assert fam.n_tokens == int(mask.sum()) * 16
        for field in ("l0", "explained_variance", "mse", "ce_loss_with_sae", "kl_div_with_sae"):
            assert getattr(fam, field) == pytest.approx(getattr(alone, field), rel=1e-6), field
        assert fam.ce_loss_score == pytest.approx(alone.ce_loss_score, rel=1e-6)
        assert torch.allclose(fam.feature_density, alone.feature_density)
    for field in ("l0", "explained_variance", "ce_loss_with_sae", "kl_div_with_ablation"):
        assert getattr(got, field) == pytest.approx(getattr(pooled, field), rel=1e-6), field
    a, b = got.by_family["text"], got.by_family["synthetic"]
    assert a.ce_loss_with_sae != pytest.approx(b.ce_loss_with_sae, rel=1e-3)  # families differ
    d = got.evals().to_dict()
    assert set(d["by_family"]) == {"text", "synthetic"}
    assert d["by_family"]["text"]["token_stats"]["total_tokens_eval"] == 6 * 16
    assert "density_histogram" not in d["by_family"]["text"]["latents"]
    assert "by_family" not in pooled.evals().to_dict()
    with pytest.raises(ValueError, match="marks 3 rows"):
        evaluate_sae(tiny_model, sae, tokens, families={"text": torch.ones(3, dtype=torch.bool)})


def test_held_out_families_follow_the_stream_s_rows():
    """In every held-out batch the first n_repeat rows are the synthetic (repeated-span) ones:
    the rows marked synthetic are exactly those the stream drew from its repeat block."""
    from interp_toolkit.saes.activations import TokenSource
    from interp_toolkit.text.stream import TrainStream

    text = torch.randint(100, 200, (50, 16), generator=torch.Generator().manual_seed(1))
    kw = dict(batch_size=4, repeat_fraction=0.75, low=1, high=60, span_min=2, span_max=8)
    held = TrainStream(text, seed=5, **kw)
    src = TokenSource(TrainStream(text, seed=0, **kw), held, "toy", "curriculum", 16)
    fam = src.heldout_families(10)
    assert fam["synthetic"].tolist() == [True, True, True, False] * 2 + [True, True]
    assert torch.equal(fam["text"], ~fam["synthetic"])
    rows = src.heldout_rows(10)
    is_text = [bool((text == r).all(-1).any()) for r in rows]  # a text row is a text window
    assert is_text == fam["text"].tolist()
    none = TokenSource(
        held, TrainStream(text, seed=5, **{**kw, "repeat_fraction": 0.0}), "t", "", 16
    )
    assert list(none.heldout_families(6)) == ["text"]  # one family: natural text


def test_head_shares_and_the_decoder_through_w_o(tiny_model):
    sae = SparseAutoencoder(
        SAEConfig(d_in=32, d_sae=3, arch="topk", k=1, hook_name="blocks.1.attn.hook_z")
    )
    with torch.no_grad():
        sae.W_dec.zero_()
        sae.W_dec[0, 2 * 8 : 3 * 8] = 1.0  # all in head 2
        sae.W_dec[1, 0:8] = 1.0
        sae.W_dec[1, 24:32] = 1.0  # half head 0, half head 3
        sae.W_dec[2, 8] = 1.0
    shares = head_shares(sae, 4)
    assert shares[0].tolist() == [0.0, 0.0, 1.0, 0.0]
    assert shares[1].tolist() == pytest.approx([0.5, 0.0, 0.0, 0.5])
    w_o = tiny_model.blocks[1].attn.W_O.detach()  # [head, d_head, d_model]
    out = decoder_out(tiny_model, sae)
    assert torch.allclose(out[0], w_o[2].sum(0), atol=1e-6)
    assert torch.allclose(out[2], w_o[1, 0], atol=1e-6)


@pytest.fixture
def text_mlp_run(tmp_path, monkeypatch):
    from interp_toolkit.runs.folder import save_run

    monkeypatch.setenv("INTERP_TOOLKIT_CACHE", str(tmp_path / "cache"))
    text = tmp_path / "corpus.txt"
    text.write_text("".join(f"{chr(97 + i % 26)}{i % 7} = [{i}, {i * 3}]\n" for i in range(3000)))
    settings = {"data": {"corpus": str(text), "val_fraction": 0.2, "repeat_fraction": 0.5}}
    cfg = _mlp_cfg()
    return save_run(tmp_path / "run", build_model(cfg), tiny_codec(64), cfg, settings)


def test_the_sae_command_trains_evaluates_and_writes_saelens_files_and_pages(
    text_mlp_run, tmp_path, capsys
):
    out, js = tmp_path / "sae", tmp_path / "m.json"
    argv = ["sae", str(text_mlp_run), "--hook", "blocks.1.attn.hook_z", "--tokens", "4096"]
    argv += ["--expansion", "2", "--k", "4", "--quiet", "--out", str(out)]
    assert run_main([*argv, "--json", str(js)]) == 0
    printed = capsys.readouterr().out
    for label in ("L0", "explained variance", "CE loss recovered", "dead latents"):
        assert label in printed
    assert "text rows" in printed and "synthetic rows" in printed and "shuffled" in printed
    data = json.loads(js.read_text())
    assert data["evals"]["sparsity"]["l0"] == pytest.approx(4.0)
    fam = data["evals"]["by_family"]
    assert set(fam) == {"text", "synthetic"}  # the run's mix is half synthetic
    n = {f: fam[f]["token_stats"]["total_tokens_eval"] for f in fam}
    assert n["text"] + n["synthetic"] == data["evals"]["token_stats"]["total_tokens_eval"]
    assert set(data["monosemantic_shuffled"]) >= {"units", "dead", "monosemantic"}
    assert data["training"]["tokens"] == 4096 and data["setting"] == "curriculum"
    cfg = json.loads((out / "cfg.json").read_text())
    assert (cfg["d_in"], cfg["d_sae"], cfg["architecture"]) == (32, 64, "topk")
    for name in ("sae_weights.safetensors", "sparsity.safetensors", "evals.json", "features.json"):
        assert (out / name).is_file(), name
    feats = json.loads((out / "features.json").read_text())
    assert len(feats["latents"]) == 64 and len(feats["latents"][0]["head_share"]) == 4
    assert all(d["description"] for d in feats["latents"])
    index, pages = (out / "index.html").read_text(), (out / "features.html").read_text()
    assert "Feature density" in index and "monosemantic" in index
    assert "text rows" in index and "synthetic rows" in index and "Shuffled-activation" in index
    assert_offline(index)
    assert_offline(pages)
    assert pages.count("CircuitsVis.render(") == 1
    assert run_main(argv) == 2  # the folder holds an SAE: --resume or another --out
    assert "--resume" in capsys.readouterr().err
    assert run_main([*argv, "--resume"]) == 0  # finished: resumes at the end, re-evaluates


def test_an_sae_folder_read_back_gives_the_same_page_and_printout(text_mlp_run, tmp_path):
    """evals.json and features.json of a folder, read back as typed records, draw the page and
    the table the run drew (the views take records, not dicts); a changed latent does not."""
    import io
    import re

    from rich.console import Console

    from interp_toolkit.reports.features import FeatureReport, index_page, write_pages
    from interp_toolkit.reports.terminal_units import sae_view
    from interp_toolkit.runs.folder import load_run
    from interp_toolkit.saes.evaluate import SAEEvals
    from interp_toolkit.saes.options import SAEOptions
    from interp_toolkit.saes.pipeline import run_sae

    run, hook = load_run(text_mlp_run, device="cpu"), "blocks.1.attn.hook_z"
    opts = SAEOptions(hook, expansion=2, k=4, tokens=2048, quiet=True)
    result = run_sae(run.model, run.codec, run, tmp_path / "s", opts)
    report = write_pages(result, run.model, run.codec, title="t")
    evals = json.loads(result.paths.evals.read_text())
    features = json.loads(result.paths.features.read_text())
    back = FeatureReport.from_dict(features)
    assert SAEEvals.from_dict(evals) == report.evals == back.evals and back.heads == report.heads
    assert back.to_dict()["evals"] == evals == report.to_dict()["evals"]

    def page(r):  # plotly names its div at random
        return re.sub(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", "", index_page(r, title="t"))

    def printed(r):
        out = Console(file=io.StringIO(), width=100)
        out.print(
            *sae_view("run", hook, "curriculum", r.evals, r.monosemantic, r.monosemantic_shuffled)
        )
        return out.file.getvalue()

    assert page(back) == page(report) and "synthetic rows" in page(back)
    assert printed(back) == printed(report) and "synthetic rows" in printed(back)
    live = next(i for i, d in enumerate(features["latents"]) if not d["dead"])
    features["latents"][live]["description"] = "planted"
    assert page(FeatureReport.from_dict(features)) != page(report)


@pytest.mark.parametrize(
    "extra,msg",
    [
        (["--hook", "blocks.0.attn.hook_q"], "not offered"),
        (["--hook", "blocks.0.hook_resid_pre", "--arch", "gated"], "not offered"),
        (["--hook", "blocks.0.hook_resid_pre", "--k", "0"], "--k 0"),
        (["--hook", "nothing"], "not a block hook"),
    ],
)
def test_bad_sae_options_are_one_line_errors(text_mlp_run, tmp_path, capsys, extra, msg):
    assert run_main(["sae", str(text_mlp_run), *extra, "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert msg in err and "Traceback" not in err
    assert not (tmp_path / "s" / "cfg.json").exists()


def test_a_gpt2_sae_needs_an_out_folder_before_anything_loads(capsys, monkeypatch, tmp_path):
    """With the hub cache holding nothing and no network, the uncached name is refused first
    (before any import: tests/unit/cli/test_cli_help.py); a GPT-2 folder gets the --out line."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert run_main(["sae", "gpt2", "--hook", "blocks.0.hook_resid_pre"]) == 2
    assert "not in the Hugging Face cache" in capsys.readouterr().err
    folder = tmp_path / "gpt2-local"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "gpt2"}')
    assert run_main(["sae", str(folder), "--hook", "blocks.0.hook_resid_pre"]) == 2
    assert "--out FOLDER" in capsys.readouterr().err


def _sae_argv(run, out, *more):
    return ["sae", str(run), "--hook", "blocks.1.attn.hook_z", "--tokens", "4096",
            "--expansion", "2", "--k", "4", "--quiet", "--out", str(out), *more]  # fmt: skip


def test_a_second_sae_in_a_folder_being_trained_is_named_as_such(text_mlp_run, tmp_path, capsys):
    """A second `sae --out D` while the first trained said "already holds an SAE: continue it
    with --resume" (the first's checkpoint): the lock is taken first, so it names the other
    process."""
    from cli_helpers import run_cli

    from interp_toolkit.files.io import folder_lock

    out = tmp_path / "sae"
    out.mkdir()
    (out / "checkpoints").mkdir()
    (out / "checkpoints" / "state.json").write_text("{}")  # the first one's checkpoint
    with folder_lock(out, "SAE folder"):
        run_cli(capsys, *_sae_argv(text_mlp_run, out)).one_line_error("in use by another process")


def test_an_sae_past_this_machines_memory_is_refused_leaving_no_folder(
    text_mlp_run, tmp_path, capsys
):
    """`sae --expansion 100000000` ran out of memory half-way and left D/checkpoints/; now the
    memory it needs is estimated first (8 float32 copies of d_in x d_sae) and said."""
    from cli_helpers import run_cli

    out = tmp_path / "sae"
    argv = _sae_argv(text_mlp_run, out, "--expansion", "100000000")
    argv.remove("2")  # the first --expansion's value
    argv.remove("--expansion")
    err = run_cli(capsys, *argv).one_line_error("GiB (its encoder and decoder")
    assert "use a smaller --expansion" in err and not out.exists()


#: evals.json of the SAEMetrics below, as the hand-written ``to_dict`` wrote it (kept byte for
#: byte when it became a declared record): SAELens's groups and key order, 6 digits, the
#: histogram on the pooled rows only, NaN where the ablation changes nothing.
EVALS_JSON = (
    '{"model_behavior_preservation": {"kl_div_score": 0.8, "kl_div_with_ablation": 1.0, '
    '"kl_div_with_sae": 0.2}, "model_performance_preservation": {"ce_loss_score": 0.75, '
    '"ce_loss_with_ablation": 3.0, "ce_loss_with_sae": 1.5, "ce_loss_without_sae": 1.0}, '
    '"reconstruction_quality": {"explained_variance": 0.5, "mse": 0.1}, "sparsity": {"l0": '
    '2.123457}, "latents": {"d_sae": 5, "dead": 1, "dense": 2, "dense_threshold": 0.1, '
    '"density_histogram": {"log10_density": ["dead", "< -6", "-6..-5.5", "-5.5..-5", '
    '"-5..-4.5", "-4.5..-4", "-4..-3.5", "-3.5..-3", "-3..-2.5", "-2.5..-2", "-2..-1.5", '
    '"-1.5..-1", "-1..-0.5", "-0.5..0"], "latents": [1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, '
    '2]}}, "token_stats": {"total_tokens_eval": 96}, "by_family": {"text": '
    '{"model_behavior_preservation": {"kl_div_score": NaN, "kl_div_with_ablation": 0.0, '
    '"kl_div_with_sae": 0.0}, "model_performance_preservation": {"ce_loss_score": 0.0, '
    '"ce_loss_with_ablation": 2.0, "ce_loss_with_sae": 2.0, "ce_loss_without_sae": 1.0}, '
    '"reconstruction_quality": {"explained_variance": -0.25, "mse": 0.3}, "sparsity": {"l0": '
    '1.0}, "latents": {"d_sae": 5, "dead": 2, "dense": 3, "dense_threshold": 0.1}, '
    '"token_stats": {"total_tokens_eval": 32}}}}'
)


def test_metrics_and_training_write_saelens_groups_and_how_training_went():
    """evals.json exactly (a group, a key's place or its rounding changed fails), read back to
    the same record; how training went."""
    from interp_toolkit.saes.evaluate import SAEEvals, SAEMetrics
    from interp_toolkit.saes.train import TrainedSAE

    density = torch.tensor([0, 1e-7, 0.05, 0.5, 1.0])
    metrics = SAEMetrics(96, 2.123456789, 0.5, 0.1000004, 1.0, 1.5, 3.0, 0.2, 1.0, density)
    text = SAEMetrics(
        32, 1.0, -0.25, 0.3, 1.0, 2.0, 2.0, 0.0, 0.0, torch.tensor([0, 0, 0.5, 0.5, 1])
    )
    metrics.by_family["text"] = text
    evals = metrics.evals()
    assert json.dumps(evals.to_dict()) == EVALS_JSON
    assert (evals.ce_loss_score, evals.kl_div_score, evals.l0) == (0.75, 0.8, 2.123457)
    back = SAEEvals.from_dict(json.loads(EVALS_JSON))
    assert json.dumps(back.to_dict()) == EVALS_JSON and back.by_family["text"].dead == 2
    assert "by_family" not in json.loads(json.dumps(text.evals().to_dict()))  # not split
    sae = SparseAutoencoder(SAEConfig(d_in=4, d_sae=8, arch="relu", k=0, hook_name="h"))
    trained = TrainedSAE(sae, None, 3, 96, 1.23456, 2.0, 7, None, {"loss": 1.0})
    assert trained.to_dict() == {"tokens": 96, "steps": 3, "seconds": 1.23, "resumed_from": None}
