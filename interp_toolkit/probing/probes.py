"""Linear probes on the residual stream at every layer boundary, read against a control task
and an untrained model.

**Boundaries** (:func:`boundaries`): the embedding output (``blocks.0.hook_resid_pre``), after
each attention layer (``hook_resid_mid`` when the block has an MLP, else ``hook_resid_post``),
after each MLP (``hook_resid_post``); with attention and MLP in parallel (GPT-J, GPT-NeoX, Phi)
after each layer (``hook_resid_post``: no stream lies between the two). The last one is the final stream: the input of the final
LayerNorm, when there is one (LN would change a linear probe's input only by centring, a
per-dimension weight and a per-position scale).

**Features** (:data:`~.probe_data.FEATURES`): the label of each probed position ``p`` of a row
``t`` and the input it is a function of: ``token`` = ``t[p]``; ``prev_token`` = ``t[p-1]`` (p ≥ 1);
``prev2_token`` = ``t[p-2]`` (p ≥ 2); ``position`` = ``p``; ``in_repeat`` = 1 when ``p`` is in
the second copy of the row's repeated segment, else 0 (its input: ``t[p]``, the token whose
earlier occurrence it asks about); only on repeated-token rows
(:func:`~.probe_data.varied_repeats`). On rows that start with BOS, position 0 is not probed.

**Data.** Token features default to held-out text windows (what the model reads); on repeated
random tokens (``data="repeats"``) the previous token cannot be guessed from the current one, so
any accuracy above chance there is read off the stream, not text statistics.
Rows, not positions, are split: a seeded ``test_fraction`` of the rows is held out.

**The probe** is linear discriminant analysis (:mod:`~.lda`: shared covariance with Ledoit-Wolf
shrinkage, closed form, float64). Classes never seen in training cannot be predicted (errors).

**Scores.** Balanced accuracy (the mean over labels of the share of each label's held-out
positions predicted right; chance = 1 / the number of labels, whatever their frequencies) with a
95% percentile interval from 1,000 bootstrap resamples **stratified by label**
(:func:`~.lda.stratified_weights`): the units are the (held-out row, label) cells, each label's
cells drawn with replacement, as many as it has, so every label of the held-out positions is in
every resample and the balanced accuracy is over the same labels each time. (Resampling whole
rows, as before, left a rare label out of the resamples that missed its row; when rare labels are
badly predicted the mean over the labels left is higher, and the point estimate fell at or below
its own interval's lower bound.) A label seen in one cell has the same recall in every resample:
the interval holds the variation of the labels' recalls given their held-out positions. It is
conditional on the fitted probe: the probe is not refit inside the bootstrap, so the variation of
the training rows is not in it. Plain accuracy and the majority baseline are beside it.

**Control task** (Hewitt & Liang 2019), with the task's classes: each value ``v`` of the
feature's *input* gets a control label ``g(v)``; ``g`` maps the input values that occur onto the
task's labels so that each label is used (a random one-to-one assignment first, then every other
value a label drawn from the empirical distribution of the real training labels:
:func:`~.probe_data.control_labels`). For prev_token the control label of ``p`` is ``g(t[p-1])``,
never a function of the current token. The same probe is fit on the control labels of the same
rows; **selectivity** = balanced accuracy − the control's, on the same resamples (stratified by
the task's label), both over the same number of labels (``n_control_classes`` beside
``n_test_classes``; before, ``g`` drew every value's label at random and the control had far fewer
labels than an identity feature, so its balanced accuracy had a higher chance and selectivity
could go negative from the count alone). For an identity feature (``token``, ``prev_token``,
``position``: the label *is* the input) the only such control is a relabelling of the task: the
probe does the same on both and selectivity is 0 by construction. It is informative for features
that are a many-to-one function of their input (``in_repeat``); for identity features only the
untrained baseline says whether the stream holds the feature.

**Untrained baseline.** The same probe on an untrained model of the same architecture
(:func:`~.untrained.untrained_models`), on the same rows, at every boundary. A feature is
**decodable** at a boundary (:func:`is_decodable`) when the balanced accuracy's lower 95% bound
is at least ``chance + t·(1 − chance)`` (``Thresholds.decodable`` = 0.5: at least halfway from
chance to perfect, so a binary feature needs 0.75); it is decodable **beyond the untrained
model** (:func:`beyond_untrained`) when, also, that lower bound is above the untrained model's
upper bound.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from jaxtyping import Float, Int
from transformer_lens import TransformerBridge

from interp_toolkit.causal.ablation import ablation_hooks, mean_z
from interp_toolkit.errors import UserError
from interp_toolkit.files.serialize import Jsonable, json_field
from interp_toolkit.heads.registry import HeadId
from interp_toolkit.heads.untrained import untrained_models
from interp_toolkit.models.activations import MAX_SEQ, Hooks, run_hooks
from interp_toolkit.models.build import ModelConfig
from interp_toolkit.probing.data import (
    FEATURES,
    VariedRepeats,
    check_feature,
    control_labels,
    feature_inputs,
    feature_labels,
    heldout_windows,
    varied_repeats,
)
from interp_toolkit.probing.lda import (
    balanced_accuracy,
    class_units,
    fit_probe,
    interval,
    stratified_weights,
)
from interp_toolkit.runtime.seeds import rng
from interp_toolkit.stats.thresholds import N_BOOT, THRESHOLDS
from interp_toolkit.text.codecs import Codec

CHUNK_BYTES = 128 * 2**20
DATA_KINDS = ("text", "repeats")
#: Default number of probed positions (rows x sequence length).
DEFAULT_POSITIONS = 8192
__all__ = ["FEATURES", "UserError", "check_feature", "control_labels", "feature_labels"]


@dataclass(frozen=True)
class Boundary:
    """A point of the residual stream: ``depth`` counts layers (embed 0; after layer l's
    attention l + 1, or l + 0.5 when an MLP follows it; after its MLP l + 1)."""

    name: str  # "embed", "attn 0", "mlp 0", ...
    hook: str
    depth: float


def boundaries(model: TransformerBridge) -> list[Boundary]:
    """Every layer boundary of the residual stream, in order (see module docstring)."""
    has_mlp = not bool(getattr(model.cfg, "attn_only", False))
    parallel = bool(getattr(model.cfg, "parallel_attn_mlp", False))  # no stream between them
    out = [Boundary("embed", "blocks.0.hook_resid_pre", 0.0)]
    for layer in range(int(model.cfg.n_layers)):
        post = f"blocks.{layer}.hook_resid_post"
        if not has_mlp:
            out.append(Boundary(f"attn {layer}", post, layer + 1.0))
        elif parallel:
            out.append(Boundary(f"attn+mlp {layer}", post, layer + 1.0))
        else:
            mid = Boundary(f"attn {layer}", f"blocks.{layer}.hook_resid_mid", layer + 0.5)
            out += [mid, Boundary(f"mlp {layer}", post, layer + 1.0)]
    return out


def stream_at(
    model: TransformerBridge,
    tokens: Int[torch.Tensor, "n pos"],
    mask: torch.Tensor,
    *,
    fwd_hooks: Hooks = (),
) -> Float[torch.Tensor, "boundary m d_model"]:
    """The residual stream at every boundary, at the ``m = mask.sum()`` positions of ``mask``
    ([n, pos] bool), in row-major order. Rows go through in chunks (~128 MiB of activations);
    only the boundary hooks are read and the pass stops after the last one."""
    hooks = [b.hook for b in boundaries(model)]
    d_model = int(model.cfg.d_model)
    out = torch.empty(len(hooks), int(mask.sum()), d_model)
    rows = max(1, CHUNK_BYTES // (4 * tokens.shape[1] * d_model * (len(hooks) + 8)))
    done = 0
    for lo in range(0, tokens.shape[0], rows):
        m = mask[lo : lo + rows]
        into = out[:, done : done + int(m.sum())]

        def take(i: int, act: torch.Tensor, into: torch.Tensor = into, m: torch.Tensor = m) -> None:
            into[i].copy_(act[m])

        run_hooks(model, tokens[lo : lo + rows], hooks, take, fwd_hooks)
        done += into.shape[1]
    return out


# --------------------------------------------------------------------------- results


Interval = tuple[float, float]


@dataclass
class ProbeRow(Jsonable):
    """One boundary: the probe's held-out balanced accuracy with its 95% interval (and the mean of
    its bootstrap draws), the control task's, their difference (selectivity), the untrained
    model's (None when not measured), chance, and plain accuracy and the majority baseline.
    ``n_classes``: labels seen in training; ``n_test_classes`` / ``n_control_classes``: labels of
    the held-out positions, of the task and of the control (equal: selectivity compares them)."""

    boundary: str
    hook: str
    depth: float
    balanced: float
    balanced_ci: Interval
    control: float
    control_ci: Interval
    selectivity: float
    selectivity_ci: Interval
    untrained: float | None
    untrained_ci: Interval | None
    chance: float
    accuracy: float
    majority: float
    n_train: int
    n_test: int
    n_classes: int
    n_test_classes: int = 0
    n_control_classes: int = 0
    boot_mean: float | None = None

    json_extra = ("decodable", "beyond_untrained")

    @property
    def decodable(self) -> bool:
        return is_decodable(self)

    @property
    def beyond_untrained(self) -> bool:
        return beyond_untrained(self)


def is_decodable(row: ProbeRow, threshold: float = THRESHOLDS.decodable) -> bool:
    """The balanced accuracy's lower 95% bound is at least ``chance + threshold·(1 − chance)``."""
    return row.balanced_ci[0] >= row.chance + threshold * (1.0 - row.chance)


