"""Tasks: clean prompts, corrupt prompts and a metric: what every causal measurement is about.

A :class:`Task` pairs each clean prompt with a corrupt one of the same length (the same layout,
with the information the behaviour needs taken out) and a :class:`Metric` that gives one number
per prompt, higher when the model does the task. Path patching, edge attribution and
faithfulness all read a task through :meth:`Task.gap` (clean minus corrupt) and normalise by it.

Built in (:data:`TASKS`; ``make_task(name, model, codec)``):

- ``induction`` (:func:`induction_task`): rows ``[BOS] prefix seg seg filler`` of random tokens
  (the head-score probe's layout, :func:`~interp_toolkit.heads.repeats.default_probe`, with a
  shorter period where the vocabulary is too small for fresh tokens: :func:`task_probe`); the
  corrupt row replaces the first ``seg`` by fresh tokens found nowhere else in the row, so nothing
  repeats. Scored: the queries of the second ``seg`` whose next token is still in it; metric: the
  right token's logit minus the mean logit (``logit_diff``) or its log-probability (``logprob``).
  **The** induction metric: the route, the circuit and the study all use this one.
- ``previous-token``: random rows; the corrupt row replaces the token before every scored (odd)
  position; metric: the logit of the clean run's prediction minus that of the corrupt run's.
- ``ioi`` and ``docstring`` (GPT-2 vocabulary): Wang et al.'s indirect-object prompts
  ("When Mary and John went to the store, John gave a drink to" -> " Mary", corrupt: three other
  names) and Heimersheim & Janiak's docstring prompts (the next ``:param`` name, corrupt: other
  argument names); metric: logit(right answer) - logit(the corrupt prompt's answer).

Your own task: ``Task(name, clean, corrupt, metric)`` with any callable metric that maps logits
``[batch, pos, vocab]`` to ``[batch]`` and has ``rows(index)`` (:class:`Metric`).

**Held-out prompts.** The built-in tasks carry their ``seed`` and ``remake(n_prompts, seed)``;
:meth:`Task.heldout` draws the same task with seed ``derive(seed, "heldout_task")``, the prompts
circuit discovery scores its circuit on after choosing it on these
(:func:`~.circuit.discover_circuit`). A task built by hand has none unless it sets both.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor
from transformer_lens import TransformerBridge

from interp_toolkit.errors import UserError
from interp_toolkit.heads.repeats import (
    RepeatedTokens,
    default_layout,
    default_token_range,
    repeated_batch,
)
from interp_toolkit.runtime import validate
from interp_toolkit.runtime.seeds import derive, rng
from interp_toolkit.text.codecs import Codec

MetricKind = Literal["logit_diff", "logprob"]
METRIC_KINDS: tuple[str, ...] = ("logit_diff", "logprob")


@runtime_checkable
class Metric(Protocol):
    """One number per prompt from the logits (higher: the model does the task)."""

    def __call__(self, logits: Float[Tensor, "batch pos vocab"]) -> Float[Tensor, " batch"]: ...

    def rows(self, index: Tensor) -> Metric: ...


@dataclass(frozen=True)
class TokenMetric:
    """Per prompt, the mean over its ``scored`` positions of ``logit[right] - logit[wrong]``
    (``wrong`` None: minus the mean logit over the vocabulary), or of ``log p(right)``
    (``kind="logprob"``). Position ``p``'s logits predict token ``p + 1``."""

    scored: Bool[Tensor, "batch pos"]
    right: Int[Tensor, "batch pos"]
    wrong: Int[Tensor, "batch pos"] | None = None
    kind: MetricKind = "logit_diff"

    def __call__(self, logits: Float[Tensor, "batch pos vocab"]) -> Float[Tensor, " batch"]:
        lg = logits.float()
        dev = lg.device
        scored, right = self.scored.to(dev), self.right.to(dev)[..., None]
        if self.kind == "logprob":
            value = lg.log_softmax(-1).gather(-1, right)[..., 0]
        elif self.wrong is None:
            value = lg.gather(-1, right)[..., 0] - lg.mean(-1)
        else:
            value = (lg.gather(-1, right) - lg.gather(-1, self.wrong.to(dev)[..., None]))[..., 0]
        return (value * scored).sum(-1) / scored.sum(-1).clamp_min(1)

    def rows(self, index: Tensor) -> TokenMetric:
        wrong = None if self.wrong is None else self.wrong[index]
        return dataclasses.replace(
            self, scored=self.scored[index], right=self.right[index], wrong=wrong
        )


