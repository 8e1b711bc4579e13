"""Seed streams: the one place a seed becomes random numbers (docs/architecture.md, "One owner per
concept"; ``tests/unit/test_owners.py`` fails when a ``manual_seed(...)`` or ``default_rng(...)``
appears anywhere else in the package).

A seeded draw names what it is for, its *purpose*, and asks this module for its stream:

- :func:`rng` ``(seed, purpose)``: a private ``torch.Generator`` seeded ``seed + offset``
  (``seed * block_stride + offset + block`` for a purpose drawn block by block);
- :func:`np_rng` ``(seed, purpose, *key)``: numpy's ``default_rng([seed, offset, *key])``, the
  offset being the stream's word in the seed sequence;
- :func:`seed_global` ``(seed, purpose)``: ``torch.manual_seed(seed + offset)``, for code that
  draws from torch's global generator (transformers' weight init) rather than a private one.

:data:`STREAMS` maps each purpose to its :class:`Stream`. The offsets are the numbers each site
added to its seed before this module existed (issue 29), so every site draws exactly the numbers
it drew then: **never renumber one** (trained runs, the snapshots and the study's numbers depend on
them). Two purposes may share an offset: most have 0, and 104_729 serves three (the probes'
control task, the SAE toy's planted directions, the induction task's corrupt segments); a shared
offset means one seed gives both purposes the same stream, as it did before. A new purpose gets an
offset that no purpose uses yet (a large prime, e.g. 15_485_863), so it draws apart from them all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

StreamKind = Literal["torch", "numpy", "global"]


@dataclass(frozen=True)
class Stream:
    """A purpose's stream: its ``offset``, which generator it seeds (``kind``), and, for a purpose
    drawn block by block, the ``block_stride`` that spaces one seed's blocks (0: not blocked)."""

    offset: int
    kind: StreamKind = "torch"
    block_stride: int = 0


#: Every seeded draw in the package, by purpose (what the numbers are for), with its site.
STREAMS: dict[str, Stream] = {
    # models/build.py _draw_embeddings: token and positional embeddings re-drawn after TL's init
    "embedding_init": Stream(1_000_003),
    # models/sampling.py _draws: the sampled tokens
    "sampling": Stream(0),
    # text/stream.py TrainStream._repeat_block: one step's repeated-span rows (key: the step)
    "repeat_rows": Stream(1, "numpy"),
    # text/stream.py TrainStream.sample: the order of the text windows in one epoch (key: epoch)
    "text_order": Stream(2, "numpy"),
    # heads/repeats.py repeated_tokens: the repeated-token batch every head score reads
    "repeated_tokens": Stream(0),
    # heads/repeats.py non_repeating_like: the no-repeat control batch's fresh ids
    "no_repeat_control": Stream(0),
    # heads/specificity.py _signs: the sign-flip test's random signs
    "sign_flips": Stream(7_368_787),
    # heads/untrained.py untrained_models: a transformers model's init (torch's global generator)
    "untrained_hf_init": Stream(0, "global"),
    # weights/composition.py composition_baseline: the random low-rank factors
    "composition_baseline": Stream(0),
    # causal/shares.py resamples: bootstrap resamples of a task's prompts
    "prompt_bootstrap": Stream(0),
    # causal/tasks.py induction_task: the corrupt rows' fresh first segment
    "induction_corrupt": Stream(104_729),
    # causal/tasks.py previous_token_task: the random rows and their corrupted tokens
    "previous_token_prompts": Stream(7),
    # causal/tasks.py ioi_task: names, places and objects of the IOI prompts, and their order
    "ioi_prompts": Stream(0),
    # causal/tasks.py docstring_task: the docstring prompts' names
    "docstring_prompts": Stream(0),
    # probing/probes.py split_rows: which probe rows are held out
    "probe_split": Stream(0),
    # probing/data.py heldout_windows: which held-out windows are read
    "probe_windows": Stream(0),
    # probing/data.py control_labels: the control task's map from input values to labels
    "control_task": Stream(104_729),
    # probing/lda.py stratified_weights: the probes' bootstrap resamples
    "probe_bootstrap": Stream(31_337),
    # units/neurons.py similarity_threshold: the random token pairs
    "similar_pairs": Stream(0),
    # units/reading.py random_top: the shuffled-activation control's positions
    "shuffled_activations": Stream(0),
    # saes/sae.py SparseAutoencoder: the decoder's init
    "sae_init": Stream(0),
    # saes/train.py fit_sae: torch's global generator while an SAE trains
    "sae_training": Stream(0, "global"),
    # saes/train.py fit_sae: the order of the activations within block b
    "sae_batch_order": Stream(0, block_stride=1_000_003),
    # saes/roles.py head_share_null: the random unit directions of the head-share null
    "head_share_null": Stream(0),
    # saes/toy.py PlantedFeatures.directions: the planted features (offset from 0 because an SAE
    # initialised with the same small seed would otherwise draw its decoder from the same stream
    # and start at the answer)
    "planted_directions": Stream(104_729),
    # saes/toy.py PlantedFeatures.block: the samples of block b
    "planted_samples": Stream(7, block_stride=1_000_003),
    # saes/toy.py PlantedFeatures.heldout: held-out samples (never a training block), block b
    "planted_heldout": Stream(15_485_863, block_stride=1_000_003),
    # heads/specificity.py _resamples: the rival comparisons' row bootstrap (studentized)
    "row_bootstrap": Stream(49_979_687),
    # exams/prompts.py shuffle_first_copies: the order control's order of each first copy
    "exam_order_control": Stream(67_867_967, "numpy"),
    # stats/intervals.py cluster_interval: the documents each cluster bootstrap resample draws
    "cluster_bootstrap": Stream(104_395_301, "numpy"),
    # exams/text_measures.py passage_order_effect: the order of each passage's shuffled copy
    "passage_order_control": Stream(86_028_121),
}


