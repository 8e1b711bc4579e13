"""What the probes and the neuron analysis run on: held-out text windows, and repeated random
tokens in which a repeat can sit anywhere.

- :func:`heldout_windows`: windows of a corpus's *held-out* split (the documents training never
  saw; see :mod:`interp_toolkit.data`), ``seq_len`` tokens each, drawn without replacement by a
  seeded permutation. A run's corpus and split come from its config (:func:`corpus_of`);
  :func:`neuron_windows` is what the neuron analysis reads by default.
- :func:`varied_repeats`: rows ``[BOS] prefix seg seg filler`` of exactly ``seq_len`` tokens in
  which the period cycles over ``2 .. (seq_len - 1) // 2`` and the prefix length is uniform in
  ``0 .. seq_len - 1 - 2·period``, so neither the position nor the period says where the repeat is.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Int

from interp_toolkit.analysis.batches import default_token_range, repeated_tokens
from interp_toolkit.data import tokenize_corpus, windows
from interp_toolkit.errors import UserError
from interp_toolkit.runs import Run
from interp_toolkit.tokenizer import Codec


def heldout_windows(
    codec: Codec,
    *,
    seq_len: int,
    n_windows: int,
    corpus: str = "stdlib",
    val_fraction: float = 0.02,
    seed: int = 0,
) -> Int[torch.Tensor, "n pos"]:
    """``n_windows`` windows (fewer if the held-out split is short) of ``seq_len`` model ids from
    the held-out split of ``corpus``, chosen by a permutation seeded with ``seed``, in corpus order."""
    if n_windows < 1 or seq_len < 2:
        raise UserError(f"need at least 1 window of 2+ tokens (got {n_windows} x {seq_len}).")
    split = tokenize_corpus(corpus, val_fraction, progress=False)
    wins = windows(split.val_ids, codec, seq_len)
    if len(wins) == 0:
        raise UserError(
            f"the held-out split of {corpus!r} has {len(split.val_ids)} tokens, fewer than one "
            f"window of {seq_len}: use a larger corpus."
        )
    gen = torch.Generator().manual_seed(int(seed))
    chosen = torch.randperm(len(wins), generator=gen)[:n_windows].sort().values
    return torch.stack([wins[int(i)] for i in chosen])


#: Positions the neuron analysis reads by default (held-out rows x context).
NEURON_POSITIONS = 16384


def neuron_windows(
    codec: Codec, n_ctx: int, source: object, *, seed: int = 0, n_seqs: int | None = None
) -> Int[torch.Tensor, "n pos"]:
    """Held-out windows of the corpus ``source`` (a run, or anything else: stdlib) trained on:
    rows of the context (at most 128 tokens), ``n_seqs`` of them (default:
    :data:`NEURON_POSITIONS` positions in all)."""
    corpus, val_fraction = corpus_of(source)
    seq_len = min(n_ctx, 128)
    return heldout_windows(
        codec,
        seq_len=seq_len,
        n_windows=n_seqs or max(16, NEURON_POSITIONS // seq_len),
        corpus=corpus,
        val_fraction=val_fraction,
        seed=seed,
    )


def corpus_of(source: object) -> tuple[str, float]:
    """(corpus, val_fraction) a model was trained on: a run's, else ``stdlib`` (e.g. GPT-2)."""
    if isinstance(source, Run):
        data = source.settings.get("data", {})
        return str(data.get("corpus", "stdlib")), float(data.get("val_fraction", 0.02))
    return "stdlib", 0.02


@dataclass(frozen=True)
class VariedRepeats:
    """Rows with one repeated segment each: row ``i`` repeats ``periods[i]`` tokens twice from
    ``starts[i]`` (the second copy: ``starts + periods`` to ``starts + 2·periods - 1``)."""

    tokens: Int[torch.Tensor, "n pos"]
    starts: Int[torch.Tensor, " n"]
    periods: Int[torch.Tensor, " n"]

    def second_copy(self) -> torch.Tensor:
        """[n, pos] bool: the positions of the second copy (their token occurred earlier)."""
        pos = torch.arange(self.tokens.shape[1])[None, :]
        lo = (self.starts + self.periods)[:, None]
        return (pos >= lo) & (pos < lo + self.periods[:, None])


def varied_repeats(codec: Codec, *, seq_len: int, n_seqs: int, seed: int = 0) -> VariedRepeats:
    """``n_seqs`` rows of ``seq_len`` tokens, ``[BOS] prefix seg seg filler``, with random ids
    from :func:`~.batches.default_token_range` (distinct within a row when the range allows), the
    period cycling over ``2 .. (seq_len - 1) // 2`` row by row, the prefix uniform in
    ``0 .. seq_len - 1 - 2·period`` (see :func:`~.batches.repeated_tokens`)."""
    top = (seq_len - 1) // 2
    if top < 2:
        raise UserError(f"a repeat needs rows of at least 5 tokens, got {seq_len}.")
    low, high = default_token_range(codec)
    periods = torch.tensor([2 + i % (top - 1) for i in range(n_seqs)], dtype=torch.long)
    tokens = torch.empty(n_seqs, seq_len, dtype=torch.long)
    starts = torch.empty(n_seqs, dtype=torch.long)
    for period in periods.unique().tolist():
        rows = (periods == period).nonzero()[:, 0]
        batch = repeated_tokens(
            len(rows),
            period,
            low=low,
            high=min(high, codec.d_vocab),
            bos_id=codec.bos_id,
            prefix_max=seq_len - 1 - 2 * period,
            seed=seed * 1000 + period,
        )
        tokens[rows], starts[rows] = batch.tokens, batch.starts
    return VariedRepeats(tokens=tokens, starts=starts, periods=periods)
