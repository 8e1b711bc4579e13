"""Linear probes (probing/probes.py, lda.py, probe_data.py) on tiny hand-built models, and the
``probe`` command on a tiny run folder."""

from __future__ import annotations

import json

import pytest
import torch
from analysis_helpers import make_prev_token_head, tiny_codec
from cli_helpers import run_main

from interp_toolkit.files.serialize import from_json, to_json
from interp_toolkit.models.build import ModelConfig, build_model
from interp_toolkit.probing import probes
from interp_toolkit.probing.data import feature_inputs, varied_repeats
from interp_toolkit.probing.lda import balanced_accuracy, fit_probe, interval, ledoit_wolf


def _mlp_cfg(**kw):
    base = dict(n_layers=2, d_model=32, n_heads=4, d_head=8, n_ctx=16, d_vocab=64)
    return ModelConfig(**{**base, "mlp": True, "d_mlp": 16, "normalization": "LN", **kw})


def _random_rows(n, seq, vocab, seed=0):
    return torch.randint(0, vocab, (n, seq), generator=torch.Generator().manual_seed(seed))


def test_feature_labels_on_text_rows():
    t = torch.tensor([[5, 6, 7, 8]])
    assert probes.feature_labels("token", t).tolist() == [[5, 6, 7, 8]]
    assert probes.feature_labels("prev_token", t).tolist() == [[-1, 5, 6, 7]]
    assert probes.feature_labels("prev2_token", t).tolist() == [[-1, -1, 5, 6]]
    assert probes.feature_labels("position", t).tolist() == [[0, 1, 2, 3]]
    with pytest.raises(probes.UserError, match="repeated-token rows"):
        probes.feature_labels("in_repeat", t)
    with pytest.raises(probes.UserError, match="unknown feature"):
        probes.feature_labels("colour", t)


def test_in_repeat_marks_exactly_the_tokens_seen_before_in_the_row():
    reps = varied_repeats(tiny_codec(64), seq_len=16, n_seqs=20, seed=3)
    labels = probes.feature_labels("in_repeat", reps.tokens, reps)
    assert set(reps.periods.tolist()) == set(range(2, 8))  # cycles 2..(16-1)//2
    for row, lab in zip(reps.tokens.tolist(), labels.tolist(), strict=True):
        seen_before = [int(tok in row[1:p]) for p, tok in enumerate(row)]  # BOS not counted
        assert lab[0] == -1 and lab[1:] == seen_before[1:]
        assert 2 <= sum(lab[1:]) <= 7


def test_boundaries_of_attention_only_and_mlp_models(tiny_model):
    got = [(b.name, b.hook, b.depth) for b in probes.boundaries(tiny_model)]
    assert got == [
        ("embed", "blocks.0.hook_resid_pre", 0.0),
        ("attn 0", "blocks.0.hook_resid_post", 1.0),
        ("attn 1", "blocks.1.hook_resid_post", 2.0),
    ]
    mlp = build_model(_mlp_cfg())
    assert [(b.name, b.hook, b.depth) for b in probes.boundaries(mlp)][1:3] == [
        ("attn 0", "blocks.0.hook_resid_mid", 0.5),
        ("mlp 0", "blocks.0.hook_resid_post", 1.0),
    ]


def test_stream_at_reads_the_masked_positions_of_every_boundary():
    model = build_model(_mlp_cfg())
    tokens = _random_rows(5, 16, 64)
    mask = torch.rand(5, 16, generator=torch.Generator().manual_seed(1)) > 0.5
    got = probes.stream_at(model, tokens, mask)
    names = [b.hook for b in probes.boundaries(model)]
    _, cache = model.run_with_cache(tokens, names_filter=names)
    for i, name in enumerate(names):
        torch.testing.assert_close(got[i], cache[name][mask])


def test_lda_separates_separable_classes_and_not_noise():
    gen = torch.Generator().manual_seed(0)
    means = torch.randn(5, 8, generator=gen) * 4
    y = torch.arange(500) % 5
    x = means[y] + torch.randn(500, 8, generator=gen)
    probe = fit_probe(x[:400], y[:400])
    assert bool((probe.predict(x[400:]) == y[400:]).all())
    noise = fit_probe(torch.randn(400, 8, generator=gen), y[:400])
    right = noise.predict(torch.randn(100, 8, generator=gen)) == y[400:]
    assert float(right.double().mean()) < 0.4


def test_ledoit_wolf_matches_its_definition():
    x = torch.randn(60, 5, generator=torch.Generator().manual_seed(2)).double()
    x = x - x.mean(0)
    s = x.T @ x / 60
    mu = s.trace() / 5
    delta = ((s - mu * torch.eye(5, dtype=s.dtype)) ** 2).sum() / 5
    beta = sum(((xi[:, None] * xi[None, :] - s) ** 2).sum() for xi in x) / 60**2 / 5
    assert ledoit_wolf(x) == pytest.approx(float(min(beta, delta) / delta), rel=1e-9)