def beyond_untrained(row: ProbeRow, threshold: float = THRESHOLDS.decodable) -> bool:
    """:func:`is_decodable`, and the lower bound is above the untrained model's upper bound (False
    when the untrained model was not measured: no claim without its baseline)."""
    if row.untrained_ci is None:
        return False
    return is_decodable(row, threshold) and row.balanced_ci[0] > row.untrained_ci[1]


#: The probe's method in words, written into every result's JSON (``{input}``: its input).
METHOD = {
    "probe": "LDA, shared covariance with Ledoit-Wolf shrinkage, closed form (float64)",
    "score": "balanced accuracy on held-out rows, 95% percentile interval from 1,000 bootstrap "
    "resamples stratified by label ((row, label) cells drawn within each label: every label in "
    "every resample); chance = 1 / the number of labels",
    "control": "each value v of the input ({input}) gets a label g(v): every task label is given "
    "to one occurring value, the other values a label drawn from the training labels' "
    "distribution; position p's control label is g(its input)",
    "selectivity": "balanced accuracy - the control's (same resamples, the same number of labels; "
    "0 by construction for an identity feature)",
    "untrained": "the same probe on an untrained model of the same architecture",
    "decodable": f"lower 95% bound >= chance + {THRESHOLDS.decodable:g} x (1 - chance); beyond "
    "untrained: and above the untrained model's upper 95% bound",
}


