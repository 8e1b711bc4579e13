"""Sparse dictionaries (interp_toolkit/saes): the architectures, the aux-k loss, the
decoder-norm constraint, the files (SAELens's layout, loadable by hand), the planted-feature
known answer, and SAELens's metrics on hand-built SAEs with known values."""

from __future__ import annotations

import json
import math

import pytest
import torch

from interp_toolkit.errors import UserError
from interp_toolkit.saes.config import SAEConfig, SAETrainConfig
from interp_toolkit.saes.sae import SparseAutoencoder, load_sae, save_sae
from interp_toolkit.saes.toy import EncoderRecovery, PlantedFeatures, encoder_recovery, mmcs
from interp_toolkit.saes.train import aux_k_loss, fit_sae


def _sae(arch="topk", d_in=6, d_sae=12, k=2, **kw):
    return SparseAutoencoder(SAEConfig(d_in=d_in, d_sae=d_sae, arch=arch, k=k, **kw), seed=0)


# ------------------------------------------------------------------ architectures


def test_topk_keeps_the_k_largest_pre_activations_then_relu():
    sae = _sae("topk", d_sae=4, k=2)
    pre = torch.tensor([[3.0, -1.0, 2.0, 0.5], [-3.0, -1.0, -2.0, -0.5]])
    f = sae.activate(pre)
    assert f.tolist() == [[3.0, 0.0, 2.0, 0.0], [0.0, 0.0, 0.0, 0.0]]  # negatives kept, then relu


def test_batchtopk_keeps_k_per_row_on_average_in_training_and_a_threshold_after():
    sae = _sae("batchtopk", d_sae=4, k=2)
    pre = torch.tensor([[5.0, 4.0, 3.0, 0.0], [1.0, -1.0, 0.5, 0.2]])
    f = sae.activate(pre, train=True)  # the 4 largest of the batch, whichever rows hold them
    assert f.tolist() == [[5.0, 4.0, 3.0, 0.0], [1.0, 0.0, 0.0, 0.0]]
    sae.threshold.fill_(0.0)
    sae.update_threshold(f, rate=0.5)  # halfway to the smallest kept activation (1.0)
    assert torch.allclose(sae.threshold, torch.full((4,), 0.5, dtype=torch.float64))
    assert sae.activate(pre).tolist() == [[5.0, 4.0, 3.0, 0.0], [1.0, 0.0, 0.0, 0.0]]


def test_relu_sae_is_a_relu():
    assert _sae("relu").activate(torch.tensor([[-1.0, 2.0]])).tolist() == [[0.0, 2.0]]


def test_decoder_rows_stay_unit_norm_and_their_gradient_loses_the_radial_part():
    sae = _sae()
    sae.W_dec.grad = sae.W_dec.detach() * 3.0 + torch.randn_like(sae.W_dec)
    sae.remove_parallel_grad()
    assert (sae.W_dec.grad * sae.W_dec).sum(-1).abs().max() < 1e-5
    with torch.no_grad():
        sae.W_dec.mul_(2.5)
    sae.normalize_decoder()
    assert torch.allclose(sae.W_dec.norm(dim=-1), torch.ones(12))


@pytest.mark.parametrize("arch", ["topk", "batchtopk", "relu"])
def test_folding_the_input_scale_gives_the_same_function_on_raw_inputs(arch):
    sae = _sae(arch, k=3)
    with torch.no_grad():
        sae.b_enc.normal_()
        sae.b_dec.normal_()
        sae.threshold.fill_(0.3)
    x, s = torch.randn(50, 6), 2.7
    want_f, want_x = sae.encode(x * s) / s, sae(x * s) / s
    sae.fold_input_scale(s)
    assert torch.allclose(sae.encode(x), want_f, atol=1e-5)
    assert torch.allclose(sae(x), want_x, atol=1e-5)


# ------------------------------------------------------------------ the aux-k loss


def test_aux_k_loss_reconstructs_the_residual_from_the_top_dead_latents():
    """SAELens's calculate_topk_aux_loss by hand: k_aux = d_in // 2 = 3, scale min(dead/3, 1)."""
    sae = _sae(d_in=6, d_sae=12)
    x, x_hat = torch.randn(4, 6), torch.randn(4, 6)
    pre = torch.randn(4, 12)
    dead = torch.zeros(12, dtype=torch.bool)
    assert aux_k_loss(sae, x, x_hat, pre, dead, 1.0).item() == 0.0
    dead[[1, 4, 7, 9]] = True  # 4 dead: k_aux = 3, scale 1
    want = []
    for row in range(4):
        vals = {i: pre[row, i] for i in (1, 4, 7, 9)}
        top = sorted(vals, key=lambda i: -vals[i])[:3]
        recon = sum(pre[row, i] * sae.W_dec[i] for i in top)
        want.append((recon - (x[row] - x_hat[row])).pow(2).sum())
    got = aux_k_loss(sae, x, x_hat, pre, dead, 0.5)
    assert got.item() == pytest.approx(0.5 * torch.stack(want).mean().item(), rel=1e-5)
    dead[[4, 7, 9]] = False  # 1 dead: k_aux 1, scale 1/3
    one = ((pre[:, 1:2] * sae.W_dec[1]) - (x - x_hat)).pow(2).sum(-1).mean()
    assert aux_k_loss(sae, x, x_hat, pre, dead, 1.0).item() == pytest.approx(one.item() / 3)