def test_control_labels_are_a_function_of_the_features_input():
    """prev_token's control label at p is g(t[p-1]) (Hewitt & Liang: the input the property
    depends on), not g(t[p]); position's is g(p)."""
    tokens = _random_rows(30, 8, 10, seed=4)
    labels = probes.feature_labels("prev_token", tokens)
    train, _ = probes.split_rows(30, 0.2, seed=0)
    inputs = feature_inputs("prev_token", tokens)
    control = probes.control_labels(inputs, labels, train, 10, seed=0)
    assert (control[:, 0] == -1).all()
    pool = set(labels[labels >= 0].tolist())  # the task's labels
    by_prev = [set(control[:, 1:][tokens[:, :-1] == v].tolist()) for v in range(10)]
    assert all(len(vals) == 1 and vals <= pool for vals in by_prev)
    by_current = [set(control[:, 1:][tokens[:, 1:] == v].tolist()) for v in range(10)]
    assert any(len(vals) > 1 for vals in by_current)  # the current token does not decide it
    assert feature_inputs("position", tokens)[3].tolist() == list(range(8))
    assert feature_inputs("in_repeat", tokens).tolist() == tokens.tolist()


def test_balanced_accuracy_by_hand():
    # labels 0 (3 positions, 2 right) and 1 (1 position, right): (2/3 + 1) / 2
    y, pred = torch.tensor([0, 0, 0, 1]), torch.tensor([0, 0, 1, 1])
    rows = torch.tensor([0, 0, 1, 1])
    # the sample, then resamples: row 0 twice (label 0 2/2 right, label 1 absent -> 1.0), row 1
    # twice (0/1 and 1/1 -> 0.5), each row once (the sample again)
    weights = torch.tensor([[1, 1], [2, 0], [0, 2], [1, 1]], dtype=torch.float64)
    got = balanced_accuracy(pred, y, rows, weights)
    assert got.tolist() == pytest.approx([(2 / 3 + 1) / 2, 1.0, 0.5, (2 / 3 + 1) / 2])
    lo, hi = interval(got)
    assert lo <= float(got[0]) <= hi


def test_the_prev_token_control_is_not_readable_from_the_current_token():
    """At the embedding (which holds only the token at p and its position) the previous token is
    unreadable on random tokens, and so is its control g(t[p-1]): both at chance. A control built
    from the current token, g(t[p]), would be read off the embedding almost perfectly."""
    cfg = ModelConfig(n_layers=1, d_model=32, n_heads=2, d_head=16, n_ctx=16, d_vocab=16)
    res = probes.probe_layers(build_model(cfg), _random_rows(200, 16, 16), "prev_token")
    embed = res.row("embed")
    assert embed.control_ci[0] < 3 * embed.chance and embed.balanced_ci[0] < 3 * embed.chance
    token = probes.probe_layers(build_model(cfg), _random_rows(200, 16, 16), "token").row("embed")
    assert token.control > 0.5  # g(t[p]): readable from the embedding


def test_prev_token_is_read_off_a_planted_previous_token_head_and_ablation_removes_it():
    cfg = ModelConfig(n_layers=2, d_model=32, n_heads=2, d_head=16, n_ctx=16, d_vocab=16)
    tokens = _random_rows(200, 16, 16)
    plain = build_model(cfg)
    planted = build_model(cfg)
    make_prev_token_head(planted, 0, 0)
    res = probes.probe_layers(planted, tokens, "prev_token", untrained=plain)
    emb, att = res.row("embed"), res.row("attn 0")
    assert emb.balanced_ci[0] < 3 * emb.chance  # random tokens: the embedding knows nothing
    assert att.balanced > 0.9 and att.balanced_ci[0] > att.untrained_ci[1]
    assert probes.beyond_untrained(att) and not probes.beyond_untrained(emb)
    ablated = probes.probe_layers(planted, tokens, "prev_token", ablate=[(0, 0)], untrained=res)
    assert ablated.ablated == ["0.0"] and ablated.row("attn 0").balanced < 0.3
    assert ablated.row("attn 0").untrained_ci == att.untrained_ci  # reused, not recomputed
    other = probes.probe_layers(planted, tokens, "prev_token", ablate=[(0, 1)])
    assert other.row("attn 0").balanced > 0.9 and other.row("attn 0").untrained is None
    assert not probes.beyond_untrained(other.row("attn 0"))  # no baseline, no claim
    assert probes.probe_layers(plain, tokens, "prev_token").row("attn 0").balanced < 0.5
    again = probes.probe_layers(planted, tokens, "prev_token", untrained=plain)
    assert again.to_dict() == res.to_dict()


