"""The natural-text recipe: the ``text`` preset's settings and ``train --repeat-fraction``."""

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
