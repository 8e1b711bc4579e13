"""The residual-stream graph of a model, and exact interventions on its edges.

**Writers** add a vector to the residual stream: the token embedding (``embed``, at
``hook_embed``), every head (its ``hook_z @ W_O``) and every MLP (``hook_mlp_out``). **Readers**
take it in: each head's Q, K and V input separately (TransformerLens's per-head fork,
``hook_{q,k,v}_input``; :mod:`.fork` supplies it on native models), every MLP's input
(``hook_mlp_in``) and the logits (the final ``hook_resid_post``). An **edge** joins a writer to a
reader that comes after it; the residual a reader sees is the sum of its writers' outputs (plus
the positional embedding and biases, the same in every run of a task). TransformerLens 4.3's
``attribution_patching`` uses the same nodes (``embed``/``attn_head_out``/``mlp_out`` ->
``q_input``/``k_input``/``v_input``/``mlp_in``/``logits``), one per position; here positions are
a tensor axis.

:func:`run` is the one forward every measurement uses: it records each writer's live output and
lets a callback add a tensor to each reader group's input (one layer's Q inputs of every head,
say). Ablating an edge from the corrupt prompts adds ``corrupt write - live write`` to its
reader's input alone (:func:`ablation_adder`): TL's ``faithfulness`` and direct path patching do
the same, one position and one reader at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property, lru_cache, partial
from typing import Any

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor
from transformer_lens import TransformerBridge

from interp_toolkit.causal.fork import mlp_input_fork, qkv_fork
from interp_toolkit.heads.registry import HeadId

QKV = ("q", "k", "v")


@dataclass(frozen=True)
class Node:
    """A writer (``embed``, ``head``, ``mlp``) or a reader (``q``, ``k``, ``v``, ``mlp``,
    ``logits``); ``label`` is what JSON and pages print: ``embed``, ``1.0``, ``mlp1``, ``logits``."""

    kind: str
    layer: int = -1
    head: int = -1

    @property
    def label(self) -> str:
        if self.kind in ("embed", "logits"):
            return self.kind
        if self.head >= 0:
            return str(HeadId(self.layer, self.head))
        return f"mlp{self.layer}"


@dataclass(frozen=True)
class Edge:
    """A writer -> reader edge: ``source`` (``0.0``, ``embed``), ``target`` (``1.0``,
    ``logits``) and ``input`` (``q``, ``k``, ``v``, ``mlp`` or ``logits``)."""

    source: Node
    target: Node

    @property
    def input(self) -> str:
        return self.target.kind

    def key(self) -> tuple[str, str, str]:
        return (self.source.label, self.target.label, self.input)

    def __str__(self) -> str:
        suffix = "" if self.input in ("logits", "mlp") else f" ({self.input})"
        return f"{self.source.label} -> {self.target.label}{suffix}"


@dataclass(frozen=True)
class ReaderGroup:
    """The readers one hook feeds: one layer's Q (K, V) inputs of every head, an MLP's input or
    the logits; ``readers``: their indices in :attr:`Graph.readers`; ``n_writers``: the writers
    before them (a prefix of :attr:`Graph.writers`)."""

    layer: int
    kind: str
    hook: str
    readers: tuple[int, ...]
    n_writers: int

    @property
    def per_head(self) -> bool:
        return self.kind in QKV


@dataclass(frozen=True)
class Graph:
    """Every writer, reader and edge of a model with ``n_layers`` x ``n_heads`` (MLPs when
    ``has_mlp``; ``parallel``: the MLP reads the layer input, as in GPT-J)."""

    n_layers: int
    n_heads: int
    has_mlp: bool = False
    parallel: bool = False

    @cached_property
    def writers(self) -> tuple[Node, ...]:
        out = [Node("embed")]
        for layer in range(self.n_layers):
            out += [Node("head", layer, h) for h in range(self.n_heads)]
            if self.has_mlp:
                out.append(Node("mlp", layer))
        return tuple(out)

    @cached_property
    def groups(self) -> tuple[ReaderGroup, ...]:
        groups, n_readers = [], 0
        per_layer = self.n_heads + int(self.has_mlp)
        for layer in range(self.n_layers):
            before = 1 + layer * per_layer
            for kind in QKV:
                idx = tuple(range(n_readers, n_readers + self.n_heads))
                hook = f"blocks.{layer}.attn.hook_{kind}_input"
                groups.append(ReaderGroup(layer, kind, hook, idx, before))
                n_readers += self.n_heads
            if self.has_mlp:
                seen = before if self.parallel else before + self.n_heads
                groups.append(
                    ReaderGroup(layer, "mlp", f"blocks.{layer}.hook_mlp_in", (n_readers,), seen)
                )
                n_readers += 1
        last = f"blocks.{self.n_layers - 1}.hook_resid_post"
        groups.append(ReaderGroup(self.n_layers, "logits", last, (n_readers,), len(self.writers)))
        return tuple(groups)

    @cached_property
    def readers(self) -> tuple[Node, ...]:
        out = []
        for g in self.groups:
            if g.per_head:
                out += [Node(g.kind, g.layer, h) for h in range(self.n_heads)]
            else:
                out.append(Node(g.kind, g.layer if g.kind == "mlp" else -1))
        return tuple(out)

    @cached_property
    def allowed(self) -> Bool[Tensor, "writer reader"]:
        mask = torch.zeros(len(self.writers), len(self.readers), dtype=torch.bool)
        for g in self.groups:
            mask[: g.n_writers, list(g.readers)] = True
        return mask

    @cached_property
    def edges(self) -> tuple[Edge, ...]:
        """Every edge, in (writer, reader) index order (:meth:`index` inverts it)."""
        w, r = self.allowed.nonzero(as_tuple=True)
        return tuple(
            Edge(self.writers[i], self.readers[j])
            for i, j in zip(w.tolist(), r.tolist(), strict=True)
        )

    @cached_property
    def edge_index(self) -> Int[Tensor, "edge 2"]:
        return self.allowed.nonzero()

    @cached_property
    def _position(self) -> tuple[dict[Node, int], dict[Node, int]]:
        return (
            {n: i for i, n in enumerate(self.writers)},
            {n: i for i, n in enumerate(self.readers)},
        )

    def index(self, edge: Edge) -> tuple[int, int]:
        w, r = self._position
        return w[edge.source], r[edge.target]

    def find(self, source: str, target: str, input: str) -> Edge:
        """The edge ``source -> target`` into ``input`` by labels (``"0.0", "1.0", "k"``)."""
        for e in self.edges:
            if e.key() == (source, target, input):
                return e
        raise KeyError(f"no edge {source} -> {target} ({input}) in this graph")

    def mask(self, edges: Sequence[Edge]) -> Bool[Tensor, "writer reader"]:
        """``[writer, reader]`` True at ``edges``."""
        out = torch.zeros_like(self.allowed)
        for e in edges:
            out[self.index(e)] = True
        return out


def graph_of(model: TransformerBridge) -> Graph:
    """The graph of ``model`` (one K/V head per query head: :func:`.fork.per_query_kv` first)."""
    cfg = model.cfg
    n_kv = getattr(cfg, "n_key_value_heads", None)
    if n_kv and int(n_kv) != int(cfg.n_heads):
        raise ValueError("grouped-query attention: read the model through fork.per_query_kv")
    has_mlp = not bool(getattr(cfg, "attn_only", False))
    parallel = bool(getattr(cfg, "parallel_attn_mlp", False))
    return _graph(int(cfg.n_layers), int(cfg.n_heads), has_mlp, parallel)


@lru_cache(maxsize=16)
def _graph(n_layers: int, n_heads: int, has_mlp: bool, parallel: bool) -> Graph:
    """One :class:`Graph` per shape (its node lists and masks are computed once)."""
    return Graph(n_layers, n_heads, has_mlp, parallel)


@contextmanager
def graph_hooks_on(model: TransformerBridge, graph: Graph) -> Iterator[None]:
    """The fork (per-head Q/K/V inputs) and, with MLPs, ``hook_mlp_in``, on for the duration
    (:mod:`.fork`: on every architecture)."""
    saved_mlp_in = bool(getattr(model.cfg, "use_hook_mlp_in", False))
    with qkv_fork(model), mlp_input_fork(model):
        try:
            if graph.has_mlp and not saved_mlp_in:
                model.set_use_hook_mlp_in(True)
            yield
        finally:
            if graph.has_mlp and not saved_mlp_in:
                model.set_use_hook_mlp_in(False)


def post_attention_scales(model: TransformerBridge) -> dict[int, Float[Tensor, " d_model"]]:
    """Per layer with a norm after its attention (Gemma 2's ``ln1_post``), that norm's weight:
    a head's residual write there is ``z W_O * weight / scale``, the norm's per-position scale
    taken from the live run (``hook_scale``), so the heads' writes still sum to the layer's
    output."""
    out = {}
    for layer, block in enumerate(model.blocks):
        norm = (getattr(block, "submodules", None) or {}).get("ln1_post")
        if norm is None:
            continue
        weight = norm.weight.detach().float()
        out[layer] = 1.0 + weight if getattr(norm, "uses_weight_offset", False) else weight
    return out


def head_outputs_weight(model: TransformerBridge) -> list[Float[Tensor, "head d_head d_model"]]:
    """Every layer's ``W_O`` ([head, d_head, d_model]), detached."""
    with torch.no_grad():
        return [
            model.blocks[layer].attn.W_O.detach().float() for layer in range(model.cfg.n_layers)
        ]


#: ``add(group, live)`` -> the tensor to add to the group's input (``[batch, pos, head, d_model]``
#: for Q/K/V groups, ``[batch, pos, d_model]`` otherwise), or None; ``live`` holds the writers'
#: outputs so far in this forward (``[batch, pos, d_model]`` each, in :attr:`Graph.writers` order).
Adder = Callable[[ReaderGroup, list[Tensor]], Tensor | None]


def run(
    model: TransformerBridge,
    graph: Graph,
    tokens: Int[Tensor, "batch pos"],
    *,
    add: Adder | None = None,
    embed: Callable[[Tensor], Tensor] | None = None,
    w_o: Sequence[Tensor] | None = None,
) -> tuple[Float[Tensor, "batch pos vocab"], list[Tensor]]:
    """One forward with the writers recorded and ``add`` applied at every reader group;
    ``embed`` replaces the token embedding (for integrated gradients). Call inside
    :func:`graph_hooks_on`. Returns the logits and the writers' outputs (float32)."""
    w_o = head_outputs_weight(model) if w_o is None else w_o
    live: list[Tensor] = []
    post = post_attention_scales(model)
    pending: dict[int, Tensor] = {}

    def on_embed(x: Tensor, hook: Any) -> Tensor:
        x = embed(x) if embed is not None else x
        live.append(x.float())
        return x

    def on_z(z: Tensor, hook: Any, layer: int) -> None:
        writes = torch.einsum("bphd,hde->hbpe", z.float(), w_o[layer].to(z.device))
        if layer in post:  # rescaled by the norm after the attention first
            pending[layer] = writes
            return
        live.extend(writes.unbind(0))

    def on_scale(scale: Tensor, hook: Any, layer: int) -> None:
        writes = pending.pop(layer) * (post[layer].to(scale.device) / scale.float())
        live.extend(writes.unbind(0))

    def on_mlp(x: Tensor, hook: Any) -> None:
        live.append(x.float())

    def on_reader(x: Tensor, hook: Any, group: ReaderGroup) -> Tensor:
        delta = add(group, live[: group.n_writers]) if add is not None else None
        return x if delta is None else x + delta.to(x.dtype)

    hooks: list[tuple[str, Callable[..., Any]]] = [("hook_embed", on_embed)]
    for layer in range(graph.n_layers):
        hooks.append((f"blocks.{layer}.attn.hook_z", partial(on_z, layer=layer)))
        if layer in post:
            hooks.append((f"blocks.{layer}.ln1_post.hook_scale", partial(on_scale, layer=layer)))
        if graph.has_mlp:
            hooks.append((f"blocks.{layer}.hook_mlp_out", on_mlp))
    hooks += [(g.hook, partial(on_reader, group=g)) for g in graph.groups]
    device = next(model.parameters()).device
    with model.hooks(fwd_hooks=hooks):
        logits = model(tokens.to(device))
    if len(live) != len(graph.writers):
        raise RuntimeError(f"recorded {len(live)} writers of {len(graph.writers)}")
    return logits, live


def writer_outputs(
    model: TransformerBridge, graph: Graph, tokens: Int[Tensor, "batch pos"]
) -> Float[Tensor, "writer batch pos d_model"]:
    """Every writer's output on ``tokens`` (no intervention)."""
    with torch.no_grad(), graph_hooks_on(model, graph):
        _, live = run(model, graph, tokens)
    return torch.stack(live)


def ablation_adder(
    drops: Bool[Tensor, "replica writer reader"] | Bool[Tensor, "replica writer reader pos"],
    replacement: Float[Tensor, "writer rows pos d_model"],
) -> Adder:
    """Replace every dropped edge's writer output by ``replacement`` in its reader's input alone.
    The forward's rows are ``replicas`` copies of the prompts, replica ``i`` dropping
    ``drops[i]`` (per position when it has a position axis); ``replacement`` holds one replica's
    rows (the same for every replica).

    Each reader group sums ``replacement - output`` over the writers it drops. When a group drops
    more writers than it keeps (a circuit: every edge but a few), that sum is the sum over all
    its writers (running sums, one pass per forward) less the sum over the kept ones; either way
    only the writers that matter are stacked. Same numbers up to float summation order."""
    n = drops.shape[0]
    repl_sums = torch.cumsum(replacement, 0)  # [writer, rows, pos, d]: sums of the first k + 1
    live_sum: list[Any] = [0, None]  # writers summed so far in this forward, their sum
    stacked: list[Any] = [None, None]  # the last outputs stacked: (writers, which), the stack

    def total(live: list[Tensor], w: int) -> Tensor:
        """sum over the first ``w`` writers of replacement - output: [replica, rows, pos, d]."""
        done, acc = live_sum
        for t in live[done:w]:
            acc = t.clone() if acc is None else acc.add_(t)
        live_sum[0], live_sum[1] = w, acc
        rows, pos, dm = acc.shape
        return repl_sums[w - 1].to(acc.device)[None] - acc.view(n, rows // n, pos, dm)

    def contract(mask: Tensor, idx: list[int], live: list[Tensor], per_head: bool) -> Tensor:
        """sum over writers ``idx`` of mask x (replacement - output): [replica, rows, pos, (h,)
        d]. A matrix product per replica over the stacked outputs (no [writer, ...] difference
        is built); a per-position mask takes an einsum."""
        rows, pos, dm = live[0].shape
        b, device = rows // n, live[0].device
        mask = mask.to(live[0].dtype).to(device)
        if not per_head:
            mask = mask[:, :, :1]  # one reader: the logits or an MLP
        repl = replacement[idx].to(device)  # [a, rows, pos, d]
        if mask.ndim == 4:  # [replica, writer, head, pos]
            diff = repl[:, None] - torch.stack([live[i] for i in idx]).view(len(idx), n, b, pos, dm)
            out = torch.einsum("anbpd,nahp->nbphd", diff, mask)
            return out if per_head else out[:, :, :, 0]
        key = (len(live), tuple(idx))  # a layer's Q, K and V groups stack the same outputs
        if stacked[0] != key:
            stacked[:] = [key, torch.stack([live[i].view(n, b * pos * dm) for i in idx], dim=1)]
        outs = stacked[1]  # [n, a, bpd]; out: [n, h, bpd]
        weights = mask.transpose(1, 2)  # [replica, head, writer]
        out = torch.baddbmm(weights @ repl.view(len(idx), -1), weights, outs, alpha=-1)
        if per_head:
            return out.view(n, -1, b, pos, dm).permute(0, 2, 3, 1, 4)
        return out.view(n, b, pos, dm)

    def add(group: ReaderGroup, live: list[Tensor]) -> Tensor | None:
        w = group.n_writers
        d = drops[:, :w][:, :, list(group.readers)]  # [replica, writer, reader(, pos)]
        if not bool(d.any()):
            return None
        others = tuple(i for i in range(d.ndim) if i != 1)
        dropped = d.any(dim=others).nonzero().flatten().tolist()
        kept = (~d).any(dim=others).nonzero().flatten().tolist()
        rows, pos, dm = live[0].shape
        shape = (rows, pos, -1, dm) if group.per_head else (rows, pos, dm)
        if len(dropped) <= len(kept) + 1:  # the full sum costs about one writer's pass
            return contract(d[:, dropped], dropped, live, group.per_head).reshape(shape)
        full = total(live, w)  # [replica, rows, pos, d]
        if group.per_head:  # every head's input
            full = full.unsqueeze(3).expand(-1, -1, -1, len(group.readers), -1)
        if kept:
            full = full - contract(~d[:, kept], kept, live, group.per_head)
        return full.reshape(shape)

    return add
