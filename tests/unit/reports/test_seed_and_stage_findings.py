"""The words over seeds (reports/seeds.py) and the stages' answer on the study page
(reports/stage_findings.py), from hand-written measurements with a known answer."""

from __future__ import annotations

from interp_toolkit.development.curve import Stages
from interp_toolkit.measures.seeds import Held, Spread
from interp_toolkit.reports.stage_findings import (
    StagesOfRun,
    coincide_sentence,
    seeds_move_sentence,
    stage_sentence,
    stages_study_section,
)


def test_a_spread_is_median_and_range_and_says_which_seeds_lack_it():
    s = Spread((0, 1, 2, 3, 4), (6000.0, 22000.0, None, 5000.0, 4000.0))
    assert s.median == 5500.0
    assert s.words(lambda v: f"{v:,.0f}") == "5,500 (4,000–22,000) in 4 of 5 seeds"
    assert s.to_dict()["by_seed"]["2"] is None and s.to_dict()["max"] == 22000.0
    assert Spread((0,), (None,)).words() == "—"
    assert Spread((0, 1), (0.5, 0.5)).words() == "0.5 (0.5–0.5)"
    assert Held((0, 1, 2), (0, 2)).words() == "2 of 3"
    # study.json's keys: a spread's median, range and seeds; a yes/no's count, of how many, which
    by_seed = {"0": 6000.0, "1": 22000.0, "2": None, "3": 5000.0, "4": 4000.0}
    assert s.to_dict() == {"median": 5500.0, "min": 4000.0, "max": 22000.0, "by_seed": by_seed}
    assert Held((0, 1, 2), (0, 2)).to_dict() == {"held": 2, "of": 3, "seeds": [0, 2]}
    assert Held((), ()).words() == "—"  # no seed had a role to check


def _checkpoint(step: int, llc: float = 1.0, low: float = 0.5, high: float = 1.5) -> dict:
    """A checkpoint of stages.json as written (LLC 1.0 [0.5, 1.5]), without traces."""
    from interp_toolkit.development.llc import LLCEstimate, SGLDSettings

    e = LLCEstimate(llc, 0.25, low, high, [1.0, 1.0], 4.0, 50.0, None,
                    SGLDSettings(), [0.0, 0.0], 1.0, True, 0.1, 2, 4)  # fmt: skip
    return {"step": step, **e.to_dict()}


def _stages(
    phase: int | None, rise: tuple[int, int], fall_at: int, inside: bool, **changes
) -> StagesOfRun:
    """A run's stages as read from its stages.json (``changes``: keys of that file replaced)."""
    # the training loss drops by 1.5 at ``fall_at``; the held-out loss falls steadily (read by
    # nothing here: the drop the seed asks about is the training loss's)
    rows = [
        {
            "step": s,
            "loss": 5.0 - (1.5 if s >= fall_at else 0.0) - 0.01 * s / 100,
            "val_loss": 3.0 - s / 100,
        }
        for s in range(50, 601, 50)
    ]
    data = {
        "run": "cpu-2l",
        "checkpoints": [_checkpoint(s) for s in (100, 300, 350, 500)],
        "batches": {"n_batches": 2, "rows": 4, "source": "hand-made"},
        "seconds": 1.0,
        "stages": [],
        "rule": {
            "smoothing": "kernel",
            "boundary": "a turn",
            "interval": "either side",
            "not_read": "below 0",
            "not_read_steps": [],
            "bandwidth": 0.25,
            "min_swing": 0.1,
        },  # fmt: skip
        "boundaries": [{"step": 500, "interval": [461, 550], "kind": "peak", "llc_smoothed": 30.0}],
        "phase_change": {
            "phase_change_step": phase,
            "inside": inside,
            "in_steepest_rise": None if phase is None else rise[0] < phase <= rise[1],
            "steepest_rise": {"from": rise[0], "to": rise[1], "llc": [10.5, 27.3], "rise": 16.8},
        },
        **changes,
    }
    return StagesOfRun(0, data["run"], int(data["run"][-2]), Stages.from_dict(data), rows)


def test_a_phase_change_in_the_loss_fall_and_the_llc_rise_is_placed_in_both():
    s = _stages(350, (300, 350), 350, inside=False)
    said = stage_sentence(s)
    assert "steepest rise is between steps 300 and 350 (10.5 -> 27.3)" in said
    assert "the training loss falls most between scored steps 300 and 350" in said
    assert (
        "(step 350) falls inside the loss's steepest fall, inside the LLC's steepest rise, "
        "outside every boundary's interval" in said
    )
    assert s.rise_meets_fall() is True


