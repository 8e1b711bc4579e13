"""The sentences about what each layer knows (probes) and about the MLP twins (induction beside
MLPs, neurons and SAE latents against their baselines), as pure functions of measurements.

:class:`ProbeMeasurement` is the previous-token probe of one study model (and the same probe with
its layer-0 previous-token heads mean-ablated); :class:`NeuronMeasurement` the neurons of one MLP
model, each statistic beside its untrained twin's and a shuffled-activation control's, and the
latents of SAEs on its MLP layers (:class:`LatentCount`). A neuron or latent claim is stated only
when it beats its baselines (:func:`~interp_toolkit.units.reading.beats`). Thresholds come from
:mod:`interp_toolkit.causal.routes` (``decodable``, ``induction``, ``exam_lower_bound``); change a
number and the sentence changes.
"""

from __future__ import annotations

from collections.abc import Sequence

from interp_toolkit.measures.depth import DepthMeasurement
from interp_toolkit.measures.layers import (
    LatentCount,
    NeuronMeasurement,
    ProbeMeasurement,
    is_decodable,
)
from interp_toolkit.models.build import ModelConfig
from interp_toolkit.probing.probes import ProbeRow
from interp_toolkit.reports.findings import exam_phrase, layers_phrase, pct, route_phrase
from interp_toolkit.stats.thresholds import THRESHOLDS, Thresholds
from interp_toolkit.units.neurons import LayerNeurons
from interp_toolkit.units.reading import MONO_LIFT, MONO_SHARE, RuleCount, beats


def _where(row: ProbeRow) -> str:
    return "in the embedding" if row.boundary == "embed" else f"after {row.boundary}"


def _ci(value: float, ci: tuple[float, float] | None) -> str:
    return f"{value:.3f}" + ("" if ci is None else f" [{ci[0]:.3f}, {ci[1]:.3f}]")


def _with_baseline(row: ProbeRow) -> str:
    untrained = (
        "untrained model not measured"
        if row.untrained is None
        else f"untrained {_ci(row.untrained, row.untrained_ci)}"
    )
    return f"{_ci(row.balanced, row.balanced_ci)}; {untrained}"


def probe_sentence(m: ProbeMeasurement, t: Thresholds = THRESHOLDS) -> str:
    """Where the previous token becomes decodable beyond an untrained model of the same
    architecture, and what ablating its heads leaves. Balanced accuracies with 95% intervals."""
    rows = m.result.rows
    embed = rows[0]
    first = next((r for r in rows if is_decodable(r, t)), None)
    s = f"{m.name}: the previous token (on repeated random tokens; balanced accuracy) "
    if first is None:
        best = max(rows, key=lambda r: r.balanced)
        s += (
            f"is decodable beyond an untrained model of the same architecture at no layer "
            f"boundary (best {_where(best)}: {_with_baseline(best)})"
        )
    else:
        s += "is " if is_decodable(embed, t) else "is not "
        s += f"decodable beyond the untrained model in the embedding ({_with_baseline(embed)})"
        if first is not embed:
            s += f" and first is {_where(first)} ({_with_baseline(first)})"
    if m.ablated is not None:
        heads = ", ".join(m.ablated.ablated)
        still = [r for r in m.ablated.rows if is_decodable(r, t)]
        at = first or max(rows, key=lambda r: r.balanced)
        row = m.ablated.row(at.boundary)
        s += (
            f"; with previous-token head{'s' if len(m.ablated.ablated) > 1 else ''} {heads} "
            f"mean-ablated it is {_ci(row.balanced, row.balanced_ci)} {_where(at)} and "
        )
        s += (
            "decodable beyond the untrained model at no boundary"
            if not still
            else f"still decodable beyond it {', '.join(_where(r) for r in still)}"
        )
    elif first is not None and m.n_layers > 1:
        s += "; no layer-0 head has the previous-token role, so none was ablated"
    return s + (
        f" (chance {embed.chance:.3g}; decodable: the lower 95% bound ≥ chance + "
        f"{t.decodable:g} × (1 − chance) and above the untrained model's upper bound)."
    )


def _count(c: RuleCount) -> str:
    return f"{c.monosemantic} of {c.live} live ({pct(c.share)})"


def neuron_sentence(name: str, info: LayerNeurons) -> str:
    """The neurons' monosemantic share beside the untrained twin's and the shuffled control's;
    a claim only when it beats both (one-sided two-proportion test, p <= BEATS_ALPHA)."""
    model = info.model.rule
    shuffled = info.stats["shuffled"].rule
    untrained = info.stats["untrained"].rule if "untrained" in info.stats else None
    k = int(info.top.values.shape[1])
    base = f"untrained twin {_count(untrained)}, " if untrained else ""
    base += f"shuffled activations {_count(shuffled)}"
    s = f"{name} layer {info.layer}: "
    if beats(model, shuffled) and untrained is not None and beats(model, untrained):
        s += (
            f"{_count(model)} neurons are monosemantic (one concept at ≥ {MONO_SHARE:.0%} of "
            f"their top {k} positions, ≥ {MONO_LIFT:g}x its base rate), more than the baselines "
            f"({base})"
        )
    else:
        loser = "the untrained twin" if untrained is None or not beats(model, untrained) else ""
        loser = loser or "shuffled activations"
        s += (
            f"the share of monosemantic neurons, {_count(model)}, does not beat {loser} "
            f"({base}), so no claim about these neurons is made"
        )
    old = [info.stats[n].summary().token_groups for n in ("model", "untrained") if n in info.stats]
    if len(old) == 2:
        s += (
            f"; the withdrawn polysemanticity count gave {old[0].two_or_more} neurons 2+ token "
            f"groups, the untrained twin {old[1].two_or_more}"
        )
    return s + "."


