"""An SAE's pages, model in, HTML out: ``index.html`` (metrics, the density histogram, every live
latent with its computed description) and ``features.html`` (the top contexts of the latents
shown, coloured by their activations), plus the JSON of both (``features.json``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Int
from transformer_lens import TransformerBridge

from interp_toolkit.files.io import write_json, write_text
from interp_toolkit.files.serialize import Jsonable
from interp_toolkit.reports.neurons import context_windows
from interp_toolkit.saes.evaluate import SAEEvals
from interp_toolkit.saes.features import LatentFeatures, LatentRecord, labeller, latent_activations
from interp_toolkit.saes.pipeline import SAEResult
from interp_toolkit.saes.sae import SparseAutoencoder
from interp_toolkit.text.codecs import Codec
from interp_toolkit.units.reading import RuleCount, rule_text
from interp_toolkit.views.features import (
    context_view,
    density_histogram,
    family_columns,
    latent_table,
)
from interp_toolkit.views.page import Section, render_report, table, text

RULE = "monosemantic: " + rule_text("latent")


def shown_latents(feats: LatentFeatures, show: int) -> list[int]:
    """The ``show`` latents a page draws: monosemantic first, then by concept share, density."""
    order = sorted(
        (i for i in range(feats.n_latents) if not feats.concepts[i].dead),
        key=lambda i: (
            -feats.concepts[i].monosemantic,
            -feats.concepts[i].share,
            -float(feats.density[i]),
        ),
    )
    return order[:show]


@dataclass(frozen=True)
class FeatureReport(Jsonable):
    """features.json: the rule, the counts, the metrics and every latent's data
    (:meth:`from_dict` reads one back)."""

    hook: str
    rule: str
    monosemantic: RuleCount
    monosemantic_shuffled: RuleCount | None
    heads: list[str] | None
    evals: SAEEvals
    latents: list[LatentRecord]


def index_page(report: FeatureReport, *, title: str, subtitle: str = "") -> str:
    """Metrics, the density histogram, and every live latent by density."""
    live = sorted((d for d in report.latents if not d.concept.dead), key=lambda d: -d.density)
    hist = report.evals.density_histogram
    counts, shuffled = report.monosemantic, report.monosemantic_shuffled
    intro = (
        f"{counts.monosemantic} of {counts.live} live latents are monosemantic ({RULE}); "
        f"{counts.dead} never fire on the evaluation tokens."
    )
    if shuffled is not None:
        intro += (
            f" Shuffled-activation control (each latent's top values on random positions): "
            f"{shuffled.monosemantic} of {shuffled.live}."
        )
    assert hist is not None  # the pooled rows' evals have one
    return render_report(
        [
            Section("Metrics", [table(*family_columns(report.evals), cls="kv")]),
            Section("Feature density", [density_histogram(hist.log10_density, hist.latents)]),
            Section("Latents", [text(intro), latent_table(live, report.heads)]),
        ],
        title=title,
        subtitle=subtitle,
    )


def features_page(
    model: TransformerBridge,
    codec: Codec,
    sae: SparseAutoencoder,
    feats: LatentFeatures,
    tokens: Int[torch.Tensor, "n pos"],
    latents: Sequence[int],
    *,
    title: str,
    contexts: int = 4,
) -> str:
    """The top ``contexts`` contexts of each of ``latents``, coloured by every shown latent's
    activation (a circuitsvis drop-down), and a table of what each promotes."""
    label = labeller(codec)
    idx = torch.tensor(list(latents), dtype=torch.long)

    def acts(rows: list[int]) -> torch.Tensor:
        return latent_activations(model, sae, tokens[rows])[..., idx]

    ctx_tokens, ctx_acts = context_windows(codec, tokens, feats.top, latents, contexts, acts)
    ranked = (feats.promoted, feats.suppressed)
    table_rows = [
        [i, feats.descriptions[i], *(", ".join(map(label, t[i, :6].tolist())) for t in ranked)]
        for i in latents
    ]
    items: list[Any] = [table(["latent", "description", "promotes", "suppresses"], table_rows)]
    if ctx_tokens:
        items.append(context_view(ctx_tokens, ctx_acts, latents))
    return render_report(
        [
            Section(
                "Top contexts",
                items,
                intro="The top contexts of every latent shown (held-out rows), coloured by the "
                "activation of the latent picked in the drop-down.",
            )
        ],
        title=title,
    )


def write_pages(
    result: SAEResult, model: TransformerBridge, codec: Codec, *, show: int = 24, title: str
) -> FeatureReport:
    """features.json, index.html and features.html in the SAE folder; returns features.json's
    record."""
    hook, feats, label = result.sae.cfg.hook_name, result.features, labeller(codec)
    heads = [f"{result.sae.cfg.hook_layer}.{h}" for h in range(int(model.cfg.n_heads))]
    heads = heads if hook.endswith("attn.hook_z") else None
    mono, shuffled = RuleCount.of(feats.concepts), RuleCount.of(feats.shuffled)
    latents = [feats.latent(i, label) for i in range(feats.n_latents)]
    report = FeatureReport(hook, RULE, mono, shuffled, heads, result.metrics.evals(), latents)
    paths = result.paths
    write_json(paths.features, report.to_dict())
    sub = (
        f"{result.sae.cfg.arch}, {result.sae.cfg.d_sae} latents over {result.sae.cfg.d_in} "
        f"dimensions; trained on {result.trained.tokens:,} activations ({result.source.setting}, "
        f"{result.source.corpus}); measured on {result.metrics.n_tokens:,} held-out tokens. "
        f"Top contexts: {paths.pages.name}."
    )
    write_text(paths.index, index_page(report, title=title, subtitle=sub))
    latents = shown_latents(result.features, show)
    page = features_page(
        model, codec, result.sae, result.features, result.heldout, latents, title=title
    )
    write_text(paths.pages, page)
    return report