# ------------------------------------------------------------------ the known answer


def _merged_pairs(dirs: torch.Tensor) -> torch.Tensor:
    """A wrong dictionary: every latent the normalised sum of two planted features."""
    return dirs[0::2] + dirs[1::2]


@pytest.mark.parametrize("arch,k,l1", [("topk", 4, 0.0), ("batchtopk", 4, 0.0), ("relu", 0, 3.0)])
def test_a_trained_dictionary_recovers_planted_features(arch, k, l1):
    """96 features in 32 dimensions, ~3 on at a time. A dictionary that recovered them scores
    MMCS near 1 (measured: topk 0.994, batchtopk 0.931, relu 0.994); the threshold 0.9 sits above
    what the wrong answers reach: the same dictionary untrained (0.45) and a dictionary of merged
    feature pairs (cos ~ sqrt(1/2): 0.70), both checked, so the test fails if training does not
    find the features (with a third of these samples, topk reaches 0.78: it fails)."""
    toy = PlantedFeatures(samples_per_block=4096)
    cfg = SAEConfig(d_in=toy.d, d_sae=2 * toy.n_features, arch=arch, k=k, hook_name="toy")
    random_sae = SparseAutoencoder(cfg, seed=0)
    untrained = random_sae.W_dec.detach()
    tcfg = SAETrainConfig(tokens=122_880, batch=256, lr=1e-2, l1=l1)  # ~2 s of CPU
    sae = fit_sae(toy.block, cfg, tcfg).sae
    trained = sae.W_dec.detach()
    score = mmcs(toy.directions, trained).item()
    assert score >= 0.9
    assert mmcs(toy.directions, untrained).item() < 0.9
    assert mmcs(toy.directions, _merged_pairs(toy.directions)).item() < 0.9
    # through the encoder, on held-out samples (measured: precision 0.686 / 0.555 / 0.695,
    # recall 0.799 / 0.845 / 0.819; the untrained dictionary 0.353 / 0.066 / 0.066 precision)
    got = encoder_recovery(sae.encode, toy)
    assert _recovers(got), got.summary()
    assert not _recovers(encoder_recovery(random_sae.encode, toy))


#: Through the encoder, a dictionary recovers the planted features when its best latents' mean
#: precision and mean recall on held-out samples reach these (a TopK SAE with k 4 fires 4 latents
#: for ~3 features on, so its precision cannot reach 1: 0.5 leaves room for that, not for chance).
RECOVERY_PRECISION, RECOVERY_RECALL = 0.5, 0.7


def _recovers(r: EncoderRecovery) -> bool:
    return (
        float(r.precision.mean()) >= RECOVERY_PRECISION
        and float(r.recall.mean()) >= RECOVERY_RECALL
    )


def test_encoder_recovery_of_the_features_themselves_is_exact_and_held_out():
    """An encoder that reads the truth (each feature's own indicator) has precision and recall 1;
    one that fires everywhere has recall 1 and precision the feature's rate; the best latent is
    chosen on one held-out block and scored on another, neither a training block."""
    toy = PlantedFeatures(samples_per_block=4096)
    blocks = [toy.heldout(b) for b in (0, 1)]
    for b, (_, x) in enumerate(blocks):
        assert not torch.equal(x, toy.block(b))  # not a training block

    def oracle(x):  # each feature's own indicator: the truth of whichever block x is
        return next(on for on, xb in blocks if torch.equal(x, xb)).float()

    exact = encoder_recovery(oracle, toy)
    assert torch.equal(exact.latent, torch.arange(toy.n_features))
    assert exact.precision.min().item() == 1.0 and exact.recall.min().item() == 1.0
    everywhere = encoder_recovery(lambda x: torch.ones(len(x), 3), toy)
    assert everywhere.recall.min().item() == 1.0
    rate = blocks[1][0].float().mean(0)  # scored on the second block
    assert torch.allclose(everywhere.precision, rate, atol=1e-6)
    assert not _recovers(everywhere)


