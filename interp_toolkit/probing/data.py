"""What the probes and the neuron analysis run on: held-out text windows, repeated random tokens
in which a repeat can sit anywhere, and what a probe is asked (features, their labels and inputs,
and the control task built on each feature's input).

- :func:`heldout_windows`: windows of a corpus's *held-out* split (the documents training never
  saw; see :mod:`interp_toolkit.text.stream`), ``seq_len`` tokens each, drawn without replacement by a
  seeded permutation. A run's corpus and split come from its config (:func:`corpus_of`);
  :func:`neuron_windows` is what the neuron analysis reads by default.
- :func:`varied_repeats`: rows ``[BOS] prefix seg seg filler`` of exactly ``seq_len`` tokens in
  which the period cycles over ``2 .. (seq_len - 1) // 2`` and the prefix length is uniform in
  ``0 .. seq_len - 1 - 2·period``, so neither the position nor the period says where the repeat is.
- :data:`FEATURES`: the label of each probed position and the **input** the label is a function
  of (:func:`feature_labels`, :func:`feature_inputs`); :func:`control_labels` is the control task
  of Hewitt & Liang (2019) on that input.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Int

from interp_toolkit.errors import UserError
from interp_toolkit.heads.repeats import default_token_range, repeated_tokens
from interp_toolkit.models.activations import MAX_SEQ
from interp_toolkit.runs.folder import Run
from interp_toolkit.runtime.seeds import derive, rng
from interp_toolkit.text.codecs import Codec
from interp_toolkit.text.stream import tokenize_corpus, windows


class TooShort(UserError):
    """A corpus whose held-out split holds no window of the length asked (what an analysis may
    leave "not measured"; any other failure, such as a corpus that is gone, is said as itself)."""


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
    split = tokenize_corpus(corpus, val_fraction, progress=False, store=codec.store)
    wins = windows(split.val_ids, codec, seq_len)
    if len(wins) == 0:
        raise TooShort(
            f"the held-out split of {corpus!r} has {len(split.val_ids)} tokens, fewer than one "
            f"window of {seq_len}: use a larger corpus."
        )
    gen = rng(seed, "probe_windows")
    chosen = torch.randperm(len(wins), generator=gen)[:n_windows].sort().values
    return torch.stack([wins[int(i)] for i in chosen])


#: Positions the neuron analysis reads by default (held-out rows x context).
NEURON_POSITIONS = 16384


def neuron_windows(
    codec: Codec, n_ctx: int, source: object, *, seed: int = 0, n_seqs: int | None = None
) -> Int[torch.Tensor, "n pos"]:
    """Held-out windows of the corpus ``source`` (a run, or anything else: stdlib) trained on:
    rows of the context (at most ``MAX_SEQ`` tokens), ``n_seqs`` of them (default:
    :data:`NEURON_POSITIONS` positions in all)."""
    corpus, val_fraction = corpus_of(source)
    seq_len = min(n_ctx, MAX_SEQ)
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
            seed=derive(seed, "probe_period", period),
        )
        tokens[rows], starts[rows] = batch.tokens, batch.starts
    return VariedRepeats(tokens=tokens, starts=starts, periods=periods)


# --------------------------------------------------------------------------- features


@dataclass(frozen=True)
class Feature:
    """A probed feature: its ``definition``, and ``input``, what the label is a function of (the
    control task relabels that input: :func:`control_labels`)."""

    name: str
    definition: str
    input: str
    needs_repeats: bool = False


FEATURES: dict[str, Feature] = {
    f.name: f
    for f in (
        Feature("token", "the token at the probed position p", "the token at p"),
        Feature("prev_token", "the token at p-1 (p >= 1)", "the token at p-1"),
        Feature("prev2_token", "the token at p-2 (p >= 2)", "the token at p-2"),
        Feature("position", "the absolute position p", "the position p"),
        Feature(
            "in_repeat",
            "1 if p is in the second copy of the row's repeated segment (its token occurred "
            "earlier in the row), else 0; repeated random tokens only",
            "the token at p (whose earlier occurrence the label asks about)",
            needs_repeats=True,
        ),
    )
}


#: The token features: the label (and input) of position p is the token at p - lag.
_LAG = {"token": 0, "prev_token": 1, "prev2_token": 2}


def check_feature(name: str) -> Feature:
    if name not in FEATURES:
        raise UserError(f"unknown feature {name!r}: use one of {', '.join(FEATURES)}.")
    return FEATURES[name]


def feature_labels(
    feature: str, tokens: Int[torch.Tensor, "n pos"], repeats: VariedRepeats | None = None
) -> Int[torch.Tensor, "n pos"]:
    """The label of every position (-1: not probed). Rows of ``repeats`` start with BOS."""
    feat = check_feature(feature)
    n, p = tokens.shape
    out = torch.full((n, p), -1, dtype=torch.long)
    if feat.needs_repeats and repeats is None:
        raise UserError(f"feature {feature!r} needs repeated-token rows: use --data repeats.")
    if feature in _LAG:
        out[:, _LAG[feature] :] = tokens[:, : p - _LAG[feature]]
    elif feature == "position":
        out[:] = torch.arange(p)[None, :]
    else:
        assert repeats is not None
        out[:] = repeats.second_copy().long()
    if repeats is not None:
        out[:, 0] = -1  # BOS
    return out


def feature_inputs(feature: str, tokens: Int[torch.Tensor, "n pos"]) -> Int[torch.Tensor, "n pos"]:
    """The value of each position's input (``Feature.input``): a token id or a position (0 where
    the input does not exist; those positions are not probed)."""
    check_feature(feature)
    n, p = tokens.shape
    if feature == "position":
        return torch.arange(p)[None, :].expand(n, p).clone()
    lag = _LAG.get(feature, 0)  # in_repeat's input: the token at p
    out = torch.zeros_like(tokens)
    out[:, lag:] = tokens[:, : p - lag]
    return out


def control_labels(
    inputs: Int[torch.Tensor, "n pos"],
    labels: Int[torch.Tensor, "n pos"],
    train_rows: torch.Tensor,
    n_values: int,
    seed: int,
) -> Int[torch.Tensor, "n pos"]:
    """The control task (Hewitt & Liang 2019) with the task's labels: ``g(inputs)``, where ``g``
    maps each of the ``n_values`` values of the feature's input to one of the task's labels (-1
    kept where not probed). The values that occur at probed positions are shuffled; the first
    ones get every label of the task once each (in random order), so the control uses as many
    labels as the task; every other value gets a label drawn from the empirical distribution of
    the probed training labels. A probe can learn it only by memorising the input's values: it
    has the feature's input, its label set and (drawn) its label distribution, but none of its
    structure. When the label is the input (an identity feature) ``g`` is one-to-one: the
    control is the task relabelled, with exactly its class count and frequencies."""
    probed = labels >= 0
    train = labels[train_rows]
    pool = train[train >= 0]
    gen = rng(seed, "control_task")
    g = pool[torch.randint(0, len(pool), (n_values,), generator=gen)]
    task_labels = labels[probed].unique()
    values = inputs[probed].unique()
    values = values[torch.randperm(len(values), generator=gen)]
    k = min(len(values), len(task_labels))
    g[values[:k]] = task_labels[torch.randperm(len(task_labels), generator=gen)[:k]]
    return torch.where(labels >= 0, g[inputs], labels)