class Untrained(enum.Enum):
    NOT_REBUILT = None  # ProbeData.untrained_seed where the model cannot be rebuilt: null


_OMIT = json_field(omit_none=True)


@dataclass(frozen=True)
class ProbeData:
    """What a probe ran on: its rows, split and resamples; from :func:`probe`, the data's
    ``source`` (repeated rows' ``layout``; text windows' ``corpus`` and ``split``) and the seed
    of the untrained model probed alike (NOT_REBUILT: none; absent: numbers reused, or none
    asked for)."""

    n_rows: int
    seq_len: int
    test_fraction: float
    seed: int
    n_boot: int
    source: str | None = field(default=None, metadata=_OMIT)
    layout: str | None = field(default=None, metadata=_OMIT)
    corpus: str | None = field(default=None, metadata=_OMIT)
    split: str | None = field(default=None, metadata=_OMIT)
    untrained_seed: int | Untrained | None = field(
        default=None,
        metadata=json_field(omit_none=True, decode=lambda s: s if s is not None else Untrained(s)),
    )


@dataclass
class ProbeResult(Jsonable):
    """A feature's probe at every boundary; its JSON says the method in words (``METHOD``)."""

    feature: str
    definition: str
    data: ProbeData
    rows: list[ProbeRow]
    ablated: list[str] = field(default_factory=list)  # heads ablated while reading the stream
    input: str = ""  # what the feature (and its control task) is a function of
    method: dict[str, str] = field(init=False, repr=False, metadata=json_field(inline=True))

    json_order = ("feature", "definition", "input", *METHOD, "data", "ablated", "rows")

    def __post_init__(self) -> None:
        self.method = {k: v.format(input=self.input) for k, v in METHOD.items()}

    def row(self, boundary: str) -> ProbeRow:
        return next(r for r in self.rows if r.boundary == boundary)


