"""The generic head scorer: every registry score of every head, in one forward pass.

Each :class:`~interp_toolkit.heads.registry.Score` names a :class:`~interp_toolkit.heads.registry.Stripe`
(which queries, which key); :func:`row_scores` reduces each layer's attention pattern to the sum
of every stripe over each row's queries (:class:`RowScores`: per-row sums and query counts), and
:func:`head_scores` is their mean over the batch. :func:`row_pairs` also reduces, for every score
the score's stripe and, query by query, the head's strongest attention at any other key
(:class:`RowPair`: what the specificity test of :mod:`~interp_toolkit.heads.specificity`
compares), in the same pass. The forward pass hooks
only ``hook_v`` and ``hook_pattern`` (a names filter); each layer's pattern is reduced as soon as
both hooks of that layer have fired and is then dropped, and the pass stops after the last layer,
so the unembedding is never computed. Rows go through in chunks (~256 MiB of patterns each).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from jaxtyping import Float, Int
from transformer_lens import TransformerBridge
from transformer_lens.hook_points import HookPoint

from interp_toolkit.errors import UserError
from interp_toolkit.heads.registry import (
    SCORES,
    Stripe,
    rival_name,
    score,
)
from interp_toolkit.heads.repeats import RepeatedTokens
from interp_toolkit.models.activations import per_query_head
from interp_toolkit.runtime import validate
from interp_toolkit.runtime.devices import rows_per_chunk
from interp_toolkit.stats.thresholds import RIVAL_WIDTH

Hooks = Sequence[tuple[Any, Callable[..., Any]]]


@dataclass(frozen=True)
class RowScores:
    """One score on a batch, kept per row: the score is ``sums.sum(0) / counts.sum()``."""

    sums: Float[torch.Tensor, "row layer head"]
    counts: Float[torch.Tensor, " row"]

    def mean(self) -> Float[torch.Tensor, "layer head"]:
        """The score of every head on these rows (float64)."""
        return self.sums.sum(0) / self.counts.sum().clamp_min(1.0)

    def first(self, n: int) -> RowScores:
        """The same score on the first ``n`` rows."""
        return RowScores(self.sums[:n], self.counts[:n])

    def interval(self, z: float = 1.96) -> Float[torch.Tensor, "layer head 2"]:
        """A 95% interval (``z`` = 1.96) of every head's score, the rows as independent units:
        the ratio estimate ``Σ sums / Σ counts`` +- z standard errors (linearised, with the
        ``R / (R - 1)`` small-sample factor), clipped to [0, 1]."""
        theta = self.mean()
        n = self.sums.shape[0]
        total = self.counts.sum().clamp_min(1.0)
        resid = self.sums - theta[None] * self.counts[:, None, None]
        var = (resid**2).sum(0) / total**2 * (n / max(1, n - 1))
        half = z * var.sqrt()
        return torch.stack([(theta - half).clamp(0, 1), (theta + half).clamp(0, 1)], -1)


@dataclass(frozen=True)
class RowPair:
    """A score's stripe and its rival (the head's strongest attention at another key, query by
    query), summed per row over the queries that have a rival key."""

    target: Float[torch.Tensor, "row layer head"]
    rival: Float[torch.Tensor, "row layer head"]
    counts: Float[torch.Tensor, " row"]


@dataclass
class HeadScores:
    """Every head's scores: ``values[name]`` is a ``[layer, head]`` tensor (float32, CPU) for each
    registry score, also readable as an attribute (``scores.induction``). ``queries[name]``: how
    many (row, query) pairs the score averaged (0: the score is undefined on this input, NaN).
    ``reading``: ``"period"`` (repeated tokens read with the period rule) or ``"text"`` (each
    token at its earlier occurrence, :mod:`~interp_toolkit.heads.text_scorer`)."""

    values: dict[str, Float[torch.Tensor, "layer head"]]
    queries: dict[str, int] = field(default_factory=dict)
    reading: str = "period"

    def get(self, kind: str) -> Float[torch.Tensor, "layer head"]:
        score(kind)  # a KeyError naming the known scores
        return self.values[kind]

    def __getattr__(self, name: str) -> Float[torch.Tensor, "layer head"]:
        values = self.__dict__.get("values", {})
        if name in values:
            return values[name]
        raise AttributeError(name)

    @property
    def n_layers(self) -> int:
        return int(next(iter(self.values.values())).shape[0])

    @property
    def n_heads(self) -> int:
        return int(next(iter(self.values.values())).shape[1])


class _Stop(Exception):
    """Raised by the last hook to end the forward pass before the unembedding."""


def each_layer(
    model: TransformerBridge,
    tokens: Int[torch.Tensor, "b pos"],
    reduce: Callable[[int, torch.Tensor, torch.Tensor], None],
    *,
    fwd_hooks: Hooks = (),
    stop: bool = False,
) -> torch.Tensor | None:
    """Run ``tokens`` through ``model`` (no grad), calling ``reduce(layer, pattern, vnorm)`` as
    soon as a layer's ``hook_pattern`` and ``hook_v`` have both fired (the pattern ``[b, H, P, P]``
    and each key's ``|v|`` ``[b, P, H]``, float32). The logits; None with ``stop``, which ends the
    pass after the last layer, before the unembedding."""
    n_layers, n_heads = int(model.cfg.n_layers), int(model.cfg.n_heads)
    pending: dict[int, dict[str, torch.Tensor]] = {}
    done: set[int] = set()

    def on_act(act: torch.Tensor, hook: HookPoint) -> None:
        layer = hook.layer()
        got = pending.setdefault(layer, {})
        got["pattern" if hook.name.endswith("hook_pattern") else "v"] = act.detach()
        if len(got) < 2:
            return
        del pending[layer]
        reduce(
            layer, got["pattern"].float(), per_query_head(got["v"].float().norm(dim=-1), n_heads, 2)
        )
        done.add(layer)
        if stop and len(done) == n_layers:
            raise _Stop

    hooks = [*fwd_hooks, (lambda n: n.endswith(("attn.hook_pattern", "attn.hook_v")), on_act)]
    try:
        with torch.no_grad(), model.hooks(fwd_hooks=hooks):
            logits = model(tokens.to(next(model.parameters()).device))
    except _Stop:
        return None
    if len(done) != n_layers:  # pragma: no cover - a model whose hooks never fired
        raise RuntimeError(f"only layers {sorted(done)} reported hook_pattern/hook_v")
    return logits


class _Queries:
    """Where the queries of one chunk of rows are (shared by every stripe of every layer)."""

    def __init__(self, batch: RepeatedTokens, starts: Int[torch.Tensor, " b"], seq_len: int):
        period, n_rep = batch.period, batch.n_repeats
        b = int(starts.shape[0])
        self.period, self.seq_len, self.b = period, seq_len, b
        self.first_key = 1 if batch.has_bos else 0  # relative keys never land on BOS
        self.n_q = (n_rep - 1) * period
        # queries of the 2nd and later repeats: [b, n_q]
        self.repeats = starts[:, None] + period + torch.arange(self.n_q)[None, :]
        self.rows = torch.arange(b)[:, None].expand(b, self.n_q)
        self.ends = starts + n_rep * period  # one past the last repeated position, [b]

    def valid(self, stripe: Stripe) -> torch.Tensor:
        """[b, Q] bool: the queries the stripe reads, in its query layout (``"body"``: Q = every
        position q; ``"repeats"``: Q = the repeat queries, :attr:`repeats`)."""
        if stripe.queries == "repeats":
            keys = self.repeats - stripe.offset(self.period)
            return (keys >= self.first_key) & (keys <= self.repeats)
        q = torch.arange(self.seq_len)[None, :]
        if stripe.column is None:
            keep = (q - stripe.offset(self.period) >= self.first_key) & (q >= 1)
        else:
            keep = q >= max(1, stripe.column)
        return keep & (q < self.ends[:, None])

    def rival_keys(self, stripe: Stripe, width: int | None) -> torch.Tensor:
        """The keys each query's rivals can be: every key the query can attend to but the
        stripe's own (never BOS for a relative key), within ``width`` of it when given.
        ``"body"``: ``[P, P]`` (query, key); ``"repeats"``: ``[b, n_q, P]``."""
        k = torch.arange(self.seq_len)
        if stripe.queries == "repeats":
            q = self.repeats[:, :, None]  # [b, n_q, 1]
        else:
            q = torch.arange(self.seq_len)[:, None]  # [P, 1]
        if stripe.column is not None:
            own, lowest = torch.full_like(q, stripe.column), 0
        else:
            own, lowest = q - stripe.offset(self.period), self.first_key
        keep = (k <= q) & (k >= lowest) & (k != own)
        if width is not None:
            keep &= (k - own).abs() <= width
        return keep

    def mask(self, entry: _Sum) -> torch.Tensor:
        """[b, Q] bool: the queries a planned sum reads (a rival side: those with a rival key)."""
        if not isinstance(entry, _Rival):
            return self.valid(entry)
        has = self.rival_keys(entry.stripe, entry.width).any(-1)
        return self.valid(entry.stripe) & (has if entry.stripe.queries == "repeats" else has[None])


def _query_values(
    stripe: Stripe,
    pat: Float[torch.Tensor, "b head q k"],
    qs: _Queries,
    rows_q: Callable[[bool], torch.Tensor],
) -> Float[torch.Tensor, "b head Q"]:
    """The stripe's entry at every query of its layout (:meth:`_Queries.valid`; entries outside
    it are garbage, masked by the caller). ``rows_q(value_weighted)``: the repeat queries' rows
    ``[b, n_q, H, P]``, of ``A`` or of ``ŵ``."""
    if stripe.queries == "body":
        if stripe.column is not None:
            return pat[..., :, stripe.column]  # [b, H, P]
        d = stripe.offset(qs.period)
        vals = pat.diagonal(offset=-d, dim1=-2, dim2=-1)  # [b, H, P-d], at q = i + d
        return torch.nn.functional.pad(vals, (d, 0))
    keys = (qs.repeats.to(pat.device) - stripe.offset(qs.period)).clamp(0, qs.seq_len - 1)
    keys = keys[:, :, None, None].expand(qs.b, qs.n_q, pat.shape[1], 1)
    return rows_q(stripe.value_weighted).gather(-1, keys)[..., 0].transpose(1, 2)


def _strongest_rival(
    stripe: Stripe,
    width: int | None,
    pat: Float[torch.Tensor, "b head q k"],
    qs: _Queries,
    rows_q: Callable[[bool], torch.Tensor],
) -> Float[torch.Tensor, "b head Q"]:
    """At every query of the stripe's layout, the head's largest attention (value-weighted for a
    value-weighted stripe) at any of the query's rival keys (:meth:`_Queries.rival_keys`; 0 where
    it has none)."""
    keys = qs.rival_keys(stripe, width).to(pat.device)
    if stripe.queries == "body":
        return pat.masked_fill(~keys[None, None], float("-inf")).amax(-1).clamp_min(0.0)
    rq = rows_q(stripe.value_weighted)  # [b, n_q, H, P]
    best = rq.masked_fill(~keys[:, :, None, :], float("-inf")).amax(-1).clamp_min(0.0)
    return best.transpose(1, 2)  # [b, H, n_q]


@dataclass(frozen=True)
class _Rival:
    """One side of a score's rival comparison: the score's key (``side`` "t") or its strongest
    rival (``side`` "r"), summed over the queries that have a rival key."""

    stripe: Stripe
    width: int | None
    side: str


#: One per-row sum the pass computes: a score's stripe summed over the queries it reads, or one
#: side of its rival pair summed over the queries that have a rival key.
_Sum = Stripe | _Rival


def _reduce_chunk(
    model: TransformerBridge,
    toks: Int[torch.Tensor, "b pos"],
    qs: _Queries,
    plan: Mapping[Hashable, _Sum],
    sums: dict[Hashable, torch.Tensor],
    fwd_hooks: Hooks,
) -> None:
    """Run one chunk of rows, writing every planned per-row, per-head sum into ``sums``
    (``[row, layer, head]`` views of this chunk's rows)."""
    device = next(model.parameters()).device
    masks = {key: qs.mask(entry).to(device) for key, entry in plan.items()}

    def reduce(layer: int, pat: torch.Tensor, vnorm: torch.Tensor) -> None:
        cache: dict[Any, torch.Tensor] = {}

        def rows_q(weighted: bool) -> torch.Tensor:  # the repeat queries' rows, once per layer
            if ("rows", weighted) not in cache:
                rq = pat[qs.rows.to(pat.device), :, qs.repeats.to(pat.device)]  # [b, n_q, H, P]
                if weighted:  # ŵ = A[q, k] |v_k| / Σ_k' A[q, k'] |v_k'|
                    w = rows_q(False) * vnorm.permute(0, 2, 1)[:, None, :, :]
                    rq = w / w.sum(-1, keepdim=True).clamp_min(1e-30)
                cache[("rows", weighted)] = rq
            return cache[("rows", weighted)]

        for key, entry in plan.items():
            stripe = entry.stripe if isinstance(entry, _Rival) else entry
            if stripe not in cache:
                cache[stripe] = _query_values(stripe, pat, qs, rows_q)
            values = cache[stripe]
            if isinstance(entry, _Rival) and entry.side == "r":
                at = ("rival", stripe, entry.width)
                if at not in cache:
                    cache[at] = _strongest_rival(stripe, entry.width, pat, qs, rows_q)
                values = cache[at]
            total = (values * masks[key][:, None, :]).sum(-1)
            sums[key][:, layer] = total.detach().to("cpu", torch.float64)

    each_layer(model, toks, reduce, fwd_hooks=fwd_hooks, stop=True)


def _reduce(
    model: TransformerBridge,
    batch: RepeatedTokens,
    plan: Mapping[Hashable, _Sum],
    batch_size: int | None,
    fwd_hooks: Hooks,
) -> tuple[dict[Hashable, torch.Tensor], dict[Hashable, torch.Tensor]]:
    """Every planned sum ``[row, layer, head]`` and its query count ``[row]``, chunk by chunk."""
    cfg = model.cfg
    seq_len = batch.seq_len
    if seq_len > int(cfg.n_ctx):
        raise UserError(
            f"the probe has {seq_len} tokens but the model's context is {cfg.n_ctx}: "
            "use a shorter --period."
        )
    validate.in_vocab(batch.tokens, int(cfg.d_vocab), "batch.tokens")
    first_key = int(batch.has_bos)
    for name, entry in plan.items():
        stripe = entry.stripe if isinstance(entry, _Rival) else entry
        d = stripe.offset(batch.period)
        if stripe.queries == "body" and stripe.column is None and not 0 <= d < seq_len - first_key:
            raise ValueError(f"{name}: key offset {d} does not fit a sequence of {seq_len}")
    n_rows, n_layers, n_heads = batch.n_seqs, int(cfg.n_layers), int(cfg.n_heads)
    sums = {k: torch.zeros(n_rows, n_layers, n_heads, dtype=torch.float64) for k in plan}
    counts = {k: torch.zeros(n_rows, dtype=torch.float64) for k in plan}
    per_row = 4 * seq_len * (n_heads * seq_len + 8 * int(cfg.d_model)) * 2  # bytes of patterns
    rows = batch_size or rows_per_chunk(next(model.parameters()).device, per_row)
    for lo in range(0, n_rows, rows):
        chunk = slice(lo, lo + rows)
        qs = _Queries(batch, batch.starts[chunk], seq_len)
        views = {k: v[chunk] for k, v in sums.items()}
        _reduce_chunk(model, batch.tokens[chunk], qs, plan, views, fwd_hooks)
        for key, entry in plan.items():
            counts[key][chunk] = qs.mask(entry).sum(1).double()
    return sums, counts


def row_scores(
    model: TransformerBridge,
    batch: RepeatedTokens,
    *,
    batch_size: int | None = None,
    fwd_hooks: Hooks = (),
    stripes: Mapping[str, Stripe] | None = None,
) -> dict[str, RowScores]:
    """Every registry score of every head on each row of ``batch`` (definitions:
    :data:`~.heads.SCORES`): per-row stripe sums ``[row, layer, head]`` and query counts.

    ``fwd_hooks`` run alongside (e.g. ablations). ``stripes`` replaces the stripe of the scores it
    names (e.g. a control stripe at another lag)."""
    found, _ = row_pairs(
        model, batch, batch_size=batch_size, fwd_hooks=fwd_hooks, stripes=stripes, rivals=False
    )
    return found


def row_pairs(
    model: TransformerBridge,
    batch: RepeatedTokens,
    *,
    batch_size: int | None = None,
    fwd_hooks: Hooks = (),
    stripes: Mapping[str, Stripe] | None = None,
    rivals: bool = True,
    rival_width: int | None = RIVAL_WIDTH,
) -> tuple[dict[str, RowScores], dict[str, dict[str, RowPair]]]:
    """:func:`row_scores` and, in the same pass, for every score its rival pair: the score's
    stripe and, query by query, the head's strongest attention at any other key the query can
    attend to (within ``rival_width`` of the score's key when given; BOS is no rival of a
    relative key), both summed over the queries that have a rival key (:class:`RowPair`, named
    :func:`~.heads.rival_name`)."""
    plan_scores = {s.name: s.stripe for s in SCORES} | dict(stripes or {})
    names = [s.name for s in SCORES] if rivals else []
    rival = {(k, side): _Rival(plan_scores[k], rival_width, side) for k in names for side in "tr"}
    plan: dict[Hashable, _Sum] = {**plan_scores, **rival}
    sums, counts = _reduce(model, batch, plan, batch_size, fwd_hooks)
    scores = {k: RowScores(sums[k], counts[k]) for k in plan_scores}
    pair = {k: RowPair(sums[(k, "t")], sums[(k, "r")], counts[(k, "t")]) for k in names}
    return scores, {k: {rival_name(rival_width): p} for k, p in pair.items()}


def head_scores(
    model: TransformerBridge,
    batch: RepeatedTokens,
    *,
    batch_size: int | None = None,
    fwd_hooks: Hooks = (),
    stripes: Mapping[str, Stripe] | None = None,
) -> HeadScores:
    """Every registry score of every head on ``batch``: the batch mean of :func:`row_scores`
    (same arguments)."""
    rows = row_scores(model, batch, batch_size=batch_size, fwd_hooks=fwd_hooks, stripes=stripes)
    return HeadScores(
        {k: r.mean().float() for k, r in rows.items()},
        queries={k: int(r.counts.sum()) for k, r in rows.items()},
    )