@dataclass(frozen=True)
class Task:
    """Clean and corrupt prompts (paired row by row, equal lengths) and the metric."""

    name: str
    clean: Int[Tensor, "batch pos"]
    corrupt: Tensor  # [batch, pos] like ``clean`` (checked in __post_init__, with a clear error)
    metric: Metric
    description: str = ""
    #: The seed the prompts were drawn with, and ``remake(n_prompts, seed)``: the same task on
    #: prompts drawn with another seed (the held-out set of :func:`~.circuit.discover_circuit`).
    seed: int | None = field(default=None, compare=False)
    remake: Callable[[int, int], Task] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.clean.shape != self.corrupt.shape or self.clean.ndim != 2:
            raise UserError(
                f"task {self.name!r}: clean {tuple(self.clean.shape)} and corrupt "
                f"{tuple(self.corrupt.shape)} prompts must be [batch, pos] of the same shape."
            )

    @property
    def n_prompts(self) -> int:
        return int(self.clean.shape[0])

    def rows(self, index: Tensor) -> Task:
        return dataclasses.replace(
            self,
            clean=self.clean[index],
            corrupt=self.corrupt[index],
            metric=self.metric.rows(index),
        )

    def heldout(self, n_prompts: int | None = None) -> Task | None:
        """The same task on ``n_prompts`` (default: as many) prompts drawn with another seed
        (``derive(seed, "heldout_task")``); None when the task cannot redraw its prompts."""
        if self.remake is None or self.seed is None:
            return None
        return self.remake(n_prompts or self.n_prompts, derive(self.seed, "heldout_task"))

    def check(self, model: TransformerBridge) -> Task:
        """This task, if its tokens fit ``model`` (a one-line UserError otherwise)."""
        for tokens, what in ((self.clean, "clean"), (self.corrupt, "corrupt")):
            validate.token_ids(
                tokens,
                d_vocab=int(model.cfg.d_vocab),
                n_ctx=int(model.cfg.n_ctx),
                batch=True,
                name=f"task {self.name!r} {what} prompts",
            )
        return self


def _fresh(row: Tensor, n: int, low: int, high: int, bos: int | None, gen: torch.Generator):
    """``n`` distinct ids in ``[low, high)`` found nowhere in ``row`` (and not BOS)."""
    taken = torch.zeros(high, dtype=torch.bool)
    taken[row[(row >= 0) & (row < high)]] = True
    if bos is not None and bos < high:
        taken[bos] = True
    free = torch.arange(low, high)[~taken[low:high]]
    if len(free) < n:
        raise UserError(
            f"the vocabulary is too small for a corrupt prompt: {n} fresh ids needed, "
            f"{len(free)} free; use a shorter context or fewer repeats."
        )
    return free[torch.randperm(len(free), generator=gen)[:n]]


def task_probe(codec: Codec, n_ctx: int, n_prompts: int, seed: int) -> RepeatedTokens:
    """The induction task's clean rows: the head-score probe
    (:func:`~interp_toolkit.heads.repeats.default_probe`), its period shortened where the
    codec's random-token range holds too few ids for a corrupt segment of fresh ones (bytes: 95
    printable ids leave 29 beside the probe's 50-token segment and 16-token prefix; period 39 leaves
    40)."""
    period, prefix_max = default_layout(n_ctx)
    low, high = default_token_range(codec)
    high = min(high, int(codec.d_vocab))
    n_ids = (high - low) - int(codec.bos_id is not None and low <= codec.bos_id < high)
    fits = (n_ids - prefix_max) // 2  # segment + prefix + a fresh segment, all distinct
    if 2 <= fits < period:
        period = fits
    return repeated_batch(codec, codec.d_vocab, n_prompts, period, prefix_max=prefix_max, seed=seed)