def test_the_answer_counts_each_placement_over_runs():
    runs = [
        _stages(350, (300, 350), 350, inside=False),
        _stages(350, (100, 250), 350, inside=True),  # the LLC rose earlier; a boundary holds it
        _stages(None, (300, 350), 350, inside=False),  # no phase change: not counted
    ]
    said = coincide_sentence(runs)
    assert "Over 2 run(s) with stages measured and induction formed (seeds 0)" in said
    assert "steepest fall in 2 of 2, in the LLC's steepest rise in 1 of 2" in said
    assert "inside a stage boundary's interval in 1 of 2" in said
    assert "meets the training loss's steepest fall (shares or overlaps steps) in 1 of 2" in said


def test_how_far_boundaries_move_with_the_seed_is_counted_in_steps():
    def seed(n, phase, rise_to, bounds):
        bounds = [
            {"step": st, "interval": [st - 10, st + 10], "kind": k, "llc_smoothed": 1.0}
            for st, k in bounds
        ]
        s = _stages(phase, (rise_to - 50, rise_to), 350, inside=False, boundaries=bounds)
        return StagesOfRun(n, "text-2l", 2, s.stages, s.rows)

    runs = [
        seed(2, 19_000, 19_000, [(500, "trough"), (20_000, "peak")]),
        seed(0, 5_000, 5_000, [(112, "trough"), (5_000, "peak"), (7_000, "trough")]),
        seed(1, 5_000, 4_000, []),  # no boundary at all in this seed
    ]
    said = seeds_move_sentence(runs)
    assert said.startswith("text-2l over seeds 0, 1, 2:")
    # the first trough of seeds 0 and 2 (not seed 0's second): 388 steps apart
    assert "a trough in 2 of 3 seeds (the first at steps 112, 500: it moves by up to 388" in said
    assert "-4,888, -18,500 steps from the phase change" in said
    assert (
        "a peak in 2 of 3 seeds (the first at steps 5,000, 20,000: it moves by up to 15,000" in said
    )
    assert "+0, +1,000 steps from the phase change" in said
    assert "steepest rise ends at steps 5,000, 4,000, 19,000 (moves by up to 15,000 steps)" in said
    assert "the phase change at 5,000, 5,000, 19,000" in said

    # a seed measured alone gets no sentence on the page: nothing to compare
    def said_over_seeds(found):
        section = stages_study_section(found, [])
        return [i for i in section.items if "over seeds" in str(i)]

    assert said_over_seeds([runs[0]]) == [] and len(said_over_seeds(runs)) == 1


def test_the_figure_draws_the_one_layer_controls_llc_beside():
    import plotly.graph_objects as go

    two = _stages(350, (300, 350), 350, inside=False)
    one = _stages(None, (300, 350), 350, inside=False, run="cpu-1l")
    for found, drawn in (([two, one], True), ([two], False)):
        section = stages_study_section(found, [])
        (fig,) = [i for i in section.items if isinstance(i, go.Figure)]
        names = [t.name for t in fig.data]
        assert ("LLC of cpu-1l (control)" in names) is drawn, names


def test_the_llc_across_the_phase_change_reads_the_checkpoints_either_side():
    values = {100: 6.0, 300: 10.5, 350: 27.3, 500: 30.0}
    checkpoints = [_checkpoint(step, v, v - 1, v + 1) for step, v in values.items()]
    s = _stages(350, (300, 350), 350, inside=False, checkpoints=checkpoints)
    said = stage_sentence(s)
    assert (
        "across it (kept steps 300 -> 350) the LLC goes 10.5 [9.5, 11.5] -> 27.3 [26.3, 28.3]"
        in said
    )
    assert "the LLC changes by +16.8 (seed 0)." in coincide_sentence([s])
    # a checkpoint not read (its interval below 0) is skipped: the one before it is used
    checkpoints[1] = _checkpoint(300, -2.0, -3.0, -1.0)
    s = _stages(350, (300, 350), 350, inside=False, checkpoints=checkpoints)
    assert "(kept steps 100 -> 350) the LLC goes 6 [5, 7] -> 27.3" in stage_sentence(s)
    # no phase change, or the phase change's step not kept: nothing to read
    assert _stages(None, (300, 350), 350, inside=False).llc_across_phase() is None
    assert _stages(360, (300, 350), 350, inside=False).llc_across_phase() is None
