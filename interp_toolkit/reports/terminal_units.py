"""What the terminal shows of a circuit, a probe, a layer's neurons, an SAE and a run's stages:
rendered from their typed results (what ``--json`` writes of them), returned as rich
renderables for the CLI to print (:mod:`.terminal`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.table import Table
from rich.text import Text

from interp_toolkit.reports.terminal import Shown, csv_text

if TYPE_CHECKING:  # torch, which these modules import, is not needed to draw a table
    from interp_toolkit.causal.circuit import Circuit
    from interp_toolkit.development.curve import Stages
    from interp_toolkit.probing.probes import ProbeResult, ProbeRow
    from interp_toolkit.saes.evaluate import SAEEvals
    from interp_toolkit.units.neurons import LayerNeurons
    from interp_toolkit.units.reading import RuleCount

#: The probe table's columns: (header, :class:`~.probing.probes.ProbeRow` field, its interval's).
PROBE_COLUMNS = (
    ("boundary", "boundary", None),
    ("balanced acc", "balanced", "balanced_ci"),
    ("control", "control", "control_ci"),
    ("selectivity", "selectivity", "selectivity_ci"),
    ("untrained", "untrained", "untrained_ci"),
    ("chance", "chance", None),
    ("decodable", "decodable", None),
    ("beyond untrained", "beyond_untrained", None),
)


def circuit_view(target: str, found: Circuit, notes: list[str]) -> Shown:
    """The gap, the circuit's edges and faithfulness (held out too), and the top-k curve (the
    numbers as the JSON rounds them)."""
    from interp_toolkit.causal.circuit import HELDOUT_INTERVAL

    gap = found.gap
    shown: Shown = [
        f"{target}, task {found.task} ({found.n_prompts} pairs): clean "
        f"{round(found.clean, 4):.3f}, corrupt {round(found.corrupt, 4):.3f}, gap "
        f"{gap.value:.3f} [{gap.low:.3f}, {gap.high:.3f}]; {found.method}, {found.total_edges} edges",
        *(f"note: {note}." for note in notes),
    ]
    if not found.edges or found.faithfulness is None:
        return [*shown, f"no circuit: {found.reason}"]
    table = Table(
        title=f"circuit: {len(found.edges)} edges recover {round(found.faithfulness, 4):.1%} of "
        f"the gap (top {found.top_k}{', pruned' if found.pruned else ''})"
    )
    for col in ("source", "target", "input", "score"):
        table.add_column(col, justify="right" if col == "score" else "left")
    for e in found.edges:
        table.add_row(*e.edge.key(), f"{round(e.score, 6):.4g}")
    shown.append(table)
    held = found.heldout
    if held is not None:
        shown.append(
            f"held out: on {found.heldout_prompts} prompts of the task drawn again (seed "
            f"{found.heldout_seed}) the circuit recovers {held.value:.1%} [{held.low:.1%}, "
            f"{held.high:.1%}] of the gap ({HELDOUT_INTERVAL})"
        )
    curve = ", ".join(f"{k}: {round(f, 4):.2f}" for k, f in found.curve)
    return [*shown, f"faithfulness of the top-k edges: {curve}"]


def probe_csv(result: ProbeResult) -> str:
    """One row per boundary, the same field names as the JSON rows (an interval ``x_ci`` as
    ``x_lo`` and ``x_hi``)."""

    def flat(row: ProbeRow) -> dict[str, Any]:
        out: dict[str, Any] = {"feature": result.feature}
        for key, value in row.to_dict().items():
            if key.endswith("_ci"):
                out[f"{key[:-3]}_lo"], out[f"{key[:-3]}_hi"] = value or (None, None)
            else:
                out[key] = value
        return out

    return csv_text([flat(r) for r in result.rows])


def _cell(row: ProbeRow, key: str, ci_key: str | None) -> str:
    value = getattr(row, key)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "-"
    if not isinstance(value, float):
        return str(value)
    ci = getattr(row, ci_key) if ci_key else None
    return f"{value:.3f}" + (f"\n[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def probe_view(target: str, res: ProbeResult) -> Shown:
    """Balanced accuracy, control, selectivity and the untrained model per boundary, with the
    definitions below."""
    info, method = res.data, res.method
    ablated = f"; ablated {', '.join(res.ablated)}" if res.ablated else ""
    table = Table(
        title=f"{target}: {res.feature} ({info.source}, {info.n_rows} rows x "
        f"{info.seq_len}{ablated}); balanced accuracy on held-out rows, 95% intervals"
    )
    for header, *_ in PROBE_COLUMNS:
        table.add_column(header, justify="left" if header == "boundary" else "right")
    for row in res.rows:
        table.add_row(*(_cell(row, key, ci) for _, key, ci in PROBE_COLUMNS))
    untrained = (
        f"Untrained: {method['untrained']} (seed {info.untrained_seed})."
        if isinstance(info.untrained_seed, int)
        else "Untrained: not measured (this model cannot be rebuilt)."
    )
    return [
        table,
        f"{res.feature}: {res.definition}; its input: {res.input}. Probe: {method['probe']}. "
        f"Control: {method['control']}. Selectivity: {method['selectivity']}. {untrained} "
        f"Decodable: {method['decodable']}. Held-out rows: {info.test_fraction:.0%}.",
    ]


def neurons_view(
    target: str, info: LayerNeurons, labels: Mapping[int, str], shown: Sequence[int], finding: str
) -> Shown:
    """The ``shown`` neurons' table (:func:`~.views.neurons.neuron_rows`, tokens as ``labels``
    names them), the layer's ``finding`` and the definitions."""
    from interp_toolkit.units.neurons import DEFINITION
    from interp_toolkit.views.neurons import NEURON_HEADER, neuron_rows

    rule = info.model.rule
    table = Table(
        title=f"{target} layer {info.layer}: {info.n_neurons} neurons; "
        f"{rule.monosemantic} monosemantic, {rule.dead} dead"
    )
    for col in NEURON_HEADER:
        table.add_column(col)
    for row in neuron_rows(info, labels, shown):
        table.add_row(*(escape(str(c)) for c in row))
    return [
        table,
        Text(finding),
        Text(
            f"monosemantic: {DEFINITION['monosemantic']} (k = {info.k}). promotes: "
            f"{DEFINITION['promoted']}."
        ),
    ]


