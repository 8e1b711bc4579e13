"""Attention views of a model on a prompt: patterns (analysis) rendered by circuitsvis (views).

``attention_view`` renders inline in Jupyter; ``attention_page`` makes an offline page of it (what
``interp-toolkit view`` writes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from circuitsvis.utils.render import RenderedHTML
from torch import Tensor
from transformer_lens import TransformerBridge

from interp_toolkit.heads.patterns import (
    HeadSpec,
    attention_patterns,
    heads_by_layer,
    prompt_tokens,
)
from interp_toolkit.text.codecs import Codec
from interp_toolkit.text.labels import token_labels
from interp_toolkit.views.attention import LayerViews, layer_views


def attention_view(
    model: TransformerBridge,
    text_or_tokens: str | Sequence[int] | Tensor,
    *,
    codec: Codec | None,
    layer: int | None = None,
    heads: HeadSpec = None,
    prepend_bos: bool = True,
    head_labels: Mapping[tuple[int, int], str] | None = None,
) -> LayerViews:
    """circuitsvis ``attention_heads`` views of ``model`` on a prompt, one per layer shown (all
    layers, or ``layer``); they render inline in Jupyter, and ``views[layer]`` is one layer's.
    ``heads``: head indices (in each layer shown) or ``(layer, head)`` pairs; default all heads.
    ``head_labels`` renames heads, e.g. ``{(1, 3): "1.3 induction"}``. Only the needed layers'
    patterns are computed."""
    cfg = model.cfg
    tokens = prompt_tokens(
        codec,
        text_or_tokens,
        n_ctx=int(cfg.n_ctx),
        prepend_bos=prepend_bos,
        d_vocab=int(cfg.d_vocab),
    )
    plan = heads_by_layer(int(cfg.n_layers), int(cfg.n_heads), layer, heads)
    patterns = attention_patterns(model, tokens, list(plan))
    return layer_views(patterns, plan, token_labels(codec, tokens), head_labels)


def attention_page(
    views: Mapping[int, RenderedHTML], *, title: str = "Attention view", intro: str = ""
) -> str:
    """A standalone, offline HTML page of :func:`attention_view` (what ``interp-toolkit view`` writes)."""
    return LayerViews(views).to_html(title, intro)
