"""Induction measured on held-out text: the in-context-learning score, the loss on a repeated
passage, and the best head score on natural text (what training logs beside the synthetic probe).

- **In-context-learning score** (Olsson et al. 2022): the loss on late tokens minus the loss on
  early tokens of a held-out window. Olsson et al. take token 500 minus token 50 of a 512-token
  context; :func:`icl_positions` scales both to the context the model has (token 50/512 and
  500/512 of it) and averages a band of ``max(1, n/16)`` tokens around each, so a short context
  is not read off one noisy position. Negative: later tokens are predicted better (the model
  uses its context). The interval is over windows (:func:`~.intervals.mean_interval`).
- **Repeated passage**: the first ``L`` tokens of a held-out window, followed by themselves. The
  same tokens are predicted twice; the **drop** is the mean loss on the first copy minus the loss
  on the second (tokens 1..L-1 of each copy, paired). A 1-layer model also copies in context
  (a token seen earlier is likelier again) and so shows a drop without induction: read the drop
  against the 1-layer model's and an untrained model's.
- **Induction on text**: every head's induction score read at each token's previous occurrence
  (:mod:`~interp_toolkit.heads.text_scorer`), and the best head in layers >= 1 (any layer for
  a 1-layer model).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from jaxtyping import Float, Int
from transformer_lens import TransformerBridge

from interp_toolkit.errors import UserError
from interp_toolkit.files.serialize import Jsonable, json_field
from interp_toolkit.heads.induction import strongest_induction_head
from interp_toolkit.heads.registry import SCORE
from interp_toolkit.heads.scorer import RowScores
from interp_toolkit.heads.text_scorer import text_row_scores, text_scores_from_rows
from interp_toolkit.runtime.devices import CPU_PATTERN_BYTES, rows_per_chunk
from interp_toolkit.runtime.seeds import rng
from interp_toolkit.stats.intervals import Interval, cluster_interval, mean_interval

#: Olsson et al.'s positions: token 50 and token 500 of a 512-token context.
OLSSON_EARLY, OLSSON_LATE, OLSSON_CTX = 50, 500, 512


def token_losses(
    logits: Float[torch.Tensor, "batch pos vocab"], tokens: Int[torch.Tensor, "batch pos"]
) -> Float[torch.Tensor, "batch pred"]:
    """Next-token loss (nats): ``[:, t]`` is the loss on token ``t + 1``, predicted at ``t``."""
    logp = logits[:, :-1].float().log_softmax(-1)
    target = tokens[:, 1:].to(logp.device)
    return -logp.gather(-1, target[..., None])[..., 0].cpu()


def icl_positions(n_tokens: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """``(early, late)`` token-index ranges ``[a, b)`` for windows of ``n_tokens`` tokens: bands
    of ``max(1, n/16)`` tokens ending at Olsson et al.'s 50/512 and 500/512 of the window."""
    if n_tokens < 4:
        raise UserError(f"windows of {n_tokens} tokens are too short for an in-context score.")
    width = max(1, n_tokens // 16)
    early_end = max(2, round(OLSSON_EARLY / OLSSON_CTX * n_tokens) + 1)
    late_end = min(n_tokens, round(OLSSON_LATE / OLSSON_CTX * n_tokens) + 1)
    early = (max(1, early_end - width), early_end)
    late = (max(early_end, late_end - width), late_end)
    return early, late


@dataclass(frozen=True)
class IclScore(Jsonable):
    """The in-context-learning score on ``n_windows`` held-out windows of ``n_tokens`` tokens:
    mean loss on tokens ``late`` minus on tokens ``early`` (``[a, b)``), per window."""

    score: Interval  # over windows, or over documents (a cluster bootstrap): its n and method say
    early: tuple[int, int] = field(metadata=json_field(key="early_tokens"))
    late: tuple[int, int] = field(metadata=json_field(key="late_tokens"))
    early_loss: float
    late_loss: float
    n_tokens: int
    n_windows: int = field(default=0, metadata=json_field(skip=True))

    json_extra = ("positions",)

    def positions(self) -> str:
        """The positions in words, e.g. 'tokens 30-31 minus tokens 2-3 of 32-token windows'."""
        (a, b), (c, d) = self.early, self.late
        return (
            f"mean loss on tokens {c}-{d - 1} minus tokens {a}-{b - 1} of {self.n_tokens}-token "
            f"windows (Olsson et al.: token {OLSSON_LATE} minus token {OLSSON_EARLY} of "
            f"{OLSSON_CTX})"
        )


def icl_from_losses(
    losses: Float[torch.Tensor, "batch pred"], groups: Sequence[int] | None = None
) -> IclScore:
    """The in-context score from per-token losses (:func:`token_losses`); with ``groups`` (the
    document each window comes from) its interval resamples documents
    (:func:`~interp_toolkit.stats.intervals.cluster_interval`), else windows."""
    n_tokens = int(losses.shape[1]) + 1
    early, late = icl_positions(n_tokens)
    e = losses[:, early[0] - 1 : early[1] - 1].double().mean(1)
    lt = losses[:, late[0] - 1 : late[1] - 1].double().mean(1)
    return IclScore(
        n_tokens=n_tokens,
        early=early,
        late=late,
        early_loss=float(e.mean()),
        late_loss=float(lt.mean()),
        score=mean_interval((lt - e).tolist())
        if groups is None
        else cluster_interval((lt - e).tolist(), list(groups)),
        n_windows=int(losses.shape[0]),
    )


@dataclass(frozen=True)
class PassageLoss(Jsonable):
    """Loss on a held-out passage of ``length`` tokens and on its repeat (tokens 1..L-1 of each
    copy, nats) over ``drop.n`` windows; ``drop``: first minus second copy, per window."""

    length: int
    first: float = field(metadata=json_field(key="first_copy_loss"))
    second: float = field(metadata=json_field(key="second_copy_loss"))
    drop: Interval


def passage_tokens(
    windows: Int[torch.Tensor, "batch pos"], length: int
) -> Int[torch.Tensor, "batch twice"]:
    """Each window's first ``length`` tokens, twice."""
    if not 2 <= length <= windows.shape[1]:
        raise UserError(f"a passage of {length} tokens does not fit windows of {windows.shape[1]}.")
    w = windows[:, :length]
    return torch.cat([w, w], dim=1)


def copy_losses(
    losses: Float[torch.Tensor, "batch pred"], length: int
) -> tuple[Float[torch.Tensor, " batch"], Float[torch.Tensor, " batch"]]:
    """Each :func:`passage_tokens` row's mean loss on tokens 1..L-1 of the first copy and on the
    same tokens of the second."""
    first = losses[:, : length - 1].double().mean(1)
    second = losses[:, length : 2 * length - 1].double().mean(1)
    return first, second


def passage_from_losses(losses: Float[torch.Tensor, "batch pred"], length: int) -> PassageLoss:
    """:class:`PassageLoss` from the per-token losses of :func:`passage_tokens` rows."""
    first, second = copy_losses(losses, length)
    return PassageLoss(
        length=length,
        first=float(first.mean()),
        second=float(second.mean()),
        drop=mean_interval((first - second).tolist()),
    )


def repeated_passage(
    model: TransformerBridge, windows: Int[torch.Tensor, "batch pos"], length: int | None = None
) -> PassageLoss:
    """The repeated-passage loss of ``model`` on held-out ``windows`` (default length: half the
    context)."""
    length = length or min(int(model.cfg.n_ctx) // 2, int(windows.shape[1]))
    toks = passage_tokens(windows, length)
    device = next(model.parameters()).device
    with torch.no_grad():
        logits = model(toks.to(device))
    return passage_from_losses(token_losses(logits, toks), length)


@dataclass(frozen=True)
class TextInduction:
    """Induction on held-out text: the in-context score and the held-out loss of the same
    windows, the repeated-passage loss, and every head's induction score on the windows."""

    icl: IclScore
    val_loss: float
    passage: PassageLoss
    induction: Float[torch.Tensor, "layer head"]  # NaN when no token of the windows repeats
    queries: int  # how many tokens the induction score read

    def best(self) -> tuple[str, float]:
        """The best induction score on text and its head: :func:`strongest_induction_head` of the
        text scores (a head none of whose queries repeats, NaN, never wins)."""
        lowest = torch.finfo(self.induction.dtype).min  # finite: still above the excluded layers
        head = strongest_induction_head(self.induction.nan_to_num(lowest))
        return str(head), float(self.induction.nan_to_num(float("-inf"))[head.layer, head.head])

    def metrics(self) -> dict[str, Any]:
        """What metrics.jsonl logs (rounded)."""
        head, best = self.best()
        ci = self.icl.score
        return {
            "icl_score": round(ci.estimate, 5),
            "icl_ci": [round(ci.low, 5), round(ci.high, 5)],
            "icl_tokens": [*self.icl.early, *self.icl.late, self.icl.n_tokens],
            "text_windows": self.icl.n_windows,
            "icl_documents": self.icl.score.n if "cluster" in self.icl.score.method else None,
            "passage_drop": round(self.passage.drop.estimate, 5),
            "passage_ci": [round(self.passage.drop.low, 5), round(self.passage.drop.high, 5)],
            "passage_loss": [round(self.passage.first, 5), round(self.passage.second, 5)],
            "passage_rows": self.passage.drop.n,
            "passage_tokens": self.passage.length,
            "text_induction": [[round(float(v), 4) for v in row] for row in self.induction],
            "text_induction_best": round(best, 4) if best > float("-inf") else None,
            "text_induction_head": head if best > float("-inf") else None,
        }


#: The one stripe the text measures read (every head's induction score on the text).
_INDUCTION_ONLY = {"induction": SCORE["induction"].stripe}


def text_induction(
    model: TransformerBridge,
    windows: Int[torch.Tensor, "batch pos"],
    *,
    passage_rows: int = 16,
    val_rows: int | None = None,
    has_bos: bool = False,
    unk_id: int | None = None,
    groups: Sequence[int] | None = None,
) -> TextInduction:
    """All three measures on held-out ``windows`` (as the model was trained on them: no BOS by
    default): forward passes over the windows (head scores and per-token losses together, about
    256 MiB of logits at a time, and on the CPU about ``CPU_PATTERN_BYTES`` of patterns), one
    over the first ``passage_rows`` windows' repeated passages. ``val_loss``: the mean loss on
    the first ``val_rows`` windows (default all).
    ``unk_id``: the vocabulary's ``<unk>``, never read as a repeat. ``groups``: the document
    each window comes from (the in-context score's interval then resamples documents)."""
    if len(windows) < 2:
        raise UserError("the in-context score needs at least 2 held-out windows.")
    n, length = windows.shape
    cfg, device = model.cfg, next(model.parameters()).device
    chunk = max(1, (1 << 26) // max(1, length * int(cfg.d_vocab)))
    if device.type == "cpu":  # and patterns near the caches (CPU_PATTERN_BYTES)
        pattern = 4 * int(cfg.n_heads) * length * length
        chunk = min(chunk, rows_per_chunk(device, pattern, budget=CPU_PATTERN_BYTES))
    parts: list[dict[str, RowScores]] = []
    losses = []
    for lo in range(0, n, chunk):
        w = windows[lo : lo + chunk]
        rows, logits = text_row_scores(
            model, w, has_bos=has_bos, unk_id=unk_id, stripes=_INDUCTION_ONLY
        )
        losses.append(token_losses(logits, w))
        parts.append(rows)
        del logits
    loss = torch.cat(losses)
    scores = text_scores_from_rows(
        {
            k: RowScores(
                torch.cat([p[k].sums for p in parts]), torch.cat([p[k].counts for p in parts])
            )
            for k in parts[0]
        }
    )
    return TextInduction(
        icl=icl_from_losses(loss, groups),
        val_loss=float(loss[: val_rows or n].double().mean()),
        passage=repeated_passage(model, windows[:passage_rows]),
        induction=scores.induction,
        queries=scores.queries["induction"],
    )


def passage_order_effect(
    model: TransformerBridge,
    windows: Int[torch.Tensor, "batch pos"],
    length: int | None = None,
    *,
    seed: int = 0,
) -> Interval:
    """What copying without induction cannot give: each passage's second copy read after a copy
    of its own tokens in a random order, against after the exact copy. The loss on the second
    copy (tokens 1..L-1) after the shuffled copy minus after the exact one, per passage, with a
    normal 95% interval over passages (nats per token; docs/study.md section 0). A model that
    copies tokens it has seen, but not the token that followed, gains as much from either."""
    length = length or min(int(model.cfg.n_ctx) // 2, int(windows.shape[1]))
    exact = passage_tokens(windows, length)
    g = rng(seed, "passage_order_control")
    order = torch.stack([torch.randperm(length, generator=g) for _ in range(len(windows))])
    shuffled = exact.clone()
    shuffled[:, :length] = exact[:, :length].gather(1, order)
    device = next(model.parameters()).device
    with torch.no_grad():
        both = torch.cat([exact, shuffled]).to(device)
        losses = token_losses(model(both), both)
    _, second = copy_losses(losses, length)
    n = len(windows)
    return mean_interval((second[n:] - second[:n]).tolist())
