"""Kept checkpoints (the snapshot schedule, ``RUN@STEP``), the stage rule on planted LLC curves,
the LLC's batches (the run's own training stream) and the ``stages`` command on a tiny run."""

from __future__ import annotations

import json
import math

import pytest
import torch
from analysis_helpers import tiny_codec
from cli_helpers import run_main

from interp_toolkit.development.stages import (
    describe_stages,
    phase_change_in_boundary,
    read_by_rule,
    smooth,
    stage_boundaries,
    steepest_rise,
)
from interp_toolkit.errors import UserError
from interp_toolkit.training.settings import TrainSettings, snapshot_schedule

# ------------------------------------------------------------------ the snapshot schedule


def test_log_schedule_is_log_spaced_and_merges_its_first_steps():
    got = snapshot_schedule(1000, 4)
    assert got == (1, 10, 100, 1000)
    assert snapshot_schedule(8, 32) == tuple(range(1, 9))  # rounding merges: fewer than 32
    assert snapshot_schedule(100, 0, 25) == (25, 50, 75, 100)
    assert snapshot_schedule(100, 0, 0) == ()


def _largest_gap(kept, low, high):
    inside = [s for s in kept if low <= s <= high]
    return max(b - a for a, b in zip(inside, inside[1:], strict=False))


def test_the_default_schedule_covers_both_presets_phase_changes():
    from interp_toolkit.training.presets import get_preset

    cpu = get_preset("cpu", 2).train.snapshot_schedule()
    assert cpu[0] == 1 and cpu[-1] == 1500
    assert _largest_gap(cpu, 200, 600) <= 50  # the curriculum's change (~step 350), densely
    assert sum(s < 100 for s in cpu) >= 10  # and the first steps, log-spaced
    text = get_preset("text", 2).train.snapshot_schedule()
    assert text[-1] == 50_000 and _largest_gap(text, 1000, 50_000) <= 1000
    # the disk cost stays bounded (docs/stages.md; a text run stopped early keeps those before)
    assert len(cpu) <= 64 and len(text) <= 80


def test_explicit_snapshot_steps_replace_the_default_and_bad_ones_are_refused():
    assert TrainSettings(steps=100, snapshot_steps=(8, 4, 8)).snapshot_schedule() == (4, 8)
    quiet = TrainSettings(steps=100, snapshot_log=0, snapshot_every=0)
    assert quiet.snapshot_schedule() == ()
    for bad in ({"snapshot_log": -1}, {"snapshot_every": -5}):
        with pytest.raises(UserError, match="snapshot_"):
            TrainSettings(**bad).validate()


def test_an_old_config_without_the_new_fields_loads_with_the_default():
    old = TrainSettings.from_dict({"steps": 100, "snapshot_steps": []})
    assert old.snapshot_log == 32 and old.snapshot_every is None


# ------------------------------------------------------------------ RUN@STEP


@pytest.fixture
def kept_run(tmp_path, tiny_cfg, tiny_model):
    from interp_toolkit.runs.folder import RunPaths, save_run, save_weights

    root = save_run(tmp_path / "run", tiny_model, tiny_codec(tiny_cfg.d_vocab), tiny_cfg)
    paths = RunPaths(root)
    paths.snapshots.mkdir()
    with torch.no_grad():
        for step in (3, 10):
            for p in tiny_model.parameters():
                p.mul_(0.5)
            save_weights(tiny_model, paths.snapshot(step))
    return root


def _weights(model):
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def test_run_at_step_loads_the_kept_weights(kept_run):
    from interp_toolkit.runs.targets import load_target

    final, at3 = load_target(kept_run, "cpu"), load_target(f"{kept_run}@3", "cpu")
    at10 = load_target(f"{kept_run}@10", "cpu")
    assert at3.name == "run@3" and final.name == "run"
    w_final, w3, w10 = _weights(final.model), _weights(at3.model), _weights(at10.model)
    assert torch.allclose(w3, 0.5 * w_final) and torch.allclose(w10, 0.25 * w_final)


def test_a_step_not_kept_is_one_line_listing_the_kept_steps(kept_run):
    from interp_toolkit.runs.targets import load_target

    with pytest.raises(UserError, match=r"kept no weights at step 4: .*kept: 3, 10") as err:
        load_target(f"{kept_run}@4", "cpu")
    assert "\n" not in str(err.value)
    with pytest.raises(UserError, match="not a whole number"):
        load_target(f"{kept_run}@last", "cpu")
    with pytest.raises(UserError, match="does not exist"):
        load_target(f"{kept_run}-missing@3", "cpu")


