"""Attention views with circuitsvis, offline.

circuitsvis's ``str(obj)`` loads its JavaScript from a CDN; every HTML string written here uses
``obj.local_src`` instead (the whole ~1.3 MB bundle inlined, no network), with one
``attention_heads`` call per layer. :func:`interp_toolkit.views.report.render_report` inlines the
bundle once per page however many views it holds.
"""

from __future__ import annotations

import html
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp_toolkit.errors import UserError
from interp_toolkit.tokenizer import ENDOFTEXT, UNK

SPACE = "·"
NEWLINE = "↵"
TAB = "→"

HeadSpec = Sequence[int] | Sequence[tuple[int, int]] | None


def visible_token(token: str) -> str:
    """A token label with its whitespace made visible: ``' the'`` -> ``'·the'``, ``'\\n'`` -> ``'↵'``."""
    if token in (UNK, ENDOFTEXT):
        return token
    if token == "":
        return "∅"
    return token.replace(" ", SPACE).replace("\n", NEWLINE).replace("\t", TAB).replace("\r", "␍")


def token_labels(codec: Any, tokens: Sequence[int] | Tensor) -> list[str]:
    """Decoded tokens of ``tokens`` (model ids) with spaces visible; ``<unk>`` stays ``<unk>``."""
    ids = tokens.tolist() if isinstance(tokens, Tensor) else [int(t) for t in tokens]
    if codec is None:
        return [str(i) for i in ids]
    return [visible_token(s) for s in codec.str_tokens(ids)]


def prompt_tokens(
    codec: Any,
    text_or_tokens: str | Sequence[int] | Tensor,
    *,
    n_ctx: int,
    prepend_bos: bool = True,
) -> Int[Tensor, " pos"]:
    """Model ids of a prompt. Text is encoded (with BOS first unless ``prepend_bos=False``);
    token ids are taken as given. Raises UserError if empty or longer than ``n_ctx``."""
    if isinstance(text_or_tokens, str):
        if codec is None:
            raise UserError("text prompts need the model's vocabulary: pass codec=…")
        ids = list(codec.encode(text_or_tokens))
        if prepend_bos:
            ids = [int(codec.bos_id), *ids]
    elif isinstance(text_or_tokens, Tensor):
        ids = text_or_tokens.reshape(-1).tolist()
    else:
        ids = [int(t) for t in text_or_tokens]
    if not ids:
        raise UserError("the prompt is empty: give at least one token of text.")
    if len(ids) > n_ctx:
        raise UserError(
            f"the prompt is {len(ids)} tokens but the model's context is {n_ctx}: "
            f"shorten it to at most {n_ctx} tokens."
        )
    return torch.tensor(ids, dtype=torch.long)


def attention_patterns(
    model: Any, tokens: Int[Tensor, " pos"], layers: Sequence[int]
) -> dict[int, Float[Tensor, "head dest src"]]:
    """Attention patterns of the given layers on one sequence (only those hooks are cached)."""
    wanted = {f"blocks.{int(layer)}.attn.hook_pattern": int(layer) for layer in layers}
    with torch.no_grad():
        _, cache = model.run_with_cache(
            tokens.reshape(1, -1).to(_device(model)), names_filter=lambda name: name in wanted
        )
    return {layer: cache[name][0].detach().float().cpu() for name, layer in wanted.items()}


def _device(model: Any) -> torch.device:
    try:
        return next(model.parameters()).device
    except StopIteration:  # pragma: no cover
        return torch.device("cpu")


def _heads_by_layer(
    n_layers: int, n_heads: int, layer: int | None, heads: HeadSpec
) -> dict[int, list[int]]:
    """Which heads of which layers to show. ``heads`` is a list of head indices (within ``layer``, or
    within every layer) or a list of ``(layer, head)`` pairs."""
    if layer is not None and not 0 <= layer < n_layers:
        raise UserError(f"layer {layer} does not exist: the model has layers 0..{n_layers - 1}.")
    layers = [layer] if layer is not None else list(range(n_layers))
    if heads is None:
        return {ly: list(range(n_heads)) for ly in layers}
    heads = list(heads)
    if heads and isinstance(heads[0], (tuple, list)):
        out: dict[int, list[int]] = {}
        for ly, hd in heads:  # type: ignore[misc]
            ly, hd = int(ly), int(hd)
            if not (0 <= ly < n_layers and 0 <= hd < n_heads):
                raise UserError(
                    f"head L{ly}H{hd} does not exist: the model has {n_layers}x{n_heads} heads."
                )
            if layer is None or ly == layer:
                out.setdefault(ly, []).append(hd)
        return dict(sorted(out.items()))
    for hd in heads:
        if not 0 <= int(hd) < n_heads:
            raise UserError(f"head {hd} does not exist: the model has heads 0..{n_heads - 1}.")
    return {ly: [int(h) for h in heads] for ly in layers}