def induction_task(
    codec: Codec,
    n_ctx: int,
    *,
    n_prompts: int = 64,
    seed: int = 0,
    metric: MetricKind = "logit_diff",
) -> Task:
    """The induction task (module docstring): clean rows repeat a random segment, corrupt rows
    have the same layout and second segment but a first segment of fresh tokens."""
    if metric not in METRIC_KINDS:
        raise UserError(f"metric {metric!r} is unknown: use {' or '.join(METRIC_KINDS)}.")
    probe = task_probe(codec, n_ctx, n_prompts, seed)
    clean, period = probe.tokens, probe.period
    corrupt = clean.clone()
    scored = torch.zeros_like(clean, dtype=torch.bool)
    gen = rng(seed, "induction_corrupt")
    for i, start in enumerate(probe.starts.tolist()):
        corrupt[i, start : start + period] = _fresh(
            clean[i], period, probe.low, probe.high, codec.bos_id, gen
        )
        scored[i, start + period : start + 2 * period - 1] = True
    right = torch.roll(clean, -1, dims=1)

    def remake(n: int, s: int) -> Task:
        return induction_task(codec, n_ctx, n_prompts=n, seed=s, metric=metric)

    return Task(
        name="induction",
        clean=clean,
        corrupt=corrupt,
        metric=TokenMetric(scored, right, None, metric),
        description=f"repeated random tokens (period {period}) vs the same layout without the "
        f"first repeat; metric: {metric_phrase(metric)} of the repeated token on the second repeat",
        seed=seed,
        remake=remake,
    )


def metric_phrase(kind: str) -> str:
    return "logit minus mean logit" if kind == "logit_diff" else "log-probability"


def previous_token_task(
    model: TransformerBridge, codec: Codec, *, n_prompts: int = 64, seed: int = 0
) -> Task:
    """Random rows; corrupt rows change the token before each odd position; metric: the clean
    prediction's logit minus the corrupt prediction's, at the odd positions."""
    n = min(int(model.cfg.n_ctx), 32)
    low, high = default_token_range(codec)
    high = min(high, int(model.cfg.d_vocab))
    gen = rng(seed, "previous_token_prompts")
    ids = torch.arange(low, high)
    ids = ids[ids != codec.bos_id] if codec.bos_id is not None else ids
    clean = ids[torch.randint(0, len(ids), (n_prompts, n), generator=gen)]
    if codec.bos_id is not None:
        clean[:, 0] = codec.bos_id
    scored = torch.zeros_like(clean, dtype=torch.bool)
    scored[:, 3::2] = True
    corrupt = clean.clone()
    before = torch.arange(2, n - 1, 2)
    shift = torch.randint(1, len(ids), (n_prompts, len(before)), generator=gen)
    where = (torch.searchsorted(ids, clean[:, before]) + shift) % len(ids)  # another id
    corrupt[:, before] = ids[where]
    device = next(model.parameters()).device
    with torch.no_grad():
        right = model(clean.to(device)).argmax(-1).cpu()
        wrong = model(corrupt.to(device)).argmax(-1).cpu()
    return Task(
        name="previous-token",
        clean=clean,
        corrupt=corrupt,
        metric=TokenMetric(scored, right, wrong),
        description="random tokens vs the same with the token before each odd position changed; "
        "metric: logit of the clean prediction minus that of the corrupt prediction",
    )


def _need_gpt2(codec: Codec, task: str) -> None:
    if int(getattr(codec, "d_vocab", 0)) < 50257 or codec.contains_unk(codec.encode(" Mary")):
        raise UserError(
            f"the {task} task needs GPT-2's vocabulary (names and words as single tokens): "
            "run it on gpt2 or a GPT-2 folder; toy runs take --task induction or previous-token."
        )


NAMES = " Mary John Tom James Sarah Paul Anna David Lisa Mark Kate Mike Emma Jack Laura Peter"
PLACES = " store park school house office station beach garden church market"
OBJECTS = " drink book ring bag gift ball letter key pen cake"
ARGS = " load size files last name data value user path mode key item node text line page port"
WORDS = " oil column piece crime population unit dark state shape river stone glass"


def _segments(codec: Codec, parts: Sequence[str | int]) -> list[int]:
    """Fixed text fragments encoded one by one, word ids as they are: rows of equal length."""
    out: list[int] = []
    for p in parts:
        out.extend([p] if isinstance(p, int) else codec.encode(p))
    return out


def _words(codec: Codec, text: str) -> list[int]:
    """The words of ``text`` that are single tokens (with their leading space)."""
    ids = [codec.encode(" " + w) for w in text.split()]
    return [i[0] for i in ids if len(i) == 1 and not codec.contains_unk(i)]


def _pick(pool: list[int], k: int, gen: torch.Generator) -> list[int]:
    return [pool[int(i)] for i in torch.randperm(len(pool), generator=gen)[:k]]


def _ioi_prompt(codec: Codec, a: int, b: int, c: int, place: int, obj: int) -> list[int]:
    parts = [codec.bos_id, "When", a, " and", b, " went to the", place, ",", c]
    return _segments(codec, [*parts, " gave a", obj, " to"])


