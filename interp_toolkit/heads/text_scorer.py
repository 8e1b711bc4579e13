"""Head scores on any text: the registry's stripes read at each token's previous occurrence.

TransformerLens's ``detect_head`` scores any prompt; so does this. On text without an exact
periodic repeat, a query ``q`` *repeats* when its token occurred before (at or after the first
non-BOS position); ``prev(q)`` is that earlier occurrence and ``d(q) = q - prev(q)`` plays the
role of the period. ``scores_on`` takes the occurrence whose context matches ``q``'s furthest back
(in a repeated passage, the token's place in the first copy; the latest of equals), at least
:data:`MIN_DISTANCE` back, and only where the query and the token before it recur together
(:data:`MIN_MATCH`: one recurring token, a space or an ``e``, is no repeat of the text); the text measures logged in training take the latest occurrence (so
runs logged before stay comparable) and skip it when it is closer than that. A :class:`~.heads.Stripe` with ``periods`` and ``lag`` then reads the key
``k = q - lag - periods·d(q)``:

- induction (``periods=1, lag=-1``): ``k = prev(q) + 1``, the position right after the previous
  occurrence (TransformerLens's induction detection pattern, restricted to the latest
  occurrence, and to occurrences at least :data:`MIN_DISTANCE` back);
- duplicate-token (``periods=1, lag=0``): ``k = prev(q)`` (the same queries);
- previous-token (``lag=1``, every query ``q >= 1`` whose key is not BOS): ``k = q - 1``;
- a column stripe (first-token): ``k = column`` for every ``q >= max(1, column)``.

Each score is the mean over the (row, query) pairs it reads; a score with no pair to read (e.g.
induction on text in which no token occurs twice) is **NaN**, and
:attr:`~.stripes.HeadScores.queries` says how many pairs each score read. ``<unk>`` never repeats: a run of
words the vocabulary cannot read is not a span followed by itself. On a clean periodic
prompt (``[BOS] seg seg``) these are the stripes of the period rule
(:mod:`~interp_toolkit.heads.scorer`), which ``scores_on`` keeps for such prompts.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from jaxtyping import Float, Int
from transformer_lens import TransformerBridge

from interp_toolkit.errors import UserError
from interp_toolkit.heads.registry import SCORES, Stripe
from interp_toolkit.heads.scorer import HeadScores, RowScores, each_layer
from interp_toolkit.runtime import validate


def previous_occurrence(
    tokens: Int[torch.Tensor, "batch pos"],
    *,
    first: int = 0,
    unk_id: int | None = None,
    longest: bool = False,
    min_distance: int = 1,
) -> Int[torch.Tensor, "batch pos"]:
    """For each position ``q``, an earlier ``j`` (``first <= j <= q - min_distance``) with
    ``tokens[j] == tokens[q]``: the latest, or with ``longest`` the one whose context matches
    ``q``'s furthest back (the latest of those), and only where at least :data:`MIN_MATCH`
    tokens match (``q`` and the token before it recur together: a repeated span, not one
    recurring token such as a space or an ``e``): in a repeated passage, the token's place in
    the first copy, not a closer occurrence elsewhere. -1 where there is none (and at positions
    before ``first``). ``<unk>`` (``unk_id``) has no occurrence:
    many different words share that id, so one ``<unk>`` after another is not a repeat."""
    b, n = tokens.shape
    pos = torch.arange(n, device=tokens.device)
    valid = pos[None, :] >= first
    if unk_id is not None:
        valid = valid & (tokens != unk_id)
    same = (tokens[:, :, None] == tokens[:, None, :]) & valid[:, :, None] & valid[:, None, :]
    earlier = pos[None, :] <= pos[:, None] - max(1, min_distance)  # [q, k]
    if longest:  # match[q, j]: how many tokens up to q and j agree, counting back
        match = torch.zeros(b, n, n, dtype=torch.int32, device=tokens.device)
        match[:, 0] = same[:, 0]
        for q in range(1, n):
            match[:, q, 0] = same[:, q, 0]
            match[:, q, 1:] = (match[:, q - 1, :-1] + 1) * same[:, q, 1:]
        rank = match.long() * n + pos  # the longest match, then the latest
        idx = torch.where(same & earlier & (match >= MIN_MATCH), rank, -1).amax(-1)
        idx = torch.where(idx >= 0, idx % n, -1)
    else:
        idx = torch.where(same & earlier, pos, -1).amax(-1)
    idx[:, : max(0, first)] = -1
    return idx


#: The text reading of ``scores_on`` reads a query only where it and the tokens before it recur
#: together, this many tokens in all: a span of 2 or more followed (later) by itself.
MIN_MATCH = 2

#: A repeated token is read only when its previous occurrence is at least this far back: at
#: distance 1 the induction key is the query itself, at 2 the token before it, so a current- or
#: previous-token head would score as an induction head on natural text (where such close
#: repeats are common: indentation, punctuation).
MIN_DISTANCE = 3


def stripe_keys(
    stripe: Stripe, prev: Int[torch.Tensor, "batch pos"], *, first_key: int
) -> Int[torch.Tensor, "batch pos"]:
    """The key each query reads for ``stripe`` (see the module docstring); -1 where the query is
    not read. Stripes that read repeats skip queries whose previous occurrence is closer than
    :data:`MIN_DISTANCE`."""
    b, n = prev.shape
    q = torch.arange(n, device=prev.device).expand(b, n)
    if stripe.column is not None:
        key = torch.full_like(q, stripe.column)
        return torch.where(q >= max(1, stripe.column), key, -1)
    dist = q - prev
    key = q - stripe.lag - stripe.periods * dist
    ok = (key >= 0) & (key <= q)
    if stripe.periods or stripe.queries == "repeats":
        ok &= (prev >= 0) & (dist >= MIN_DISTANCE)
    if stripe.queries == "body":
        ok &= (q >= 1) & (key >= first_key)
    return torch.where(ok, key, -1)


def _reduce(
    stripe: Stripe,
    keys: Int[torch.Tensor, "b pos"],
    pat: Float[torch.Tensor, "b head q k"],
    vnorm: Float[torch.Tensor, "b k head"],
) -> Float[torch.Tensor, "b head"]:
    """Per row and head, the sum of the stripe's entries over the queries it reads."""
    rows, qs = (keys >= 0).nonzero(as_tuple=True)
    ks = keys[rows, qs]
    out = torch.zeros(pat.shape[0], pat.shape[1], dtype=torch.float64, device=pat.device)
    if rows.numel() == 0:
        return out
    vals = pat[rows, :, qs, ks]  # [n, H]
    if stripe.value_weighted:
        w = pat[rows, :, qs, :] * vnorm[rows].transpose(1, 2)  # [n, H, P]
        own = w.gather(-1, ks[:, None, None].expand(-1, w.shape[1], 1))[..., 0]
        vals = own / w.sum(-1).clamp_min(1e-30)
    return out.index_add_(0, rows, vals.to(torch.float64))