def stream(purpose: str, kind: StreamKind) -> Stream:
    """The registered stream of ``purpose``; ValueError for an unknown one or another kind's."""
    found = STREAMS.get(purpose)
    if found is None:
        raise ValueError(f"no seed stream is named {purpose!r}: add it to runtime/seeds.py STREAMS")
    if found.kind != kind:
        raise ValueError(f"the seed stream {purpose!r} is a {found.kind} stream, not {kind}")
    return found


def rng(seed: int, purpose: str, block: int | None = None) -> torch.Generator:
    """A private CPU ``torch.Generator`` for ``purpose`` under ``seed`` (``block``: the block of a
    purpose drawn block by block, required there and refused elsewhere)."""
    s = stream(purpose, "torch")
    if (block is None) != (s.block_stride == 0):
        need = "needs a block" if s.block_stride else "takes no block"
        raise ValueError(f"the seed stream {purpose!r} {need}")
    value = int(seed) + s.offset if block is None else int(seed) * s.block_stride + s.offset + block
    return torch.Generator().manual_seed(value)


def np_rng(seed: int, purpose: str, *key: int) -> np.random.Generator:
    """numpy's generator for ``purpose`` under ``seed`` and ``key`` (e.g. the step or epoch)."""
    return np.random.default_rng([int(seed), stream(purpose, "numpy").offset, *map(int, key)])


def seed_global(seed: int, purpose: str) -> None:
    """Seed torch's global generator for ``purpose`` (the caller's state too, unless forked)."""
    torch.manual_seed(int(seed) + stream(purpose, "global").offset)


@dataclass(frozen=True)
class Derived:
    """A seed passed on to another seeded job: ``seed * seed_stride + offset + index * index_step``
    (``index``: which of several, e.g. the i-th untrained model or the probe of period p)."""

    offset: int
    index_step: int = 0
    seed_stride: int = 1


#: Every seed that a job passes on to another (rather than drawing with it), by purpose, with its
#: site. As in :data:`STREAMS`, the numbers are those each site used before: never renumber one.
DERIVED: dict[str, Derived] = {
    # training/steplog.py StepLog: the repeated-token batch scored while training
    "training_scores": Derived(7919),
    # heads/specificity.py and heads/nulls.py: the no-repeat control batch of a repeat batch
    "no_repeat_batch": Derived(1),
    # heads/untrained.py _seeds: the i-th untrained model (never the model's own seed)
    "untrained_model": Derived(7919, index_step=7919),
    # causal/__init__.py study_task: the induction task every study measurement reads
    "study_task": Derived(11),
    # causal/tasks.py Task.heldout: the held-out prompts of a task
    "heldout_task": Derived(1_000),
    # causal/circuit.py: the bootstrap of a circuit's held-out faithfulness
    "heldout_resamples": Derived(1),
    # study/reproduce.py write_samples: the i-th sample prompt
    "sample_prompt": Derived(0, index_step=1),
    # probing/data.py varied_repeats: the rows of period p
    "probe_period": Derived(0, index_step=1, seed_stride=1000),
    # units/neurons.py: the shuffled-activation control of the i-th layer
    "shuffled_layer": Derived(0, index_step=1, seed_stride=7919),
    # development/llc.py estimate_llc: devinterp's ``init_seed`` (chain c's noise: init_seed + c;
    # the offset is the one the SGLD noise stream had when the chains were ours)
    "llc_chains": Derived(32_452_843),
}


def derive(seed: int, purpose: str, index: int = 0) -> int:
    """The seed ``purpose`` gets from ``seed`` (``index``: which of several); ValueError for an
    unknown purpose or an index given to a purpose that takes none."""
    found = DERIVED.get(purpose)
    if found is None:
        raise ValueError(
            f"no derived seed is named {purpose!r}: add it to runtime/seeds.py DERIVED"
        )
    if index and not found.index_step:
        raise ValueError(f"the derived seed {purpose!r} takes no index")
    return int(seed) * found.seed_stride + found.offset + int(index) * found.index_step


def study_seeds(first: int, n: int) -> list[int]:
    """The seeds of a study run at ``n`` seeds (``reproduce --seed FIRST --seeds N``): ``first``,
    ``first + 1``, ... (each a whole study; not derived seeds: each seeds everything itself)."""
    check_study_seeds(first, n)
    return list(range(first, first + n))


def check_study_seeds(first: int, n: int) -> None:
    """``--seed FIRST --seeds N`` must give N seeds that are all seeds (the last at most
    2^63-1): checked before a study makes its folder."""
    from interp_toolkit.errors import UserError
    from interp_toolkit.runtime.validate import SEED_MAX, count, seed

    seed(first, "--seed")
    count(n, "--seeds", 1)
    if first + n - 1 > SEED_MAX:
        raise UserError(
            f"--seed {first} with --seeds {n} would need seeds up to {first + n - 1}, past the "
            f"largest ({SEED_MAX}): use --seed {SEED_MAX - n + 1} or lower."
        )