def sae_view(
    target: str, hook: str, setting: str, evals: SAEEvals, rule: RuleCount, shuffled: RuleCount
) -> Shown:
    """SAELens's metrics by family, and the monosemantic latents (``rule``; ``shuffled``: under
    the shuffled-activation control)."""
    from interp_toolkit.views.features import family_columns

    t = Table(title=f"SAE {target} {hook} ({setting})")
    header, rows = family_columns(evals)
    for name in header:
        t.add_column(name)
    for row in rows:
        t.add_row(*(str(v) for v in row))
    blank = [""] * (len(header) - 2)
    for label, mono in (
        ("monosemantic latents", rule),
        ("monosemantic, shuffled control", shuffled),
    ):
        t.add_row(label, f"{mono.monosemantic} of {mono.live}", *blank)
    return [t]


def stages_view(found: Stages) -> Shown:
    """The LLC at every checkpoint (boundaries starred), the rule, each stage's description and
    where the induction phase change falls."""
    from interp_toolkit.development.llc import rounded

    def _f(x: float) -> str:  # as stages.json holds it
        return "-" if (v := rounded(x)) is None else f"{v:.3g}"

    c, s = found.curve, found.curve.settings
    table = Table(
        title=f"{c.run}: LLC at {len(c.steps)} kept checkpoints (SGLD ε {s.step_size:g}, γ "
        f"{s.gamma:g}, nβ {c.estimates[0].nbeta:.3g}, {s.chains} chains x {s.draws} draws after "
        f"{s.burn_in} burn-in)"
    )
    for col in ("step", "LLC", "interval", "init loss", "R-hat", "max |drift|"):
        table.add_column(col, justify="right")
    bounds = {b.step for b in found.boundaries}
    for step, e in zip(c.steps, c.estimates, strict=True):
        drift = [abs(d) for d in rounded(e.drift) if d is not None]
        table.add_row(
            f"{step}{' *' if step in bounds else ''}",
            _f(e.llc) + (" (below 0)" if e.below_zero else ""),
            f"{_f(e.low)} - {_f(e.high)}",
            _f(e.init_loss),
            _f(e.r_hat),
            _f(max(drift)) if drift else "-",
        )
    rule = found.rule
    shown: Shown = [
        table,
        f"settings: {c.settings_source}.",
        f"batches: {c.batches['source']}.",
        f"rule: {rule.boundary} (* above).",
    ]
    if rule.not_read_steps:
        steps = ", ".join(map(str, rule.not_read_steps))
        shown.append(f"not read (below 0) at steps {steps}: {rule.not_read}.")
    shown += [f"stage {st.stage} (steps {st.start}-{st.end}): {st.summary}" for st in found.stages]
    pc = found.phase_change
    if rise := pc.steepest_rise:
        shown.append(
            f"steepest LLC rise: steps {rise.start}-{rise.end} ({rise.llc[0]:.3g} -> "
            f"{rise.llc[1]:.3g})."
        )
    if pc.phase_change_step is None:
        shown.append("no induction phase change logged (no scored step above the floor).")
    elif pc.inside is None or pc.nearest is None:
        shown.append(f"induction phase change at step {pc.phase_change_step}; no boundary found.")
    else:
        near, where = pc.nearest, "inside" if pc.inside else "outside"
        shown.append(
            f"induction phase change at step {pc.phase_change_step}: {where} a boundary's "
            f"interval (nearest boundary step {near.step}, interval {near.interval}); "
            f"{'in' if pc.in_steepest_rise else 'not in'} the steepest LLC rise."
        )
    return shown
