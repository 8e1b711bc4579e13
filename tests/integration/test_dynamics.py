import torch

from interp_toolkit.analysis.dynamics import over_snapshots, snapshot_steps, trajectory
from interp_toolkit.analysis.scores import head_scores
from interp_toolkit.data import DataConfig
from interp_toolkit.models import AttnOnlyConfig
from interp_toolkit.training import TrainSettings, train_model


def test_trajectory_and_snapshots(tmp_path):
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "a.txt").write_text("the cat sat on the mat\n" * 400)
    (corpus / "b.txt").write_text("a dog ran in the fog\n" * 400)
    m = AttnOnlyConfig(n_layers=2, d_model=32, n_heads=4, d_head=8, n_ctx=16, d_vocab=1)
    t = TrainSettings(
        steps=8, batch_size=4, log_every=2, score_every=4, checkpoint_every=4, snapshot_steps=(4, 8)
    )
    train_model(
        tmp_path / "run", m, DataConfig(corpus=str(corpus), vocab_size=32), t, progress=False
    )
    tr = trajectory(tmp_path / "run")
    assert tr.steps == [4, 8] and tr.induction.shape == (2, 2, 4)
    assert tr.first_step_above(2.0) is None  # scores are probabilities
    assert tr.first_step_above(-1.0) == 4
    assert tr.phase_change(-1.0)["step"] == 4
    assert snapshot_steps(tmp_path / "run") == [4, 8]

    from interp_toolkit.analysis.batches import default_token_range, repeated_tokens
    from interp_toolkit.runs import load_run

    low, high = default_token_range(load_run(tmp_path / "run").codec)
    batch = repeated_tokens(4, 5, low=low, high=high, bos_id=None, seed=0)
    res = over_snapshots(tmp_path / "run", lambda r: head_scores(r.model, batch).induction)
    assert sorted(res) == [4, 8] and not torch.equal(res[4], res[8])