def attention_view(
    model: Any,
    text_or_tokens: str | Sequence[int] | Tensor,
    *,
    codec: Any,
    layer: int | None = None,
    heads: HeadSpec = None,
    prepend_bos: bool = True,
    head_labels: dict[tuple[int, int], str] | None = None,
) -> Any:
    """circuitsvis ``attention_heads`` view(s) of ``model`` on a prompt; they render inline in Jupyter.

    With ``layer`` set, returns one ``RenderedHTML``; otherwise a list, one per layer shown.
    ``heads``: head indices (in each layer shown) or ``(layer, head)`` pairs; default all heads.
    ``head_labels`` renames heads, e.g. ``{(1, 3): "1.3 induction"}``.
    """
    views = _views(
        model,
        text_or_tokens,
        codec=codec,
        layer=layer,
        heads=heads,
        prepend_bos=prepend_bos,
        head_labels=head_labels,
    )
    rendered = [v for _, v in views]
    return rendered[0] if layer is not None and len(rendered) == 1 else rendered


def _views(
    model: Any,
    text_or_tokens: str | Sequence[int] | Tensor,
    *,
    codec: Any,
    layer: int | None,
    heads: HeadSpec,
    prepend_bos: bool,
    head_labels: dict[tuple[int, int], str] | None,
) -> list[tuple[int, Any]]:
    from circuitsvis.attention import attention_heads

    cfg = model.cfg
    tokens = prompt_tokens(codec, text_or_tokens, n_ctx=int(cfg.n_ctx), prepend_bos=prepend_bos)
    plan = _heads_by_layer(int(cfg.n_layers), int(cfg.n_heads), layer, heads)
    patterns = attention_patterns(model, tokens, list(plan))
    labels = token_labels(codec, tokens)
    out = []
    for ly, hds in plan.items():
        names = [(head_labels or {}).get((ly, h), f"{ly}.{h}") for h in hds]
        out.append(
            (
                ly,
                attention_heads(
                    attention=patterns[ly][hds], tokens=labels, attention_head_names=names
                ),
            )
        )
    return out


def fix_local_src(local_src: str) -> str:
    """circuitsvis writes ``<div id=… />``, which HTML parses as an *open* div that swallows
    everything after it (and React then wipes it). Close it properly."""
    head, sep, tail = local_src.partition('style="margin: 15px 0;"/>')
    if not sep:
        return local_src
    return head + 'style="margin: 15px 0;"></div>' + tail


def attention_heads_html(
    model: Any,
    text_or_tokens: str | Sequence[int] | Tensor,
    *,
    codec: Any,
    layer: int | None = None,
    heads: HeadSpec = None,
    prepend_bos: bool = True,
    head_labels: dict[tuple[int, int], str] | None = None,
) -> str:
    """Offline HTML fragment (one circuitsvis view per layer, each with a heading) for a report.

    Every view carries its own copy of the circuitsvis bundle; ``render_report`` keeps one per page.
    """
    parts = []
    for ly, view in _views(
        model,
        text_or_tokens,
        codec=codec,
        layer=layer,
        heads=heads,
        prepend_bos=prepend_bos,
        head_labels=head_labels,
    ):
        parts.append(
            f'<div class="cv-layer"><h4>Layer {ly}</h4>{fix_local_src(view.local_src)}</div>'
        )
    return "\n".join(parts)


def save_attention_view(
    model: Any,
    text_or_tokens: str | Sequence[int] | Tensor,
    path: str | os.PathLike[str],
    *,
    codec: Any,
    layer: int | None = None,
    heads: HeadSpec = None,
    prepend_bos: bool = True,
    head_labels: dict[tuple[int, int], str] | None = None,
    title: str | None = None,
) -> Path:
    """Write a standalone, offline HTML page of the attention view(s) (atomically)."""
    from interp_toolkit.io import write_text
    from interp_toolkit.views.report import Section, render_report

    path = Path(path)
    if path.is_dir():
        raise UserError(
            f"output {path} is a folder: give a file name such as {path / 'attention.html'}."
        )
    fragment = attention_heads_html(
        model,
        text_or_tokens,
        codec=codec,
        layer=layer,
        heads=heads,
        prepend_bos=prepend_bos,
        head_labels=head_labels,
    )
    prompt = text_or_tokens if isinstance(text_or_tokens, str) else None
    intro = f"Prompt: {prompt!r}" if prompt is not None else ""
    page = render_report(
        [Section("Attention patterns", [fragment], intro=intro)],
        title=title or "Attention view",
        subtitle="Hover a head to focus it; click a token to see where it attends.",
    )
    return write_text(path, page)


def escape_label(label: str) -> str:
    """A token label safe for plotly text (which reads ``<…>`` as markup)."""
    return html.escape(label, quote=False)