def latent_sentence(name: str, info: LayerNeurons, sae: LatentCount) -> str:
    """Neurons against SAE latents by the same rule, each beside its untrained-twin figure."""
    neurons = info.model.rule
    untrained = info.stats["untrained"].rule if "untrained" in info.stats else None
    s = (
        f"{name} layer {info.layer}, neurons against the {sae.d_sae} latents of an SAE trained on "
        f"them ({sae.tokens:,} activations): {_count(neurons)} neurons"
    )
    s += f" (untrained twin {_count(untrained)})" if untrained else ""
    s += f" and {_count(sae.model)} latents"
    s += f" (the same SAE on the untrained twin {_count(sae.untrained)})" if sae.untrained else ""
    s += f" (shuffled control {_count(sae.shuffled)})" if sae.shuffled else ""
    s += " are monosemantic; "
    if beats(sae.model, neurons) and (sae.untrained is None or beats(sae.model, sae.untrained)):
        s += "the latents beat the neurons and the untrained twin's latents"
    elif not beats(sae.model, neurons):
        s += "the latents do not beat the neurons"
    else:
        s += "the latents do not beat the untrained twin's latents"
    if (e := sae.evals) is not None:  # CE loss recovered, explained variance; per row family too
        s += (
            f"; the SAE recovers CE loss / explains variance {e.ce_loss_score:.3f} / "
            f"{e.explained_variance:.3f} over all held-out rows"
        )
        fam = [
            f"{k} rows {v.ce_loss_score:.3f} / {v.explained_variance:.3f}"
            for k, v in e.by_family.items()
        ]
        s += f" ({', '.join(fam)})" if len(fam) > 1 else ""
    return s + "."


def block_phrase(cfg: ModelConfig) -> str:
    """What an MLP model's blocks hold, from its config: 'an MLP of 512 GELU neurons and
    pre-norm LayerNorm'."""
    norm = {"LN": " and pre-norm LayerNorm"}.get(str(cfg.normalization), "")
    return f"an MLP of {cfg.mlp_width} {cfg.act_fn.upper()} neurons{norm}"


def mlp_sentence(
    mlp: DepthMeasurement, twin: DepthMeasurement | None, t: Thresholds = THRESHOLDS
) -> str:
    """One MLP model against its attention-only twin (same data, seed and optimiser)."""
    s = f"{layers_phrase(mlp.n_layers)} with MLPs ({mlp.name}): "
    if mlp.induction_heads:
        many = len(mlp.induction_heads) > 1
        s += f"induction head{'s' if many else ''} {', '.join(mlp.induction_heads)}"
    else:
        s += f"no induction head (best head {mlp.top_head} scores {mlp.top_score:.2f})"
    if twin is not None:
        s += f" (attention-only twin: {', '.join(twin.induction_heads) or 'none'})"
    if mlp.induction_step is None:
        s += f"; no head's induction score passed {t.induction:g} in {mlp.steps} steps"
    else:
        s += f"; a head's induction score first passed {t.induction:g} at step {mlp.induction_step}"
        if twin is not None and twin.induction_step is not None:
            diff = mlp.induction_step - twin.induction_step
            when = (
                "the same step as"
                if diff == 0
                else (f"{abs(diff)} steps {'later' if diff > 0 else 'earlier'} than")
            )
            s += f", {when} attention-only (step {twin.induction_step})"
        elif twin is not None:
            s += f" (attention-only: never in {twin.steps} steps)"
    s += f"; the period exam {exam_phrase(mlp.period_exams, t)}"
    if mlp.n_layers > 1:
        s += f"; {route_phrase(mlp.route, t)}"
    if twin is not None and mlp.val_loss is not None and twin.val_loss is not None:
        s += f"; held-out loss {mlp.val_loss:.3f} (attention-only {twin.val_loss:.3f})"
    return s + "."


def mlp_findings(
    pairs: Sequence[tuple[DepthMeasurement, DepthMeasurement | None]],
    neurons: Sequence[NeuronMeasurement],
    t: Thresholds = THRESHOLDS,
) -> list[str]:
    """The MLP section's sentences: each MLP model against its twin, then its neurons (and their
    SAE latents, when measured)."""
    lines = [mlp_sentence(mlp, twin, t) for mlp, twin in pairs]
    for n in neurons:
        saes = {c.layer: c for c in n.latents}
        for info in n.layers:
            lines.append(neuron_sentence(n.name, info))
            if info.layer in saes:
                lines.append(latent_sentence(n.name, info, saes[info.layer]))
    return lines
