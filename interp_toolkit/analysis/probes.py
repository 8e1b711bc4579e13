"""Linear probes on the residual stream at every layer boundary, read against a control task.

**Boundaries** (:func:`boundaries`): the embedding output (``blocks.0.hook_resid_pre``), after
each attention layer (``hook_resid_mid`` when the block has an MLP, else ``hook_resid_post``),
after each MLP (``hook_resid_post``). The last one is the final stream: the input of the final
LayerNorm, when there is one (LN would change a linear probe's input only by centring, a
per-dimension weight and a per-position scale).

**Features** (:data:`FEATURES`): the label of each probed position ``p`` of a row ``t``:
``token`` = ``t[p]``; ``prev_token`` = ``t[p-1]`` (p ≥ 1); ``prev2_token`` = ``t[p-2]`` (p ≥ 2);
``position`` = ``p``; ``in_repeat`` = 1 when ``p`` is in the second copy of the row's repeated
segment (its token, and the segment so far, occurred earlier in the row), else 0: only on
repeated-token rows (:func:`~.probe_data.varied_repeats`). On rows that start with BOS, position
0 is not probed.

**Data.** Token features default to held-out text windows (what the model reads); on repeated
random tokens (``data="repeats"``) the previous token cannot be guessed from the current one, so
any accuracy above the majority class there is read off the stream, not text statistics.
Rows, not positions, are split: a seeded ``test_fraction`` of the rows is held out.

**The probe** is linear discriminant analysis (a linear classifier: scores ``x Σ⁻¹ μ_c −
½ μ_c Σ⁻¹ μ_c + log π_c``, shared within-class covariance Σ with Ledoit-Wolf shrinkage towards
``tr(Σ)/d · I``, class means μ_c and priors π_c from the training rows), fit in closed form with
torch in float64: deterministic, no learning-rate or epoch choices, and cheap enough for every
boundary of GPT-2 small with thousands of classes. Classes never seen in training cannot be
predicted (they count as errors).

**Control task** (Hewitt & Liang 2019): every token *type* ``v`` of the vocabulary gets a random
control label ``g(v)``, drawn i.i.d. from the empirical distribution of the real training
labels (seeded), and the control label of position ``p`` is ``g(t[p])``, a function of the token
at the probed position only. A probe can learn it just by memorising token types, and it carries
no structure. The same probe is trained on the control labels of the same training rows and
tested on the same test rows. **Selectivity** = accuracy − control accuracy. For ``token`` the
control is the same variable relabelled, so its selectivity is ~0 by construction: read its
accuracy. ``majority`` is the accuracy of always answering the most frequent training label.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from jaxtyping import Float, Int
from transformer_lens import TransformerBridge

from interp_toolkit.analysis.ablation import ablation_hooks, mean_z
from interp_toolkit.analysis.activations import Hooks, run_hooks
from interp_toolkit.analysis.heads import HeadId
from interp_toolkit.analysis.lda import accuracy, fit_probe
from interp_toolkit.analysis.probe_data import VariedRepeats, heldout_windows, varied_repeats
from interp_toolkit.errors import UserError
from interp_toolkit.tokenizer import Codec

CHUNK_BYTES = 128 * 2**20
DATA_KINDS = ("text", "repeats")
#: Default number of probed positions (rows x sequence length).
DEFAULT_POSITIONS = 8192


@dataclass(frozen=True)
class Feature:
    name: str
    definition: str
    needs_repeats: bool = False


FEATURES: dict[str, Feature] = {
    f.name: f
    for f in (
        Feature("token", "the token at the probed position p"),
        Feature("prev_token", "the token at p-1 (p >= 1)"),
        Feature("prev2_token", "the token at p-2 (p >= 2)"),
        Feature("position", "the absolute position p"),
        Feature(
            "in_repeat",
            "1 if p is in the second copy of the row's repeated segment (its token occurred "
            "earlier in the row), else 0; repeated random tokens only",
            needs_repeats=True,
        ),
    )
}


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
    if feature == "token":
        out[:] = tokens
    elif feature in ("prev_token", "prev2_token"):
        lag = 1 if feature == "prev_token" else 2
        out[:, lag:] = tokens[:, :-lag]
    elif feature == "position":
        out[:] = torch.arange(p)[None, :]
    else:
        assert repeats is not None
        out[:] = repeats.second_copy().long()
    if repeats is not None:
        out[:, 0] = -1  # BOS
    return out


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
    out = [Boundary("embed", "blocks.0.hook_resid_pre", 0.0)]
    for layer in range(int(model.cfg.n_layers)):
        if has_mlp:
            out.append(Boundary(f"attn {layer}", f"blocks.{layer}.hook_resid_mid", layer + 0.5))
            out.append(Boundary(f"mlp {layer}", f"blocks.{layer}.hook_resid_post", layer + 1.0))
        else:
            out.append(Boundary(f"attn {layer}", f"blocks.{layer}.hook_resid_post", layer + 1.0))
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


@dataclass
class ProbeRow:
    """One boundary: held-out accuracy of the probe, of the control probe, and their difference."""

    boundary: str
    hook: str
    depth: float
    accuracy: float
    control: float
    selectivity: float
    majority: float
    n_train: int
    n_test: int
    n_classes: int


@dataclass
class ProbeResult:
    feature: str
    definition: str
    data: dict[str, Any]  # what the probe ran on
    rows: list[ProbeRow]
    ablated: list[str] = field(default_factory=list)  # heads ablated while reading the stream

    def row(self, boundary: str) -> ProbeRow:
        return next(r for r in self.rows if r.boundary == boundary)

    def to_dict(self) -> dict[str, Any]:
        return {
            "feature": self.feature,
            "definition": self.definition,
            "probe": "LDA, shared covariance with Ledoit-Wolf shrinkage, closed form (float64)",
            "control": "each token type v gets a random label g(v) drawn from the training "
            "labels' distribution; position p's control label is g(token at p)",
            "selectivity": "accuracy - control (held-out rows)",
            "data": self.data,
            "ablated": self.ablated,
            "rows": [asdict(r) for r in self.rows],
        }


def control_labels(
    tokens: Int[torch.Tensor, "n pos"],
    labels: Int[torch.Tensor, "n pos"],
    train_rows: torch.Tensor,
    d_vocab: int,
    seed: int,
) -> Int[torch.Tensor, "n pos"]:
    """``g(tokens)`` where ``g`` maps each of the ``d_vocab`` token types to a label drawn from
    the empirical distribution of the probed training labels (-1 kept where not probed)."""
    train = labels[train_rows]
    pool = train[train >= 0]
    gen = torch.Generator().manual_seed(int(seed) + 104_729)
    g = pool[torch.randint(0, len(pool), (d_vocab,), generator=gen)]
    return torch.where(labels >= 0, g[tokens], labels)


def split_rows(n: int, test_fraction: float, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(train, test) [n] bool masks: a seeded ``test_fraction`` of the rows is held out."""
    if not 0.0 < test_fraction < 1.0 or n < 2:
        raise UserError(f"need 2+ rows and 0 < test_fraction < 1 (got {n}, {test_fraction}).")
    n_test = min(n - 1, max(1, math.ceil(n * test_fraction)))
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(int(seed)))
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
) -> ProbeResult:
    """Probe ``feature`` at every boundary of ``model`` on ``tokens`` (the rows of ``repeats``
    for ``in_repeat``): held-out accuracy, control accuracy, selectivity, majority baseline.
    With ``ablate``, those heads are mean-ablated (``hook_z``, means over ``tokens``) while the
    stream is read, and the probes are fit on that stream: is the feature still there?
    Deterministic in ``seed`` (the row split and the control labels)."""
    feat = check_feature(feature)
    labels = feature_labels(feature, tokens, repeats)
    train_rows, test_rows = split_rows(tokens.shape[0], test_fraction, seed)
    control = control_labels(tokens, labels, train_rows, int(model.cfg.d_vocab), seed)
    mask = labels >= 0
    hooks = []
    for layer, head in ablate:
        HeadId(layer, head).check(int(model.cfg.n_layers), int(model.cfg.n_heads))
    if ablate:
        hooks = ablation_hooks(list(ablate), mode="mean", means=mean_z(model, tokens))
    acts = stream_at(model, tokens, mask, fwd_hooks=hooks)
    y, yc = labels[mask], control[mask]
    is_train = train_rows[:, None].expand_as(mask)[mask]
    classes, counts = y[is_train].unique(return_counts=True)
    majority = float((y[~is_train] == classes[counts.argmax()]).double().mean())
    rows = []
    for i, b in enumerate(boundaries(model)):
        x = acts[i]
        acc = accuracy(fit_probe(x[is_train], y[is_train]), x[~is_train], y[~is_train])
        ctl = accuracy(fit_probe(x[is_train], yc[is_train]), x[~is_train], yc[~is_train])
        rows.append(
            ProbeRow(
                boundary=b.name,
                hook=b.hook,
                depth=b.depth,
                accuracy=round(acc, 4),
                control=round(ctl, 4),
                selectivity=round(acc - ctl, 4),
                majority=round(majority, 4),
                n_train=int(is_train.sum()),
                n_test=int((~is_train).sum()),
                n_classes=len(classes),
            )
        )
    info = {"n_rows": int(tokens.shape[0]), "seq_len": int(tokens.shape[1])}
    info |= {"test_fraction": test_fraction, "seed": seed, **(data or {})}
    ablated = [str(HeadId(layer, head)) for layer, head in ablate]
    return ProbeResult(feat.name, feat.definition, info, rows, ablated)


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
) -> ProbeResult:
    """:func:`probe_layers` on its default data: ``data="text"`` (held-out windows of ``corpus``,
    the default for token features) or ``"repeats"`` (:func:`~.probe_data.varied_repeats`, the
    only data for ``in_repeat``). Rows of ``seq_len`` tokens (default: the context, at most 128);
    ``n_seqs`` rows (default: :data:`DEFAULT_POSITIONS` positions in all)."""
    feat = check_feature(feature)
    data = data or ("repeats" if feat.needs_repeats else "text")
    if data not in DATA_KINDS:
        raise UserError(f"unknown probe data {data!r}: use {' or '.join(DATA_KINDS)}.")
    n_ctx = int(model.cfg.n_ctx)
    seq_len = seq_len or min(n_ctx, 128)
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
    return probe_layers(
        model,
        tokens,
        feature,
        repeats=repeats,
        data=info,
        seed=seed,
        ablate=ablate,
    )