def test_in_repeat_probe_runs_on_an_mlp_model():
    cfg = _mlp_cfg()
    res = probes.probe(build_model(cfg), tiny_codec(64), "in_repeat", n_seqs=40, model_cfg=cfg)
    assert [r.boundary for r in res.rows] == ["embed", "attn 0", "mlp 0", "attn 1", "mlp 1"]
    assert res.data.source == "repeats" and res.rows[0].n_train + res.rows[0].n_test == 600
    assert {r.n_classes for r in res.rows} == {2} and {r.chance for r in res.rows} == {0.5}
    assert all(r.untrained is not None for r in res.rows) and res.data.untrained_seed


@pytest.fixture
def text_run(tmp_path, monkeypatch, tiny_cfg, tiny_model):
    from interp_toolkit.runs.folder import save_run

    monkeypatch.setenv("INTERP_TOOLKIT_CACHE", str(tmp_path / "cache"))
    text = tmp_path / "corpus.txt"
    text.write_text("".join(f"{chr(97 + i % 26)}{i % 7} = [{i}, {i * 3}]\n" for i in range(3000)))
    settings = {"data": {"corpus": str(text), "val_fraction": 0.2}}
    return save_run(tmp_path / "run", tiny_model, tiny_codec(tiny_cfg.d_vocab), tiny_cfg, settings)


def test_probe_command_writes_json_csv_and_page(text_run, tmp_path, capsys):
    out, csv_out, page = tmp_path / "p.json", tmp_path / "p.csv", tmp_path / "p.html"
    argv = ["probe", str(text_run), "--feature", "position", "--n-seqs", "24", "--json", str(out)]
    assert run_main([*argv, "--csv", str(csv_out), "--out", str(page)]) == 0
    data = json.loads(out.read_text())
    assert data["data"]["corpus"].endswith("corpus.txt") and data["data"]["split"] == "held-out"
    assert [r["boundary"] for r in data["rows"]] == ["embed", "attn 0", "attn 1"]
    first = data["rows"][0]
    assert first["accuracy"] == first["balanced"] == 1.0  # W_pos makes every position distinct
    assert first["balanced_ci"] == [1.0, 1.0] and first["untrained"] is not None
    assert data["input"] == "the position p" and "g(its input)" in data["control"]
    lines = csv_out.read_text().splitlines()
    assert len(lines) == 4 and "balanced_lo" in lines[0] and "untrained_hi" in lines[0]
    out = capsys.readouterr().out
    assert "plotly" in page.read_text() and "selectivity" in out and "Untrained:" in out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--feature", "colour"], "unknown feature"),
        (["--feature", "in_repeat", "--data", "text"], "needs repeated-token rows"),
        (["--feature", "token", "--ablate", "7.0"], "does not exist"),
        (["--feature", "token", "--data", "poems"], "--data"),
    ],
)
def test_probe_command_bad_input_is_one_line(text_run, tmp_path, capsys, extra, message):
    out = tmp_path / "p.json"
    assert run_main(["probe", str(text_run), *extra, "--json", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_too_few_held_out_rows_for_an_interval_is_one_line(text_run, capsys):
    """``probe --feature position --n-seqs 2 --seq-len 8`` gave [1.000, 1.000] and "decodable"
    from one held-out row (every bootstrap resample was that row)."""
    from cli_helpers import run_cli

    argv = ["probe", text_run, "--feature", "position", "--n-seqs", "2", "--seq-len", "8"]
    err = run_cli(capsys, *argv).one_line_error("2 rows hold out 1 for testing")
    assert "give 25 rows or more (--n-seqs)" in err


def test_what_a_probe_ran_on_is_written_as_before_its_untrained_seed_null_or_absent():
    """ProbeData's JSON key for key as the hand-built dict was: the untrained seed is null where
    no untrained model could be built, absent where none was asked for (numbers reused)."""
    head = '{"n_rows": 40, "seq_len": 9, "test_fraction": 0.2, "seed": 3, "n_boot": 1000, '
    text = dict(source="text", corpus="/c.txt", split="held-out")
    cases = {
        '"source": "text", "corpus": "/c.txt", "split": "held-out", "untrained_seed": null}': {
            **text,
            "untrained_seed": probes.Untrained.NOT_REBUILT,
        },
        '"source": "repeats", "layout": "L", "untrained_seed": 0}': dict(
            source="repeats", layout="L", untrained_seed=0
        ),
        '"source": "text", "corpus": "/c.txt", "split": "held-out"}': text,
    }
    for tail, fields in cases.items():
        data = probes.ProbeData(40, 9, 0.2, 3, 1000, **fields)
        assert json.dumps(to_json(data)) == head + tail
        assert from_json(probes.ProbeData, json.loads(head + tail)) == data
