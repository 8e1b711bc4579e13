"""Snapshots of a real (tiny) training run, re-scored; the trajectory rules themselves are tested
on hand-written metrics in tests/unit/training/test_trajectory.py."""

import torch

from interp_toolkit.heads.discovery import head_scores
from interp_toolkit.heads.dynamics import trajectory
from interp_toolkit.heads.induction import INDUCTION_SCORE
from interp_toolkit.heads.registry import SCORE
from interp_toolkit.models.build import ModelConfig
from interp_toolkit.runs.folder import RunPaths, load_run, read_metrics
from interp_toolkit.text.stream import DataConfig
from interp_toolkit.training import TrainSettings, train_model


def test_trajectory_and_snapshots(tmp_path):
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "a.txt").write_text("the cat sat on the mat\n" * 400)
    (corpus / "b.txt").write_text("a dog ran in the fog\n" * 400)
    m = ModelConfig(n_layers=2, d_model=32, n_heads=4, d_head=8, n_ctx=16, d_vocab=1)
    t = TrainSettings(
        steps=8, batch_size=4, log_every=2, score_every=4, checkpoint_every=4, snapshot_steps=(4, 8)
    )
    train_model(
        tmp_path / "run", m, DataConfig(corpus=str(corpus), vocab_size=32), t, progress=False
    )
    tr = trajectory(tmp_path / "run")
    scored = [r for r in read_metrics(tmp_path / "run") if "induction" in r]
    assert tr.steps == [4, 8] and [r["step"] for r in scored] == [4, 8]
    # the trajectory reads the score that decides the induction role, as logged
    key = SCORE[INDUCTION_SCORE].logged_as
    assert torch.equal(tr.induction, torch.tensor([r[key] for r in scored]))
    paths = RunPaths(tmp_path / "run")
    assert paths.snapshot_steps() == [4, 8]

    from interp_toolkit.heads.repeats import default_token_range, repeated_tokens

    final = load_run(tmp_path / "run")
    low, high = default_token_range(final.codec)
    batch = repeated_tokens(4, 5, low=low, high=high, bos_id=None, seed=0)
    with torch.no_grad():  # every snapshot re-scored
        res = {
            step: head_scores(
                load_run(paths.root, weights=paths.snapshot(step)).model, batch
            ).induction
            for step in paths.snapshot_steps()
        }
    # the last snapshot is the final weights; the one at step 4 is not
    with torch.no_grad():
        want = head_scores(final.model, batch).induction
    assert sorted(res) == [4, 8] and torch.equal(res[8], want) and not torch.equal(res[4], want)
