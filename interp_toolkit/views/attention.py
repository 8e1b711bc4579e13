"""Attention views: attention patterns and token labels in, circuitsvis views (HTML) out.

The patterns come from :mod:`interp_toolkit.heads.patterns`; views of a model on a prompt in one
call are :mod:`interp_toolkit.reports.attention`. A view renders inline in Jupyter; in a page it
goes through :mod:`.cv` (offline, the bundle inlined once per page).
"""

from __future__ import annotations

import html
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from circuitsvis.attention import attention_heads
from circuitsvis.utils.render import RenderedHTML
from jaxtyping import Float
from torch import Tensor

from interp_toolkit.files.io import write_text
from interp_toolkit.heads.registry import HeadId
from interp_toolkit.views import cv
from interp_toolkit.views.page import Section, render_report


def escape_label(label: str) -> str:
    """A token label safe for plotly text (which reads ``<…>`` as markup)."""
    return html.escape(label, quote=False)


class LayerViews(dict[int, RenderedHTML]):
    """circuitsvis views by layer; renders inline in Jupyter as one output (each layer under a
    heading, the circuitsvis bundle inlined once, so it works offline)."""

    def _repr_html_(self) -> str:
        frag, used = cv.page_fragment(layers_html(self))
        return (f"<script>{cv.bundle()}</script>" if used else "") + frag

    def to_html(self, title: str = "Attention view", intro: str = "") -> str:
        """A standalone, offline HTML page of these views (what ``interp-toolkit view`` writes)."""
        return render_report(
            [Section("Attention patterns", [layers_html(self)], intro=intro)],
            title=title,
            subtitle="Hover a head to focus it; click a token to see where it attends.",
        )

    def save(self, path: str | os.PathLike[str], title: str = "Attention view") -> Path:
        """Write :meth:`to_html` to ``path`` (atomically, through the one writer); returns it."""
        return write_text(path, self.to_html(title))


def layer_views(
    patterns: Mapping[int, Float[Tensor, "head dest src"]],
    plan: Mapping[int, Sequence[int]],
    labels: Sequence[str],
    head_labels: Mapping[tuple[int, int], str] | None = None,
) -> LayerViews:
    """One circuitsvis ``attention_heads`` view per layer of ``plan`` (layer -> head indices),
    from that layer's patterns ``[head, dest, src]``. Heads are named ``L.H`` unless
    ``head_labels`` renames them, e.g. ``{(1, 3): "1.3 induction"}``."""
    names = dict(head_labels or {})
    return LayerViews(
        {
            layer: attention_heads(
                attention=patterns[layer][list(heads)],
                tokens=list(labels),
                attention_head_names=[names.get((layer, h), str(HeadId(layer, h))) for h in heads],
            )
            for layer, heads in plan.items()
        }
    )


def layers_html(views: Mapping[int, RenderedHTML]) -> str:
    """An HTML fragment for a page: each layer's view under a heading."""
    return "\n".join(
        f'<div class="cv-layer"><h4>Layer {layer}</h4>{cv.local_html(view)}</div>'
        for layer, view in views.items()
    )