#: The fewest held-out rows an interval is drawn from (the bootstrap resamples rows: from one
#: row every resample is that row, and its interval a point, [1.000, 1.000], read as decodable).
MIN_TEST_ROWS = 5


def split_rows(n: int, test_fraction: float, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(train, test) [n] bool masks: a seeded ``test_fraction`` of the rows is held out, at
    least :data:`MIN_TEST_ROWS` of them."""
    if not 0.0 < test_fraction < 1.0 or n < 2:
        raise UserError(f"need 2+ rows and 0 < test_fraction < 1 (got {n}, {test_fraction}).")
    n_test = min(n - 1, max(1, math.ceil(n * test_fraction)))
    if n_test < MIN_TEST_ROWS:
        need = math.ceil(MIN_TEST_ROWS / test_fraction)
        raise UserError(
            f"{n} rows hold out {n_test} for testing (test fraction {test_fraction:g}), fewer "
            f"than the {MIN_TEST_ROWS} the intervals resample: give {need} rows or more "
            "(--n-seqs)."
        )
    perm = torch.randperm(n, generator=rng(seed, "probe_split"))
    test = torch.zeros(n, dtype=torch.bool)
    test[perm[:n_test]] = True
    return ~test, test


def probe_layers(
    model: TransformerBridge,
    tokens: Int[torch.Tensor, "n pos"],
    feature: str,
    *,
    repeats: VariedRepeats | None = None,
    data: dict[str, Any] | None = None,
    test_fraction: float = 0.2,
    seed: int = 0,
    ablate: Sequence[tuple[int, int]] = (),
    untrained: TransformerBridge | ProbeResult | None = None,
    n_boot: int = N_BOOT,
) -> ProbeResult:
    """Probe ``feature`` at every boundary of ``model`` on ``tokens`` (the rows of ``repeats``
    for ``in_repeat``): balanced accuracy, control, selectivity and the untrained model's, each
    with its 95% interval (module docstring). With ``ablate``, those heads are mean-ablated
    (``hook_z``, means over ``tokens``) while the stream is read. ``untrained``: an untrained model
    of the same architecture to probe alike, or a result whose untrained numbers to reuse (the same
    rows; e.g. the unablated probe's). ``data``: :class:`ProbeData`'s other fields. Deterministic
    in ``seed``."""
    feat = check_feature(feature)
    labels = feature_labels(feature, tokens, repeats)
    train_rows, test_rows = split_rows(tokens.shape[0], test_fraction, seed)
    inputs = feature_inputs(feature, tokens)
    n_values = int(tokens.shape[1]) if feature == "position" else int(model.cfg.d_vocab)
    control = control_labels(inputs, labels, train_rows, n_values, seed)
    mask = labels >= 0
    for layer, head in ablate:
        HeadId(layer, head).check(int(model.cfg.n_layers), int(model.cfg.n_heads))
    hooks = ablation_hooks(list(ablate), mode="mean", means=mean_z(model, tokens)) if ablate else []
    acts = stream_at(model, tokens, mask, fwd_hooks=hooks)
    base = stream_at(untrained, tokens, mask) if isinstance(untrained, TransformerBridge) else None
    y, yc = labels[mask], control[mask]
    is_train = train_rows[:, None].expand_as(mask)[mask]
    row_index = torch.cumsum(test_rows.long(), 0) - 1  # each held-out row's index among them
    row_of = row_index[:, None].expand_as(mask)[mask][~is_train]
    classes, counts = y[is_train].unique(return_counts=True)
    y_test, yc_test = y[~is_train], yc[~is_train]
    unit_of, unit_label = class_units(y_test, row_of)  # resampled within the task's labels
    weights = stratified_weights(unit_label, n_boot, seed)
    majority = float((y_test == classes[counts.argmax()]).double().mean())
    chance = 1.0 / len(y_test.unique())

    def predict(x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return fit_probe(x[is_train], target[is_train]).predict(x[~is_train])

    rows = []
    for i, b in enumerate(boundaries(model)):
        pred = predict(acts[i], y)
        task = balanced_accuracy(pred, y_test, unit_of, weights)
        ctl = balanced_accuracy(predict(acts[i], yc), yc_test, unit_of, weights)
        untr_point, untr_ci = None, None  # not measured
        if base is not None:
            untr = balanced_accuracy(predict(base[i], y), y_test, unit_of, weights)
            untr_point, untr_ci = round(float(untr[0]), 4), interval(untr)
        elif isinstance(untrained, ProbeResult):  # the same rows' numbers, reused
            old = untrained.row(b.name)
            untr_point, untr_ci = old.untrained, old.untrained_ci
        rows.append(
            ProbeRow(
                boundary=b.name,
                hook=b.hook,
                depth=b.depth,
                balanced=round(float(task[0]), 4),
                balanced_ci=interval(task),
                control=round(float(ctl[0]), 4),
                control_ci=interval(ctl),
                selectivity=round(float(task[0] - ctl[0]), 4) + 0.0,
                selectivity_ci=interval(task - ctl),
                untrained=untr_point,
                untrained_ci=untr_ci,
                chance=round(chance, 6),
                accuracy=round(float((pred == y_test).double().mean()), 4),
                majority=round(majority, 4),
                n_train=int(is_train.sum()),
                n_test=int((~is_train).sum()),
                n_classes=len(classes),
                n_test_classes=len(y_test.unique()),
                n_control_classes=len(yc_test.unique()),
                boot_mean=round(float(task[1:].mean()), 4),
            )
        )
    info = ProbeData(*tokens.shape, test_fraction, seed, n_boot, **(data or {}))
    ablated = [str(HeadId(layer, head)) for layer, head in ablate]
    return ProbeResult(feat.name, feat.definition, info, rows, ablated, feat.input)


def probe(
    model: TransformerBridge,
    codec: Codec,
    feature: str,
    *,
    data: str | None = None,
    corpus: str = "stdlib",
    val_fraction: float = 0.02,
    n_seqs: int | None = None,
    seq_len: int | None = None,
    seed: int = 0,
    ablate: Sequence[tuple[int, int]] = (),
    untrained: TransformerBridge | ProbeResult | None = None,
    model_cfg: ModelConfig | None = None,
) -> ProbeResult:
    """:func:`probe_layers` on its default data: ``data="text"`` (held-out windows of ``corpus``,
    the default for token features) or ``"repeats"`` (:func:`~.probe_data.varied_repeats`, the
    only data for ``in_repeat``). Rows of ``seq_len`` tokens (default: the context, at most
    ``MAX_SEQ``); ``n_seqs`` rows (default: :data:`DEFAULT_POSITIONS` positions in all). The
    untrained baseline: ``untrained`` when given, else a freshly initialised model
    of the same architecture (:func:`~.untrained.untrained_models`; ``model_cfg``: a toy run's
    config); None when the model cannot be rebuilt (the rows then have no untrained numbers)."""
    feat = check_feature(feature)
    data = data or ("repeats" if feat.needs_repeats else "text")
    if data not in DATA_KINDS:
        raise UserError(f"unknown probe data {data!r}: use {' or '.join(DATA_KINDS)}.")
    n_ctx = int(model.cfg.n_ctx)
    seq_len = seq_len or min(n_ctx, MAX_SEQ)
    if not 5 <= seq_len <= n_ctx:
        raise UserError(f"--seq-len {seq_len} cannot work: use 5..{n_ctx} (the model's context).")
    n_seqs = n_seqs or max(16, DEFAULT_POSITIONS // seq_len)
    info: dict[str, Any] = {"source": data}
    repeats = None
    if data == "repeats":
        repeats = varied_repeats(codec, seq_len=seq_len, n_seqs=n_seqs, seed=seed)
        tokens = repeats.tokens
        info["layout"] = "[BOS] prefix seg seg filler; period cycles 2..(seq_len-1)//2"
    else:
        if feat.needs_repeats:
            raise UserError(f"feature {feature!r} needs repeated-token rows: use --data repeats.")
        tokens = heldout_windows(
            codec,
            seq_len=seq_len,
            n_windows=n_seqs,
            corpus=corpus,
            val_fraction=val_fraction,
            seed=seed,
        )
        info |= {"corpus": corpus, "split": "held-out"}
    if untrained is None:
        maker = untrained_models(model, model_cfg=model_cfg, n_models=1)
        untrained = None if maker is None else maker.make(maker.seeds[0])
        info["untrained_seed"] = Untrained.NOT_REBUILT if maker is None else maker.seeds[0]
    return probe_layers(
        model,
        tokens,
        feature,
        repeats=repeats,
        data=info,
        seed=seed,
        ablate=ablate,
        untrained=untrained,
    )