def ioi_task(codec: Codec, *, n_prompts: int = 64, seed: int = 0) -> Task:
    """Indirect-object identification (GPT-2 vocabulary): ABBA/BABA prompts vs three new names."""
    _need_gpt2(codec, "ioi")
    names, places, objects = _words(codec, NAMES), _words(codec, PLACES), _words(codec, OBJECTS)
    gen = rng(seed, "ioi_prompts")

    clean, corrupt, right, wrong = [], [], [], []
    for _ in range(n_prompts):
        io, s, c1, c2, c3 = _pick(names, 5, gen)
        place, obj = _pick(places, 1, gen)[0], _pick(objects, 1, gen)[0]
        a, b = (io, s) if bool(torch.rand(1, generator=gen) < 0.5) else (s, io)

        clean.append(_ioi_prompt(codec, a, b, s, place, obj))
        corrupt.append(_ioi_prompt(codec, c1, c2, c3, place, obj))
        right.append(io)
        wrong.append(c1 if a == s else c2)  # the corrupt prompt's indirect object
    return _answer_task("ioi", clean, corrupt, right, wrong, "indirect-object prompts vs new names")


def docstring_task(codec: Codec, *, n_prompts: int = 64, seed: int = 0) -> Task:
    """Heimersheim & Janiak's docstring task (GPT-2 vocabulary): after two documented
    parameters, the next ``:param`` is the third argument; the corrupt prompt has other names."""
    _need_gpt2(codec, "docstring")
    args, words = _words(codec, ARGS), _words(codec, WORDS)
    gen = rng(seed, "docstring_prompts")

    def prompt(fn: int, a: list[int], w: list[int]) -> list[int]:
        parts: list[str | int] = [codec.bos_id, "def", fn, "(self,", a[0], ",", a[1], ",", a[2]]
        parts += [",", a[3], '):\n    """', w[0], w[1], "\n\n    :param", a[0], ":", w[2]]
        parts += [w[3], "\n    :param", a[1], ":", w[4], w[5], "\n    :param"]
        return _segments(codec, parts)

    clean, corrupt, right, wrong = [], [], [], []
    for _ in range(n_prompts):
        picked = _pick(args, 9, gen)
        fn, a, other = picked[0], picked[1:5], picked[5:9]
        w = _pick(words, 6, gen)
        clean.append(prompt(fn, a, w))
        corrupt.append(prompt(fn, other, w))
        right.append(a[2])
        wrong.append(other[2])
    return _answer_task("docstring", clean, corrupt, right, wrong, "docstring prompts vs new names")


def _answer_task(
    name: str,
    clean: list[list[int]],
    corrupt: list[list[int]],
    right: list[int],
    wrong: list[int],
    what: str,
) -> Task:
    """One answer per prompt, read at its last position."""
    c, x = torch.tensor(clean), torch.tensor(corrupt)
    scored = torch.zeros_like(c, dtype=torch.bool)
    scored[:, -1] = True
    r = torch.tensor(right)[:, None].expand_as(c).clone()
    w = torch.tensor(wrong)[:, None].expand_as(c).clone()
    return Task(
        name=name,
        clean=c,
        corrupt=x,
        metric=TokenMetric(scored, r, w),
        description=f"{what}; metric: logit of the right answer minus the corrupt prompt's",
    )


#: name -> builder(model, codec, n_prompts, seed).
TASKS: dict[str, Callable[[TransformerBridge, Codec, int, int], Task]] = {
    "induction": lambda m, c, n, s: induction_task(c, int(m.cfg.n_ctx), n_prompts=n, seed=s),
    "previous-token": lambda m, c, n, s: previous_token_task(m, c, n_prompts=n, seed=s),
    "ioi": lambda m, c, n, s: ioi_task(c, n_prompts=n, seed=s),
    "docstring": lambda m, c, n, s: docstring_task(c, n_prompts=n, seed=s),
}


def make_task(
    name: str, model: TransformerBridge, codec: Codec, *, n_prompts: int = 64, seed: int = 0
) -> Task:
    """The built-in task ``name`` (:data:`TASKS`) for ``model``, checked against it."""
    if name not in TASKS:
        raise UserError(f"task {name!r} is unknown: use one of {', '.join(TASKS)}.")
    if n_prompts < 2:
        raise UserError(f"{n_prompts} prompts cannot give an interval: use 2 or more.")

    def remake(n: int, s: int) -> Task:
        return TASKS[name](model, codec, n, s).check(model)

    made = TASKS[name](model, codec, n_prompts, seed).check(model)
    return dataclasses.replace(made, seed=seed, remake=remake)
