"""Edge attribution (EAP, EAP-IG) and exact faithfulness, on the graph of :mod:`.graph`.

**EAP** (Syed et al. 2023; TransformerLens 4.3's ``attribution_patch`` at edge granularity):
``score(w -> r) = mean over prompts of sum over positions of (a_clean[w] - a_corrupt[w]) .
d metric / d (input of r)``, the gradient taken on the corrupt run (TL's denoising sign: positive
means restoring the edge raises the metric). **EAP-IG** (Hanna et al. 2024, "EAP-IG-inputs"):
the same with the gradient averaged over ``ig_steps`` runs whose token embeddings are
``corrupt + (k / ig_steps) (clean - corrupt)``, ``k = 0 .. ig_steps - 1``; at ``ig_steps=1`` it is
EAP (a test checks it equals TL's ``attribution_patch`` summed over positions). TL 4.3 declares
EAP-IG but raises ``NotImplementedError`` for ``ig_steps > 1``.

**Faithfulness** (TL's ``faithfulness``, batched): run the clean prompts with every edge outside
the circuit fed its corrupt-run writer output, and report ``(m_circuit - m_corrupt) /
(m_clean - m_corrupt)`` on the task's metric (means over prompts). Exact, not linearised.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Bool, Float
from torch import Tensor
from transformer_lens import TransformerBridge

from interp_toolkit.causal.fork import per_query_kv
from interp_toolkit.causal.graph import (
    Edge,
    Graph,
    ReaderGroup,
    ablation_adder,
    graph_hooks_on,
    graph_of,
    head_outputs_weight,
    run,
    writer_outputs,
)
from interp_toolkit.causal.tasks import Task
from interp_toolkit.errors import UserError


def _chunks(n: int, size: int) -> list[Tensor]:
    return [torch.arange(i, min(i + size, n)) for i in range(0, n, size)]


@dataclass(frozen=True)
class EdgeScores:
    """Attribution scores of every edge of ``graph`` (``scores[writer, reader]``, 0 where no edge;
    ``per_position[writer, reader, pos]`` when asked) on ``task``, by EAP (``ig_steps`` 1) or
    EAP-IG."""

    graph: Graph
    task: str
    scores: Float[Tensor, "writer reader"]
    ig_steps: int
    per_position: Float[Tensor, "writer reader pos"] | None = None

    @property
    def method(self) -> str:
        return "EAP" if self.ig_steps == 1 else f"EAP-IG ({self.ig_steps} steps)"

    def ranked(self) -> list[tuple[Edge, float]]:
        """Every edge with its score, by |score|, largest first (ties in graph order)."""
        idx = self.graph.edge_index
        values = self.scores[idx[:, 0], idx[:, 1]]
        order = sorted(range(len(values)), key=lambda i: -abs(float(values[i])))
        return [(self.graph.edges[i], float(values[i])) for i in order]

    def ranked_positions(self) -> list[tuple[Edge, int, float]]:
        """(edge, position, score) by |score| (needs ``per_position``)."""
        if self.per_position is None:
            raise ValueError("scores were aggregated over positions: attribute(per_position=True)")
        idx = self.graph.edge_index
        values = self.per_position[idx[:, 0], idx[:, 1]]  # [edge, pos]
        flat = values.reshape(-1)
        order = sorted(range(len(flat)), key=lambda i: -abs(float(flat[i])))
        n_pos = values.shape[1]
        return [(self.graph.edges[i // n_pos], i % n_pos, float(flat[i])) for i in order]


def attribute(
    model: TransformerBridge,
    task: Task,
    *,
    ig_steps: int = 1,
    per_position: bool = False,
    batch_size: int = 16,
) -> EdgeScores:
    """Score every edge of ``model`` on ``task`` by EAP (``ig_steps=1``) or EAP-IG."""
    model = per_query_kv(model)  # GQA: one K/V head per query head
    if ig_steps < 1:
        raise UserError(f"--ig-steps {ig_steps} cannot work: use 1 (EAP) or more (EAP-IG).")
    task.check(model)
    graph = graph_of(model)
    n_w, n_r, n_pos = len(graph.writers), len(graph.readers), task.clean.shape[1]
    total = torch.zeros(n_w, n_r, n_pos)
    w_o = head_outputs_weight(model)
    for rows in _chunks(task.n_prompts, batch_size):
        part = task.rows(rows)
        clean = writer_outputs(model, graph, part.clean)
        corrupt = writer_outputs(model, graph, part.corrupt)
        delta = clean - corrupt
        grads = _mean_gradients(model, graph, part, clean[0], corrupt[0], ig_steps, w_o)
        for group, grad in zip(graph.groups, grads, strict=True):
            d = delta[: group.n_writers].to(grad.device)
            spec = "wbpd,bphd->whp" if group.per_head else "wbpd,bpd->wp"
            value = torch.einsum(spec, d, grad).cpu()
            if not group.per_head:
                value = value[:, None]
            total[: group.n_writers, list(group.readers)] += value
    total /= task.n_prompts
    total[~graph.allowed] = 0.0
    return EdgeScores(graph, task.name, total.sum(-1), ig_steps, total if per_position else None)


def _mean_gradients(
    model: TransformerBridge,
    graph: Graph,
    task: Task,
    clean_embed: Tensor,
    corrupt_embed: Tensor,
    ig_steps: int,
    w_o: list[Tensor],
) -> list[Tensor]:
    """d (sum over prompts of the metric) / d (each reader group's input), averaged over the
    ``ig_steps`` points ``corrupt + k/ig_steps (clean - corrupt)`` of the token embeddings."""
    device = next(model.parameters()).device
    sums: list[Tensor] | None = None
    for k in range(ig_steps):
        alpha = k / ig_steps
        leaves: list[Tensor] = []

        def add(group: ReaderGroup, live: list[Tensor], leaves: list[Tensor] = leaves) -> Tensor:
            b, p, d = live[0].shape
            shape = (b, p, graph.n_heads, d) if group.per_head else (b, p, d)
            leaf = torch.zeros(shape, device=live[0].device, requires_grad=True)
            leaves.append(leaf)
            return leaf

        def embed(x: Tensor, alpha: float = alpha) -> Tensor:
            if alpha == 0.0:
                return x
            mix = corrupt_embed + alpha * (clean_embed - corrupt_embed)
            return mix.to(x.device, x.dtype)

        with torch.enable_grad(), graph_hooks_on(model, graph):
            logits, _ = run(model, graph, task.corrupt.to(device), add=add, embed=embed, w_o=w_o)
            value = task.metric(logits).sum()
            grads = torch.autograd.grad(value, leaves, allow_unused=True, materialize_grads=True)
        sums = list(grads) if sums is None else [s + g for s, g in zip(sums, grads, strict=True)]
    assert sums is not None
    return [s.detach() / ig_steps for s in sums]


@dataclass(frozen=True)
class Faithfulness:
    """The metric with only the circuit's edges clean (means over prompts) and the share of
    the clean-corrupt gap it recovers."""

    n_edges: int
    circuit: float
    clean: float
    corrupt: float

    @property
    def recovered(self) -> float:
        return (self.circuit - self.corrupt) / (self.clean - self.corrupt)


@dataclass(frozen=True)
class TaskRuns:
    """A task's clean and corrupt runs on a model: per-prompt metrics and the corrupt writers."""

    clean: Float[Tensor, " batch"]
    corrupt: Float[Tensor, " batch"]
    corrupt_writers: list[Tensor]  # per chunk: [writer, batch, pos, d_model]

    @property
    def gap(self) -> float:
        return float(self.clean.mean() - self.corrupt.mean())


def task_runs(
    model: TransformerBridge, task: Task, *, batch_size: int = 16, graph: Graph | None = None
) -> TaskRuns:
    """The task's clean and corrupt metrics and its corrupt-run writer outputs on ``model``."""
    model = per_query_kv(model)  # GQA: one K/V head per query head
    graph = graph or graph_of(model)
    device = next(model.parameters()).device
    clean, corrupt, writers = [], [], []
    for rows in _chunks(task.n_prompts, batch_size):
        part = task.rows(rows)
        with torch.no_grad():
            clean.append(part.metric(model(part.clean.to(device))).float().cpu())
            corrupt.append(part.metric(model(part.corrupt.to(device))).float().cpu())
        writers.append(writer_outputs(model, graph, part.corrupt).to(device))
    return TaskRuns(torch.cat(clean), torch.cat(corrupt), writers)


#: Rows per forward when several ablations run side by side (replicas of a prompt chunk), and
#: the memory their replicated writer outputs may take.
MAX_ROWS = 1024
REPLICA_BYTES = 256 * 2**20


def ablated_metrics(
    model: TransformerBridge,
    task: Task,
    drops: Sequence[Tensor],
    runs: TaskRuns,
    *,
    batch_size: int = 16,
    graph: Graph | None = None,
) -> Float[Tensor, "drop batch"]:
    """Per ablation and prompt: the metric on the clean prompts with every edge of ``drops[i]``
    (``[writer, reader]``, or per position) fed its corrupt-run writer output (a resample
    ablation of those edges). Several ablations share a forward as replicas of the prompts."""
    model = per_query_kv(model)  # GQA: one K/V head per query head
    graph = graph or graph_of(model)
    w_o = head_outputs_weight(model)
    out = torch.empty(len(drops), task.n_prompts)
    chunks = _chunks(task.n_prompts, batch_size)
    for rows, replacement in zip(chunks, runs.corrupt_writers, strict=True):
        part, b = task.rows(rows), len(rows)
        row_bytes = replacement[:, :1].numel() * 4  # every writer's output, one row
        per = max(1, min(MAX_ROWS, REPLICA_BYTES // row_bytes) // b)
        for start in range(0, len(drops), per):
            stacked = torch.stack(list(drops[start : start + per]))
            n = stacked.shape[0]
            tokens = part.clean.repeat(n, 1)
            with torch.no_grad(), graph_hooks_on(model, graph):
                logits, _ = run(
                    model,
                    graph,
                    tokens,
                    add=ablation_adder(stacked, replacement),
                    w_o=w_o,
                )
                value = part.metric.rows(torch.arange(b).repeat(n))(logits).float().cpu()
            out[start : start + n, rows] = value.view(n, b)
    return out


def ablated_metric(
    model: TransformerBridge,
    task: Task,
    drop: Bool[Tensor, "writer reader"] | Bool[Tensor, "writer reader pos"],
    runs: TaskRuns,
    *,
    batch_size: int = 16,
    graph: Graph | None = None,
) -> Float[Tensor, " batch"]:
    """:func:`ablated_metrics` of one ablation."""
    return ablated_metrics(model, task, [drop], runs, batch_size=batch_size, graph=graph)[0]


def faithfulness(
    model: TransformerBridge,
    task: Task,
    keep: Bool[Tensor, "writer reader"] | Bool[Tensor, "writer reader pos"],
    runs: TaskRuns | None = None,
    *,
    batch_size: int = 16,
) -> Faithfulness:
    """How much of the gap the circuit ``keep`` (``[writer, reader]``, or per position) recovers
    when every other edge is fed its corrupt-run value."""
    model = per_query_kv(model)  # GQA: one K/V head per query head
    graph = graph_of(model)
    runs = runs or task_runs(model, task, batch_size=batch_size, graph=graph)
    allowed = graph.allowed if keep.ndim == 2 else graph.allowed[..., None].expand_as(keep)
    drop = allowed & ~keep
    circuit = ablated_metric(model, task, drop, runs, batch_size=batch_size, graph=graph)
    return Faithfulness(
        n_edges=int((keep & allowed).sum()),
        circuit=float(circuit.mean()),
        clean=float(runs.clean.mean()),
        corrupt=float(runs.corrupt.mean()),
    )