def test_a_folder_named_with_an_at_is_that_folder(tmp_path, tiny_cfg, tiny_model):
    from interp_toolkit.runs.folder import save_run
    from interp_toolkit.runs.targets import load_target, split_step

    root = save_run(tmp_path / "v@2", tiny_model, tiny_codec(tiny_cfg.d_vocab), tiny_cfg)
    assert split_step(root) is None
    assert load_target(root, "cpu").name == "v@2"


def test_heads_reads_run_at_step(kept_run, tmp_path, capsys):
    out = tmp_path / "h.json"
    assert run_main(["heads", f"{kept_run}@3", "--n-seqs", "4", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["target"] == "run@3"
    capsys.readouterr()
    assert run_main(["heads", f"{kept_run}@4", "--n-seqs", "4"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "kept: 3, 10" in err


def test_run_at_step_is_an_input_outputs_may_not_land_in(kept_run, capsys):
    """``RUN@STEP`` reads RUN: an output inside RUN is refused as for RUN itself (the run's
    weights and snapshots would be written over), before any work."""
    before = sorted(p.relative_to(kept_run) for p in kept_run.rglob("*"))
    argv = ["heads", f"{kept_run}@3", "--n-seqs", "4", "--json", str(kept_run / "h.json")]
    assert run_main(argv) == 2
    assert "a folder this command reads" in capsys.readouterr().err
    assert sorted(p.relative_to(kept_run) for p in kept_run.rglob("*")) == before


def test_an_sae_of_a_kept_step_gets_its_own_folder(kept_run):
    """The default SAE folder of ``RUN@STEP`` names the step: never the final model's SAE."""
    from interp_toolkit.runs.targets import load_target
    from interp_toolkit.saes.pipeline import default_folder

    run = load_target(kept_run, "cpu").source
    final = default_folder(run, "blocks.1.attn.hook_z", "topk", 8, 32)
    at3 = default_folder(run, "blocks.1.attn.hook_z", "topk", 8, 32, step=3)
    assert final.name == "blocks.1.attn.hook_z-topk-x8-k32"
    assert at3.name == "blocks.1.attn.hook_z-topk-x8-k32-step3" and at3.parent == final.parent


# ------------------------------------------------------------------ the stage rule


def _log_steps(n=40, last=2000):
    return sorted({round(last ** (i / (n - 1))) for i in range(n)})


def _planted(v: float) -> float:
    """Piecewise linear in log(step): up to 10 at 3 (step 20), down to 4 at 5 (step 148), up."""
    return 10 * v / 3 if v <= 3 else (10 - 3 * (v - 3) if v <= 5 else 4 + 4 * (v - 5))


def test_a_rise_then_fall_then_rise_gives_a_peak_and_a_trough():
    steps = _log_steps(last=1000)
    bounds = stage_boundaries(steps, [_planted(math.log(s)) for s in steps], bandwidth=0.2)
    assert [b.kind for b in bounds] == ["peak", "trough"]
    peak, trough = bounds
    assert abs(math.log(peak.step) - 3.0) < 0.3, peak
    assert abs(math.log(trough.step) - 5.0) < 0.3, trough
    for b in bounds:
        assert b.low < b.step < b.high


def test_noise_on_a_rising_curve_gives_no_boundary():
    steps = _log_steps()
    g = torch.Generator().manual_seed(3)
    noise = (torch.randn(len(steps), generator=g) * 0.3).tolist()
    llc = [2 * math.log(s) + e for s, e in zip(steps, noise, strict=True)]
    assert stage_boundaries(steps, llc) == []
    assert stage_boundaries(steps, [5.0] * len(steps)) == []
    # without the smoothing and the swing floor the same noise makes many
    assert len(stage_boundaries(steps, llc, bandwidth=1e-3, min_swing=0.0)) > 3


def test_estimates_below_zero_are_not_read_and_no_longer_hide_a_trough():
    """Checkpoints before a minimum: the chains descend and the estimate reads far below 0 (the
    text preset's first checkpoints read -15). Read, that drop swamps the curve's range and a
    later dip's swing falls under the floor; not read, the dip is found where planted."""
    steps = _log_steps(last=1000)

    def planted(v: float) -> float:  # -15 before step 20; 10 falling to 8 at step 148; rising
        return -15.0 if v < 3 else (10 - (v - 3) if v <= 5 else 8 + 2 * (v - 5))

    llc = [planted(math.log(s)) for s in steps]
    high = [v + 2.0 for v in llc]  # intervals of half-width 2: below 0 only for the -15s
    assert [b.kind for b in stage_boundaries(steps, llc, bandwidth=0.2)] != ["trough"]
    read = read_by_rule(llc, high)
    assert [math.isnan(v) for v in read] == [math.log(s) < 3 for s in steps]
    bounds = stage_boundaries(steps, read, bandwidth=0.2)
    assert [b.kind for b in bounds] == ["trough"]
    assert abs(math.log(bounds[0].step) - 5.0) < 0.3, bounds
    assert math.log(steepest_rise(steps, read).start) >= 3
    # an interval that reaches 0 is read: a small estimate is a measurement, not a descent
    assert read_by_rule([-0.5, 3.0], [0.1, 4.0]) == [-0.5, 3.0]


def test_smoothing_keeps_a_line_in_log_step():
    steps = [1, 2, 4, 8, 16, 32, 64]
    line = [math.log2(s) for s in steps]
    got = smooth(steps, line, bandwidth=0.3)
    assert got[3] == pytest.approx(line[3], abs=1e-6)  # symmetric neighbours: exact mid-curve


def test_stages_are_described_from_the_logged_measures():
    steps = [10, 100, 200, 400, 800]
    llc = [1.0, 5.0, 9.0, 6.0, 7.0]
    bounds = stage_boundaries(steps, llc, bandwidth=0.01, min_swing=0.0)
    assert [b.step for b in bounds] == [200, 400]

    def row(step, ind, prev, loss):
        return {"step": step, "loss": loss, "val_loss": loss + 0.1,
                "induction": [[0.0, 0.0], [ind, 0.0]], "prev_token": [[prev, 0.0], [0.0, 0.0]]}  # fmt: skip

    rows = [row(10, 0.0, 0.0, 6.0), row(200, 0.05, 0.6, 5.0), row(400, 0.8, 0.6, 3.0)]
    rows.append(row(800, 0.8, 0.6, 2.98))
    stages = describe_stages(steps, llc, bounds, rows)
    assert [(s.start, s.end) for s in stages] == [(10, 200), (200, 400), (400, 800)]
    assert "previous token 0 -> 0.6" in stages[0].summary
    assert "induction" not in stages[0].summary
    assert "induction 0.05 -> 0.8" in stages[1].summary and "falls" in stages[1].summary
    assert "no logged measure moved" in stages[2].summary
    # a stage between two scorings reads one row at both ends: it says so, not "no measure moved"
    sparse = describe_stages(
        [10, 20, 30, 800], [1.0, 5.0, 2.0, 3.0], bounds[:0], [rows[0], rows[-1]]
    )
    assert "induction 0 -> 0.8" in sparse[0].summary  # 10 -> 800: rows 10 and 800
    short = describe_stages([10, 20, 30], [1.0, 5.0, 2.0], bounds[:0], [rows[0], rows[-1]])
    assert short[0].summary.endswith("no scoring inside it (both ends read the scored step 10)")
    verdict = phase_change_in_boundary(bounds, 300)
    assert verdict.inside is True and verdict.nearest.step in (200, 400)
    assert phase_change_in_boundary(bounds, 900).inside is False
    rise = steepest_rise(steps, llc)
    assert rise.to_dict() == {"from": 10, "to": 100, "llc": [1.0, 5.0], "rise": 4.0}
    assert phase_change_in_boundary(bounds, 100, rise).in_steepest_rise is True
    assert phase_change_in_boundary(bounds, 10, rise).in_steepest_rise is False


def _hand_stages():
    """Five checkpoints with a trough at 40, three scored rows, a route at the last stage's end
    and the phase change at step 30 (inside the trough's interval, before the steepest rise)."""
    from dataclasses import replace

    from interp_toolkit.development.curve import LLCCurve, Stages
    from interp_toolkit.development.llc import LLCEstimate, SGLDSettings
    from interp_toolkit.development.stages import StageRule

    steps, llc = [10, 20, 40, 80, 160], [3.14159265, 1.41421356, 0.5772156649, 2.71828182, 2.99]
    ests = [LLCEstimate(v, 0.1, v - 0.2, v + 0.2, [v, v], 4.0, 50.0, None, SGLDSettings(),
                        [0.0, 0.0], 1.0, True, 0.1, 2, 4) for v in llc]  # fmt: skip
    curve = LLCCurve("hand", steps, ests, {"n_batches": 2, "rows": 4, "source": "hand"}, 1.23456)
    rows = [{"step": s, "loss": loss, "val_loss": val, "induction": [[0.0, 0.0], [ind, 0.1]],
             "prev_token": [[0.3, 0.0], [0.0, 0.0]]}
            for s, loss, val, ind in ((10, 5.75, 5.85, 0.05), (40, 5.0, 5.1, 0.2), (160, 2.0, 2.1, 0.8))]  # fmt: skip
    bounds = stage_boundaries(steps, llc)
    described = describe_stages(steps, llc, bounds, rows)
    route = {"step": 160, "route": "no induction", "induction_heads": []}
    described[-1] = replace(described[-1], route_at_end=route)
    rule = StageRule(smoothing="kernel 0.25", boundary="a turn", interval="either side",
                     not_read="below 0", not_read_steps=[], bandwidth=0.25, min_swing=0.1)  # fmt: skip
    rise = steepest_rise(steps, llc)
    return Stages(curve, bounds, described, phase_change_in_boundary(bounds, 30, rise), rule)


def test_the_stages_json_keeps_its_keys_order_and_digits():
    """A hand-made result's stages.json, every key in its place (as written before the stages
    were typed): the LLC and the rise at 4 digits, the logged measures as logged, a route only
    where one was read; a phase change without a step or a rise leaves its keys out as before."""
    stages = _hand_stages()
    got = stages.to_dict()
    assert len(got.pop("checkpoints")) == 5
    bound = {"step": 40, "interval": [20, 80], "kind": "trough", "llc_smoothed": 0.6384}
    at = [{"logged_step": s, "loss": loss, "val_loss": val, "previous_token": 0.3,
           "induction": ind, "passage_drop": None}
          for s, loss, val, ind in ((10, 5.75, 5.85, 0.1), (40, 5.0, 5.1, 0.2), (160, 2.0, 2.1, 0.8))]  # fmt: skip
    rise = {"from": 40, "to": 80, "llc": [0.5772, 2.7183], "rise": 2.1411}
    want = {
        "run": "hand",
        "batches": {"n_batches": 2, "rows": 4, "source": "hand"},
        "settings": {"step_size": 0.0001, "gamma": 1000.0, "nbeta": 50.0, "chains": 2,
                     "draws": 40, "burn_in": 20, "seed": 0},  # fmt: skip
        "settings_source": "given",
        "rule": {"smoothing": "kernel 0.25", "boundary": "a turn", "interval": "either side",
                 "not_read": "below 0", "not_read_steps": [], "bandwidth": 0.25, "min_swing": 0.1},  # fmt: skip
        "boundaries": [bound],
        "stages": [
            {"stage": 1, "start": 10, "end": 40, "llc": [3.1416, 0.5772], "start_measures": at[0],
             "end_measures": at[1],
             "summary": "LLC falls 3.14 -> 0.577; loss 5.75 -> 5; val loss 5.85 -> 5.1; induction 0.1 -> 0.2"},
            {"stage": 2, "start": 40, "end": 160, "llc": [0.5772, 2.99], "start_measures": at[1],
             "end_measures": at[2],
             "summary": "LLC rises 0.577 -> 2.99; loss 5 -> 2; val loss 5.1 -> 2.1; induction 0.2 -> 0.8",
             "route_at_end": {"step": 160, "route": "no induction", "induction_heads": []}},
        ],
        "phase_change": {"phase_change_step": 30, "inside": True, "nearest": bound,
                         "steepest_rise": rise, "in_steepest_rise": False, "distance": 10},
        "seconds": 1.23,
    }  # fmt: skip
    assert json.dumps(got) == json.dumps(want)
    rise_at = steepest_rise([10, 20], [1.0, 3.0])
    no_step = phase_change_in_boundary(stages.boundaries, None, rise_at).to_dict()
    assert json.dumps(no_step) == json.dumps(
        {
            "phase_change_step": None,
            "inside": None,
            "nearest": None,
            "steepest_rise": {"from": 10, "to": 20, "llc": [1.0, 3.0], "rise": 2.0},
            "in_steepest_rise": None,
        }  # fmt: skip
    )
    alone = phase_change_in_boundary([], 30).to_dict()
    assert json.dumps(alone) == '{"phase_change_step": 30, "inside": null, "nearest": null}'
    again = type(stages).from_dict(json.loads(json.dumps(stages.to_dict()))).to_dict()
    assert json.dumps(again["stages"]) == json.dumps(want["stages"])  # read back: the same
    assert json.dumps(again["phase_change"]) == json.dumps(want["phase_change"])


#: A stages.json as ``stages RUN`` wrote it at abd026e (before estimates below 0 were left out
#: and before routes: no ``not_read``, ``not_read_steps``, ``route_at_end``, ``settings_source``
#: or ``below_zero``); its checkpoints as that version's ``LLCEstimate.to_dict(traces=False)``.
_CHECKPOINT_ABD026E = {
    "std": 0.1, "interval_rule": "mean ± 2 standard errors over chains", "init_loss": 4.0,
    "nbeta": 50.0, "seconds": 0.1, "n_batches": 2, "rows_per_batch": 4,
    "settings": {"step_size": 0.0001, "gamma": 1000.0, "nbeta": 50.0, "chains": 2, "draws": 40,
                 "burn_in": 20, "seed": 0},
    "diagnostics": {"drift": [0.0, 0.0], "r_hat": 1.0, "finite": True,
                    "drift_rule": "nβ × (mean of a chain's second half of draws − its first half)"},
}  # fmt: skip
STAGES_ABD026E = {
    "run": "cpu-2l",
    "checkpoints": [
        {"step": s, "llc": v, "interval": [v - 0.5, v + 0.5], "per_chain": [v, v], **_CHECKPOINT_ABD026E}
        for s, v in ((100, 2.5), (200, 1.5), (400, 3.0))
    ],
    "batches": {"n_batches": 2, "rows": 4, "source": "the run's first training batches"},
    "settings": _CHECKPOINT_ABD026E["settings"],
    "rule": {
        "smoothing": "Gaussian kernel in log(step), bandwidth 0.25",
        "boundary": "a checkpoint where the smoothed LLC's slope changes sign, kept when the swing "
        "on each side is >= 0.1 of the smoothed curve's range",
        "interval": "the checkpoints either side of the boundary",
        "bandwidth": 0.25,
        "min_swing": 0.1,
    },
    "boundaries": [{"step": 200, "interval": [100, 400], "kind": "trough", "llc_smoothed": 1.8}],
    "stages": [
        {"stage": 1, "start": 100, "end": 200, "llc": [2.5, 1.5], "start_measures": {"logged_step": None},
         "end_measures": {"logged_step": None}, "summary": "LLC falls 2.5 -> 1.5; no logged measure moved"},
        {"stage": 2, "start": 200, "end": 400, "llc": [1.5, 3.0], "start_measures": {"logged_step": None},
         "end_measures": {"logged_step": None}, "summary": "LLC rises 1.5 -> 3; no logged measure moved"},
    ],
    "phase_change": {"phase_change_step": 350, "inside": False,
                     "nearest": {"step": 200, "interval": [100, 400], "kind": "trough", "llc_smoothed": 1.8},
                     "steepest_rise": {"from": 200, "to": 400, "llc": [1.5, 3.0], "rise": 1.5},
                     "in_steepest_rise": True, "distance": -150},
    "seconds": 2.0,
}  # fmt: skip


def test_a_stages_json_of_the_first_version_is_read_and_shown():
    """The first layout (:data:`STAGES_ABD026E`) reads back: its rule, stages and phase change
    written again as they were, and the printer, the page and the study's sentence show it
    (no 'not read' clause: that version read every estimate)."""
    import io

    from rich.console import Console

    from interp_toolkit.development.curve import Stages
    from interp_toolkit.reports.stage_findings import StagesOfRun, stage_sentence
    from interp_toolkit.reports.terminal_units import stages_view
    from interp_toolkit.views.stages import stages_html

    stages = Stages.from_dict(json.loads(json.dumps(STAGES_ABD026E)))
    again = stages.to_dict()
    for key in ("rule", "boundaries", "stages", "phase_change", "batches", "run"):
        assert json.dumps(again[key]) == json.dumps(STAGES_ABD026E[key]), key
    assert stages.rule.not_read_steps is None and stages.stages[0].route_at_end is None
    console = Console(file=io.StringIO(), width=200)
    for item in stages_view(stages):
        console.print(item)
    shown = console.file.getvalue()
    assert "stage 2 (steps 200-400): LLC rises 1.5 -> 3; no logged measure moved" in shown
    assert "steepest LLC rise: steps 200-400 (1.5 -> 3)." in shown and "not read" not in shown
    assert (
        "induction phase change at step 350: outside a boundary's interval (nearest boundary "
        "step 200, interval [100, 400]); in the steepest LLC rise." in shown
    )
    said = stage_sentence(StagesOfRun(0, "cpu-2l", 2, stages, []))
    assert "the LLC at 3 kept checkpoints; boundaries at step 200 (trough; 100-400)" in said
    assert "falls outside the loss's steepest fall, inside the LLC's steepest rise" in said
    assert "Not read" not in stages_html(stages, [])


# ------------------------------------------------------------------ the LLC's batches


def _text_run(tmp_path, tiny_cfg, tiny_model):
    from interp_toolkit.runs.folder import save_run

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(20):
        (corpus / f"m{i}.py").write_text(f"def f{i}(x, y):\n    return x * y + {i}\n" * 20)
    train = {"steps": 20, "batch_size": 8, "seed": 3}
    data = {"corpus": str(corpus), "vocab_size": tiny_cfg.d_vocab, "repeat_fraction": 0.5}
    return save_run(tmp_path / "run", tiny_model, tiny_codec(tiny_cfg.d_vocab), tiny_cfg,
                    {"data": data, "train": train})  # fmt: skip


def test_the_llc_reads_the_runs_own_training_batches(tmp_path, tiny_cfg, tiny_model):
    from interp_toolkit.development.data import llc_batches
    from interp_toolkit.runs.folder import load_run, read_config
    from interp_toolkit.text.stream import tokenize_corpus, windows
    from interp_toolkit.training.settings import recorded_configs
    from interp_toolkit.training.trainer import stream_for

    root = _text_run(tmp_path, tiny_cfg, tiny_model)
    run = load_run(root, "cpu")
    got = llc_batches(run, n_batches=3, rows=4)
    m, d, t = recorded_configs(read_config(root), root / "config.json")
    m = m.replace(d_vocab=run.codec.d_vocab)
    corpus = tokenize_corpus(d.corpus, d.val_fraction, d.max_tokens, False, store=d.store)
    trained = stream_for(windows(corpus.train_ids, run.codec, m.n_ctx + 1), run.codec, m, d, t, 0)
    for step, batch in enumerate(got.batches):  # the rows the trainer fed, every other one
        assert torch.equal(batch, trained.batch(step)[::2])
    assert got.to_dict()["rows"] == 4 and "2 of 4 rows repeated-span" in got.source


def test_stages_command_on_a_tiny_run(tmp_path, tiny_cfg, tiny_model, capsys):
    from interp_toolkit.runs.folder import RunPaths, save_weights

    root = _text_run(tmp_path, tiny_cfg, tiny_model)
    paths = RunPaths(root)
    paths.snapshots.mkdir()
    rows = []
    with torch.no_grad():
        for step in (1, 2, 4, 8):
            for p in tiny_model.parameters():
                p.mul_(1.1)
            save_weights(tiny_model, paths.snapshot(step))
            rows.append({"step": step, "loss": 4.0 - step / 10, "induction": [[0.0] * 4] * 2,
                         "prev_token": [[0.1] * 4] * 2})  # fmt: skip
    paths.metrics.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out, page = tmp_path / "s.json", tmp_path / "s.html"
    argv = ["stages", str(root), "--draws", "3", "--burn-in", "1", "--rows", "4", "--batches", "2",
            "--nbeta", "1", "--step-size", "0.01"]  # fmt: skip  # noise over descent: above 0
    assert run_main([*argv, "--json", str(out), "--html", str(page)]) == 0
    data = json.loads(out.read_text())
    assert [c["step"] for c in data["checkpoints"]] == [1, 2, 4, 8]
    first = data["checkpoints"][0]
    assert first["settings"]["draws"] == 3 and len(first["traces"]) == 2
    assert len(first["traces"][0]) == 4  # burn-in + draws
    assert {"drift", "r_hat", "finite"} <= set(first["diagnostics"])
    assert "training stream" in data["batches"]["source"] and data["stages"]
    # no preset recorded: the cpu preset's calibration, with the flags given named
    assert data["settings_source"].startswith("the cpu preset's calibration")
    assert data["settings_source"].endswith(
        "given: --step-size 0.01, --nbeta 1.0, --draws 3, --burn-in 1"
    )
    assert first["settings"]["gamma"] == 1000.0 and "below_zero" in first
    assert "plotly" in page.read_text()
    # the run keeps its stages (its report draws them), and each stage ends with the route by path
    kept = json.loads(paths.stages.read_text())
    assert kept.pop("run_digest") and kept == data  # stamped with the run it belongs to
    ends = [st["route_at_end"] for st in data["stages"]]
    assert [r["step"] for r in ends] == [st["end"] for st in data["stages"]]
    assert all("head" not in r for r in ends if r["route"] == "no induction")  # no shares of 0
    assert ends[-1]["step"] == 8 and all(
        "route at its end: " in st["summary"] for st in data["stages"]
    )
    # --reuse: the kept estimates read again by the rule, no SGLD; the same curve, a new rule
    assert run_main(["stages", str(root), "--reuse", "--min-swing", "0", "--bandwidth", "0.1"]) == 0
    again = json.loads(paths.stages.read_text())
    assert [c["llc"] for c in again["checkpoints"]] == [c["llc"] for c in data["checkpoints"]]
    assert again["checkpoints"][0]["traces"] == first["traces"]
    assert (again["rule"]["min_swing"], again["rule"]["bandwidth"]) == (0.0, 0.1)
    assert again["settings_source"] == data["settings_source"]
    capsys.readouterr()
    assert run_main(["stages", str(root), "--reuse", "--gamma", "5"]) == 2
    assert "--reuse reads the estimates" in capsys.readouterr().err
    paths.stages.write_text('{"run": "x"}')
    assert run_main(["stages", str(root), "--reuse"]) == 2
    assert "stages.json is damaged (the file has no 'checkpoints')" in capsys.readouterr().err
    assert run_main([*argv, "--json", "-"]) == 0  # JSON alone on standard output
    assert json.loads(capsys.readouterr().out)["stages"] == data["stages"]
    assert run_main(["stages", str(root), "--chains", "1"]) == 2  # one line, before any work
    assert "chains=1 cannot work" in capsys.readouterr().err
    from interp_toolkit.development.curve import LLCCurve, stages

    bare = stages(root, curve=LLCCurve.from_dict(data), routes=False).to_dict()["stages"]
    assert bare and all("route_at_end" not in st and "route" not in st["summary"] for st in bare)


def test_a_stages_json_written_before_devinterp_is_read_back():
    """``stages --reuse`` reads estimates kept by earlier versions: this file was written by
    ``stages RUN --max-step 4 --draws 3 --burn-in 1`` at 0b9f6e4 (the chains still our own SGLD)
    on a cpu-preset run; read back and written again, every checkpoint is as it was."""
    from pathlib import Path

    from interp_toolkit.development.curve import LLCCurve

    old = json.loads((Path(__file__).parent / "stages_before_devinterp.json").read_text())
    curve = LLCCurve.from_dict(old)
    assert curve.steps == [1, 2, 3, 4] and curve.settings_source == old["settings_source"]
    assert curve.estimates[0].traces.shape == (2, 4)
    assert curve.to_dict()["checkpoints"] == old["checkpoints"]


def test_the_stages_view_reads_a_stages_json_written_before():
    """The view takes the typed stages; a file written by an earlier version (the fixture above)
    is read back whole by ``Stages.from_dict`` (and written again unchanged, ``seconds`` aside)
    and drawn: its boundary, its LLC points and its stages' sentences."""
    from pathlib import Path

    from interp_toolkit.development.curve import Stages
    from interp_toolkit.views.stages import stages_figure, stages_html

    old = json.loads((Path(__file__).parent / "stages_before_devinterp.json").read_text())
    stages = Stages.from_dict(old)
    assert [(b.step, b.low, b.high, b.kind) for b in stages.boundaries] == [(2, 1, 3, "trough")]
    assert stages.to_dict() == old
    fig = stages_figure(stages, [])
    llc = next(t for t in fig.data if t.name == "LLC")
    assert list(llc.x) == [1, 2, 3, 4] and list(llc.y) == [c["llc"] for c in old["checkpoints"]]
    assert {(s.x0, s.x1) for s in fig.layout.shapes if s.type == "rect"} == {(1, 3)}
    page = stages_html(stages, [])
    s = old["stages"][-1]
    assert f"stage {s['stage']} (steps {s['start']}-{s['end']})" in page and "plotly" in page


def test_the_terminal_shows_the_stages_as_their_json_holds_them():
    """The printer reads the typed stages; a result shows as it does read back from its JSON (a
    number as stages.json rounds it: an LLC of 1.2e-7 is 0; a stopped chain's NaN a dash)."""
    import io

    from rich.console import Console

    from interp_toolkit.development.curve import LLCCurve, Stages
    from interp_toolkit.development.llc import LLCEstimate, SGLDSettings
    from interp_toolkit.development.stages import (
        Boundary,
        Stage,
        StageRule,
        phase_change_in_boundary,
    )
    from interp_toolkit.reports.terminal_units import stages_view

    def est(llc: float, low: float, high: float, drift: float = 0.6) -> LLCEstimate:
        return LLCEstimate(llc, 0.1, low, high, [llc, llc], 4.0, 50.0, None, SGLDSettings(),
                           [drift / 2, -drift], drift + 0.42, True, 0.1, 2, 4)  # fmt: skip

    nan = float("nan")
    ests = [est(1.2e-7, -0.5, 0.5), est(-2.0, -3.0, -1.0), est(nan, nan, nan, nan)]
    curve = LLCCurve("run", [1, 2, 4], ests, {"source": "hand batches"}, 1.0, "given")
    bounds = [Boundary(2, 1, 4, "trough", 0.5)]
    ends = {"logged_step": None}
    rule = StageRule(smoothing="kernel", boundary="the rule", interval="either side",
                     not_read="its words", not_read_steps=[2], bandwidth=0.25, min_swing=0.1)  # fmt: skip
    stage = Stage(1, 1, 2, [0.0, -2.0], ends, ends, "it falls")
    stages = Stages(curve, bounds, [stage], phase_change_in_boundary(bounds, 2), rule)

    def shown(s: Stages) -> str:
        console = Console(file=io.StringIO(), width=200)
        for item in stages_view(s):
            console.print(item)
        return console.file.getvalue()

    now = shown(stages)
    assert now == shown(Stages.from_dict(stages.to_dict()))
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in now.splitlines() if "│" in line]
    assert rows == [
        ["1", "0", "-0.5 - 0.5", "4", "1.02", "0.6"],
        ["2 *", "-2 (below 0)", "-3 - -1", "4", "1.02", "0.6"],
        ["4", "-", "- - -", "4", "-", "-"],
    ]
    for line in (
        "run: LLC at 3 kept checkpoints (SGLD ε 0.0001, γ 1000, nβ 50, 2 chains",
        "not read (below 0) at steps 2: its words.",
        "stage 1 (steps 1-2): it falls",
        "at step 2: inside a boundary's interval (nearest boundary step 2, interval [1, 4])",
    ):
        assert line in now


@pytest.mark.slow  # trains a tiny model for 12 steps
def test_training_keeps_the_default_schedule(tmp_path):
    from interp_toolkit.models.build import ModelConfig
    from interp_toolkit.runs.folder import RunPaths
    from interp_toolkit.runs.targets import load_target
    from interp_toolkit.text.stream import DataConfig
    from interp_toolkit.training import train_model

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(30):
        (corpus / f"m{i}.py").write_text(f"def f{i}(x, y):\n    return x * y + {i}\n" * 30)
    model_cfg = ModelConfig(n_layers=2, d_model=32, n_heads=4, d_head=8, n_ctx=16, d_vocab=1)
    data_cfg = DataConfig(corpus=str(corpus), vocab_size=64, repeat_fraction=0.5)
    train_cfg = TrainSettings(steps=40, batch_size=8, log_every=2, score_every=20, snapshot_log=5)
    train_model(tmp_path / "run", model_cfg, data_cfg, train_cfg, progress=False)
    kept = RunPaths(tmp_path / "run").snapshot_steps()
    assert kept == list(train_cfg.snapshot_schedule()) == [1, 3, 6, 16, 20, 40]
    final, last = load_target(tmp_path / "run", "cpu"), load_target(f"{tmp_path / 'run'}@40", "cpu")
    assert torch.equal(_weights(final.model), _weights(last.model))
    assert not torch.equal(
        _weights(final.model), _weights(load_target(f"{tmp_path / 'run'}@6").model)
    )
