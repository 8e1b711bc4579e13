"""The study's bad input: checked before any training starts."""

import pytest

from interp_toolkit.cli import main
from interp_toolkit.errors import UserError
from interp_toolkit.study import StudyConfig, parse_layers, reproduce


def test_reproduce_refuses_a_folder_holding_something_else(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(SystemExit) as exc:
        main(["reproduce", "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and len(err.splitlines()) == 1 and "holds something else" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_parse_layers():
    assert parse_layers("2,1") == (1, 2)
    with pytest.raises(UserError):
        parse_layers("one")


def test_reproduce_bad_layers_and_preset(tmp_path):
    with pytest.raises(UserError, match="not offered"):
        reproduce(StudyConfig(out=tmp_path / "s", layers=(1, 4)))
    with pytest.raises(UserError, match="unknown preset"):
        reproduce(StudyConfig(out=tmp_path / "s", preset="tpu"))
    assert not (tmp_path / "s").exists()


def test_workers_fan_out_on_the_cpu_only(tmp_path, monkeypatch):
    """On a GPU the runs train one after another in this process (no pool of processes sharing
    one accelerator); on the CPU they go to the pool."""
    import torch

    from interp_toolkit import study
    from interp_toolkit.presets import get_preset

    trained, pools = [], []
    monkeypatch.setattr(study, "is_finished", lambda path, preset: False)
    monkeypatch.setattr(study, "train_or_reuse", lambda p, preset, device: trained.append(device))
    monkeypatch.setattr(study, "ProcessPoolExecutor", lambda **kw: pools.append(kw) or 1 / 0)
    jobs = [(tmp_path / n, get_preset("cpu", 2)) for n in ("a", "b")]
    monkeypatch.setattr(study, "resolve_device", lambda spec: torch.device("cuda", 0))
    study.train_runs(jobs, workers=2, device="cuda")
    assert trained == ["cuda", "cuda"] and not pools
    monkeypatch.setattr(study, "resolve_device", lambda spec: torch.device("cpu"))
    with pytest.raises(ZeroDivisionError):
        study.train_runs(jobs, workers=2, device="cpu")
    assert len(pools) == 1 and pools[0]["max_workers"] == 2
