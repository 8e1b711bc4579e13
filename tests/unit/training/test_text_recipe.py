"""The natural-text recipes: the ``text`` preset (bytes), the ``text-bpe`` preset, and
``train --repeat-fraction``."""

import pytest

from interp_toolkit.cli import main


def run_cli(capsys, *args):
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    return exc.value.code, capsys.readouterr().err.strip()


@pytest.mark.parametrize("value", ["1.5", "-0.1", "nan"])
def test_a_repeat_fraction_outside_0_1_is_one_line_and_exit_2(capsys, tmp_path, value):
    out = tmp_path / "run"
    code, err = run_cli(capsys, "train", "--out", str(out), "--quiet", "--repeat-fraction", value)
    assert code == 2, err
    assert len(err.splitlines()) == 1 and err.startswith("error: ")
    assert f"--repeat-fraction {float(value)}" in err and "from 0" in err, err
    assert not out.exists()


def test_the_repeat_fraction_reaches_the_data_config(monkeypatch, tmp_path):
    import interp_toolkit.training as training

    seen = {}

    def fake_train_model(out, model_cfg, data_cfg, train_cfg, **kwargs):
        seen["data"] = data_cfg
        raise SystemExit(0)

    monkeypatch.setattr(training, "train_model", fake_train_model)
    with pytest.raises(SystemExit):
        main(["train", "--out", str(tmp_path / "r"), "--quiet", "--repeat-fraction", "0.25"])
    assert seen["data"].repeat_fraction == 0.25
    with pytest.raises(SystemExit):
        main(["train", "--out", str(tmp_path / "r"), "--quiet"])  # the cpu preset's own
    assert seen["data"].repeat_fraction == 0.9


@pytest.mark.parametrize("layers", [1, 2, 3, 8])
def test_the_text_preset_is_plain_text_with_shortformer_positions(layers):
    from interp_toolkit.training.presets import get_preset

    for name in ("text", "text-bpe"):
        p = get_preset(name, layers)
        p.validate()
        assert p.name == name and p.model.n_layers == layers
        assert p.data.repeat_fraction == 0.0 and p.data.setting == "natural text"
        assert p.data.corpus == "stdlib"
        assert p.model.positional == "shortformer" and p.model.embed_init_std == 1.0
        # every depth trains the same recipe: only the depth differs
        base = get_preset(name, 2)
        assert p.data == base.data and p.train == base.train
        assert p.model.replace(n_layers=2) == base.model
    bpe, byte = get_preset("text-bpe", layers), get_preset("text", layers)
    assert bpe.model.d_vocab == bpe.data.vocab_size == 256 and bpe.data.codec == "bpe"
    assert (byte.data.codec, byte.data.vocab_size, byte.model.d_vocab) == ("bytes", None, 256)
    assert (byte.model.n_ctx, byte.train.batch_size, byte.train.precision) == (256, 4, "bf16")
    assert byte.train.flush_denormal and not bpe.train.flush_denormal


def test_the_cpu_and_seed_presets_are_unchanged():
    from interp_toolkit.training.presets import get_preset

    cpu = get_preset("cpu", 2)
    assert (cpu.model.n_ctx, cpu.model.d_vocab, cpu.model.positional) == (32, 1024, "standard")
    assert (cpu.data.repeat_fraction, cpu.train.lr, cpu.train.steps) == (0.9, 3e-3, 1500)
    seed = get_preset("post", 2)
    assert (seed.model.d_model, seed.model.positional, seed.data.vocab_size) == (
        768,
        "standard",
        None,
    )


def test_a_text_run_records_its_recipe(tmp_path):
    """A few steps of the text preset on a tiny corpus: config.json records the preset, the plain
    text setting and the shortformer positions, and the run loads back as a shortformer."""
    from interp_toolkit.models.build import is_shortformer
    from interp_toolkit.runs.folder import load_run, read_config
    from interp_toolkit.training import train_model
    from interp_toolkit.training.presets import get_preset, with_overrides

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("def f(x):\n    return x + 1\n" * 400)
    p = with_overrides(
        get_preset("text-bpe", 2),
        corpus=str(corpus),
        steps=3,
        batch_size=4,
        vocab_size=40,
        score_every=3,
        threads=1,
    )
    train_model(
        tmp_path / "run", p.model, p.data, p.train, preset=p.name, progress=False, device="cpu"
    )
    config = read_config(tmp_path / "run")
    assert config["settings"]["preset"] == "text-bpe"
    assert config["settings"]["data"]["repeat_fraction"] == 0.0
    assert config["model"]["positional"] == "shortformer"
    assert is_shortformer(load_run(tmp_path / "run", device="cpu").model)
