"""What ``reproduce`` prints tells the truth: every line of a run's training is labelled with
the run (two runs train side by side in worker processes), each run shows a step counter, the
planned steps are stated as the stop rule applies them, and "reusing" is said only of a run
that was there before the command started."""

from __future__ import annotations

import re

from interp_toolkit.study import folder
from interp_toolkit.study.reproduce import StudyConfig, reproduce


def test_reproduce_output_names_runs_counts_steps_and_reuses_only_old_runs(tmp_path, capfd):
    cfg = StudyConfig(
        out=tmp_path / "s", preset="cpu", layers=(1, 2), steps=12, sample_tokens=8, workers=2
    )
    reproduce(cfg)
    err = capfd.readouterr().err
    runs = sorted(set(re.findall(r"\[(cpu-\dl)\] training", err)))
    assert runs == ["cpu-1l", "cpu-2l"], err[-3000:]
    for run in runs:
        assert re.search(rf"{run}: .*12/12", err), (run, err[-3000:])  # its own step counter
        assert f"[{run}] reading corpus" in err and f"[{run}] from step 0 on cpu" in err
    assert "12 steps" in err  # --steps given: no stop rule applies
    assert "reusing" not in err, err[-3000:]

    folder.TRAINED_HERE.clear()  # as a new command (a new process) starts
    reproduce(cfg)  # the same study again: now the runs were there before
    again = capfd.readouterr().err
    assert all(
        f"[{r}] finished run with the same settings found: reusing it" in again for r in runs
    )