def test_mmcs_is_one_for_the_features_themselves_and_ignores_scale_and_order():
    dirs = PlantedFeatures().directions
    assert mmcs(dirs, 3 * dirs.flip(0)).item() == pytest.approx(1.0)
    merged = mmcs(dirs, _merged_pairs(dirs)).item()
    assert merged == pytest.approx(math.sqrt(0.5), abs=0.1)


# ------------------------------------------------------------------ files


def test_files_use_saelens_names_and_shapes_and_load_by_hand(tmp_path):
    from safetensors.torch import load_file

    sae = _sae("topk", d_in=6, d_sae=12, k=3, hook_name="blocks.1.attn.hook_z", model_name="m")
    with torch.no_grad():
        sae.b_enc.normal_()
        sae.b_dec.normal_()
    save_sae(tmp_path / "sae", sae)
    cfg = json.loads((tmp_path / "sae" / "cfg.json").read_text())
    assert {k: cfg[k] for k in ("architecture", "d_in", "d_sae", "hook_name", "k")} == {
        "architecture": "topk",
        "d_in": 6,
        "d_sae": 12,
        "hook_name": "blocks.1.attn.hook_z",
        "k": 3,
    }
    assert cfg["reshape_activations"] == "hook_z" and cfg["apply_b_dec_to_input"] is True
    w = load_file(str(tmp_path / "sae" / "sae_weights.safetensors"))
    assert {n: tuple(t.shape) for n, t in w.items()} == {
        "W_enc": (6, 12),
        "b_enc": (12,),
        "W_dec": (12, 6),
        "b_dec": (6,),
    }
    x = torch.randn(20, 6)
    pre = (x - w["b_dec"]) @ w["W_enc"] + w["b_enc"]  # docs/dictionaries.md, "by hand"
    v, i = pre.topk(cfg["k"], dim=-1)
    f = torch.zeros_like(pre).scatter(-1, i, v.relu())
    assert torch.allclose(f @ w["W_dec"] + w["b_dec"], sae(x).detach(), atol=1e-6)
    back = load_sae(tmp_path / "sae")
    assert back.cfg == sae.cfg and torch.allclose(back(x), sae(x))


def test_a_batchtopk_sae_is_saved_as_a_jumprelu_with_its_threshold(tmp_path):
    sae = _sae("batchtopk", k=2)
    sae.threshold.fill_(0.25)
    save_sae(tmp_path / "b", sae)
    cfg = json.loads((tmp_path / "b" / "cfg.json").read_text())
    assert cfg["architecture"] == "jumprelu"
    back = load_sae(tmp_path / "b")
    assert back.cfg.arch == "batchtopk" and torch.allclose(
        back.threshold.float(), torch.full((12,), 0.25)
    )


def test_damaged_or_missing_sae_files_are_one_line_errors(tmp_path):
    with pytest.raises(UserError, match="not an SAE folder"):
        load_sae(tmp_path)
    save_sae(tmp_path / "s", _sae())
    (tmp_path / "s" / "sae_weights.safetensors").write_bytes(b"junk")
    with pytest.raises(UserError, match="damaged"):
        load_sae(tmp_path / "s")
    (tmp_path / "s" / "cfg.json").write_text("{")
    with pytest.raises(UserError, match="damaged"):
        load_sae(tmp_path / "s")


# ------------------------------------------------------------------ training and resume


def test_a_resumed_training_ends_where_an_uninterrupted_one_does(tmp_path):
    from interp_toolkit.saes.config import SAEPaths

    toy = PlantedFeatures(samples_per_block=1024)
    cfg = SAEConfig(d_in=toy.d, d_sae=64, arch="topk", k=4, hook_name="toy")
    tcfg = SAETrainConfig(tokens=16 * 128, batch=128, checkpoint_every=3, batches_per_block=4)
    whole = fit_sae(toy.block, cfg, tcfg).sae
    seen = {"n": 0}

    def flaky(b: int) -> torch.Tensor:  # interrupted when block 2 is first asked for
        if b == 2 and not seen["n"]:
            seen["n"] = 1
            raise KeyboardInterrupt
        return toy.block(b)

    paths = SAEPaths(tmp_path / "s")
    paths.checkpoints.mkdir(parents=True)
    with pytest.raises(KeyboardInterrupt):
        fit_sae(flaky, cfg, tcfg, paths)
    assert json.loads(paths.state.read_text())["step"] == 8  # blocks 0 and 1 done
    again = fit_sae(flaky, cfg, tcfg, paths, resume=True)
    assert again.resumed_from == 8
    for name in ("W_enc", "W_dec", "b_enc", "b_dec"):
        assert torch.equal(getattr(again.sae, name), getattr(whole, name)), name
    other = SAETrainConfig(tokens=16 * 128, batch=128, checkpoint_every=3, lr=0.5)
    with pytest.raises(UserError, match="other settings"):
        fit_sae(toy.block, cfg, other, paths, resume=True)