def text_row_scores(
    model: TransformerBridge,
    tokens: Int[torch.Tensor, "batch pos"],
    *,
    has_bos: bool,
    stripes: Mapping[str, Stripe] | None = None,
    unk_id: int | None = None,
    longest: bool = False,
) -> tuple[dict[str, RowScores], Float[torch.Tensor, "batch pos vocab"]]:
    """Every registry score of every head on each row of ``tokens`` read as text (per-row sums
    and query counts), and the logits of the same forward pass. ``has_bos``: the rows start with
    BOS (never a key of a relative stripe, never an occurrence). ``unk_id``: the vocabulary's
    ``<unk>``, never a repeat; ``longest``: each query's occurrence is the one whose context
    matches furthest back (:func:`previous_occurrence`; else the latest, at least
    :data:`MIN_DISTANCE` back)."""
    cfg = model.cfg
    validate.in_vocab(tokens, int(cfg.d_vocab), "tokens")
    if tokens.shape[1] > int(cfg.n_ctx):
        raise UserError(
            f"the text has {tokens.shape[1]} tokens but the model's context is {cfg.n_ctx}: "
            "shorten it."
        )
    plan = dict(stripes) if stripes is not None else {s.name: s.stripe for s in SCORES}
    device = next(model.parameters()).device
    first = int(has_bos)
    prev = previous_occurrence(
        tokens.cpu(),
        first=first,
        unk_id=unk_id,
        longest=longest,
        min_distance=MIN_DISTANCE if longest else 1,  # latest: a close one is skipped (keys)
    )
    keys = {k: stripe_keys(s, prev, first_key=first).to(device) for k, s in plan.items()}
    n_rows, n_layers = tokens.shape[0], int(cfg.n_layers)
    sums = {k: torch.zeros(n_rows, n_layers, int(cfg.n_heads), dtype=torch.float64) for k in plan}

    def reduce(layer: int, pat: torch.Tensor, vnorm: torch.Tensor) -> None:
        for name, stripe in plan.items():
            sums[name][:, layer] = _reduce(stripe, keys[name], pat, vnorm).cpu()

    logits = each_layer(model, tokens, reduce)
    assert logits is not None  # the pass was not stopped
    counts = {k: (v >= 0).sum(1).to(torch.float64).cpu() for k, v in keys.items()}
    return {k: RowScores(sums[k], counts[k]) for k in plan}, logits


def text_scores_from_rows(rows: Mapping[str, RowScores]) -> HeadScores:
    """The batch mean of each score (NaN where it read no query), with its query counts (the
    text reading)."""
    values = {}
    for name, r in rows.items():
        n = float(r.counts.sum())
        mean = r.sums.sum(0) / n if n > 0 else torch.full(r.sums.shape[1:], float("nan"))
        values[name] = mean.float()
    return HeadScores(
        values, queries={k: int(r.counts.sum()) for k, r in rows.items()}, reading="text"
    )


def text_head_scores(
    model: TransformerBridge,
    tokens: Int[torch.Tensor, "batch pos"],
    *,
    has_bos: bool,
    unk_id: int | None = None,
    longest: bool = True,
) -> HeadScores:
    """Every registry score of every head on any text (see the module docstring)."""
    rows, _ = text_row_scores(model, tokens, has_bos=has_bos, unk_id=unk_id, longest=longest)
    return text_scores_from_rows(rows)
