"""Untrained models of a model's architecture, and their per-row scores on a batch (cached).

The ``untrained`` null models of :mod:`~interp_toolkit.heads.nulls` compare a head with the
heads of its layer in ``K`` freshly initialised models of the same architecture.
:func:`untrained_models` says how to make them:

- a toy model (TransformerLens-native, :func:`~interp_toolkit.models.build.build_model`): one bridge,
  re-drawn in place for each seed (:func:`~interp_toolkit.models.build.reinitialise`: the same weights
  as ``build_model`` with that seed, without booting a bridge per model);
- a bridge over a ``transformers`` model (GPT-2): the same class built from the model's config
  with its library's own initialisation, seeded, booted with
  ``TransformerBridge.boot_transformers``; one at a time, dropped after scoring.

A model's rows on a batch depend on its architecture, its seed and the batch only, so
:meth:`UntrainedModels.rows` keeps them per process (:data:`CACHE_SIZE` entries): discovery run
again on the same architecture and probe (checkpoints of one run, a sweep, the tests) builds no
untrained model twice.
"""

from __future__ import annotations

import copy
import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from transformer_lens import TransformerBridge

from interp_toolkit.heads.repeats import RepeatedTokens
from interp_toolkit.heads.scorer import RowScores, row_scores
from interp_toolkit.models.build import ModelConfig, build_model, positional_kind, reinitialise
from interp_toolkit.runtime.seeds import derive, seed_global

#: By default a layer's untrained pool holds at least this many values: ``K = ceil(pool / n_heads)``
#: models, at least 2. Toy models: 99, so a p-value can reach 1/100 (cpu preset, 4 heads: 25
#: models). Bridges over ``transformers`` models (GPT-2): 24, so p reaches 1/25 = 0.04 <= 0.05
#: (GPT-2 small: 2 models), run on the probe's first ``HF_ROWS`` rows: about the cost of scoring
#: the probe itself (benchmarks/gpt2_discovery_cost.py).
TOY_POOL, HF_POOL, HF_ROWS = 99, 24, 16
CACHE_SIZE = 4096

Scores = dict[str, RowScores]
_CACHE: dict[tuple[str, int, str], Scores] = {}


def fingerprint(batch: RepeatedTokens) -> str:
    """A digest of the batch's tokens and layout (what the cache keys on)."""
    h = hashlib.sha1()
    for t in (batch.tokens, batch.starts):
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    h.update(f"{batch.period},{batch.n_repeats},{batch.has_bos}".encode())
    return h.hexdigest()


@dataclass
class UntrainedModels:
    """Freshly initialised models of one architecture, one per seed.

    ``architecture``: the config as text (with the seed left out; the cache keys on it).
    ``make(seed)``: the model for a seed (may return the same bridge re-drawn; use it before the
    next call). ``rows``: how many of the probe's rows they run on (None: all).
    """

    architecture: str
    seeds: tuple[int, ...]
    make: Callable[[int], TransformerBridge] = field(repr=False)
    rows: int | None = None

    def scores(
        self,
        batches: Sequence[RepeatedTokens],
        *,
        batch_size: int | None = None,
        progress: Callable[[str], None] = lambda _msg: None,
    ) -> list[list[Scores]]:
        """``[model][batch]``: every untrained model's :func:`~.stripes.row_scores` on each batch
        (a model is made only when one of its batches is not cached yet)."""
        prints = [fingerprint(b) for b in batches]
        out = []
        for i, seed in enumerate(self.seeds):
            keys = [(self.architecture, seed, p) for p in prints]
            missing = [(k, b) for k, b in zip(keys, batches, strict=True) if k not in _CACHE]
            if missing:
                progress(f"untrained model {i + 1}/{len(self.seeds)}")
                model = self.make(seed)
                for k, b in missing:
                    while len(_CACHE) >= CACHE_SIZE:
                        _CACHE.pop(next(iter(_CACHE)))
                    _CACHE[k] = row_scores(model, b, batch_size=batch_size)
                del model
            out.append([_CACHE[k] for k in keys])
        return out


def untrained_models(
    model: TransformerBridge,
    *,
    model_cfg: ModelConfig | None = None,
    n_models: int | None = None,
    rows: int | None = None,
) -> UntrainedModels | None:
    """How to make untrained models like ``model``; None when it cannot be rebuilt.

    Toy models: ``model_cfg`` (the run's config, which keeps ``embed_init_std``; rebuilt from
    ``model.cfg`` when not given), ``n_models`` default ``max(2, ceil(99 / n_heads))``, all rows.
    ``transformers`` models: ``max(2, ceil(24 / n_heads))`` models on :data:`HF_ROWS` rows by
    default (:data:`TOY_POOL`, :data:`HF_POOL`).
    """
    cfg = model.cfg
    device = str(next(model.parameters()).device)
    native = getattr(cfg, "architecture", None) == "TransformerLensNative"
    if model_cfg is None and native and not cfg.normalization_type and cfg.attn_only:
        dims = ("n_layers", "d_model", "n_heads", "d_head", "n_ctx", "d_vocab")
        model_cfg = ModelConfig(
            **{k: int(getattr(cfg, k)) for k in dims},
            positional=positional_kind(model),
            seed=int(cfg.seed or 0),
        )
    if model_cfg is not None:
        n = n_models or _default_models(TOY_POOL, model_cfg.n_heads)
        return toy_untrained(model_cfg, _seeds(model_cfg.seed, n), rows=rows, device=device)
    hf = getattr(model, "original_model", None)
    if not hasattr(getattr(hf, "config", None), "to_json_string"):  # no transformers model
        return None
    base = copy.deepcopy(hf.config)

    def make(seed: int) -> TransformerBridge:
        with torch.random.fork_rng(devices=[]):
            seed_global(seed, "untrained_hf_init")
            fresh = type(hf)(copy.deepcopy(base))
        return TransformerBridge.boot_transformers(
            str(cfg.model_name), hf_model=fresh, tokenizer=model.tokenizer, device=device
        ).eval()

    return UntrainedModels(
        architecture=f"{type(hf).__name__}:{base.to_json_string(use_diff=False)}",
        seeds=_seeds(0, n_models or _default_models(HF_POOL, int(cfg.n_heads))),
        make=make,
        rows=HF_ROWS if rows is None else rows,
    )


def toy_untrained(
    cfg: ModelConfig, seeds: Sequence[int], *, rows: int | None = None, device: str = "cpu"
) -> UntrainedModels:
    """Toy models of ``cfg``'s architecture with these seeds: one bridge, re-drawn per seed."""
    bridge: list[TransformerBridge] = []

    def make(seed: int) -> TransformerBridge:
        if not bridge:
            bridge.append(build_model(cfg.replace(seed=seed), device=device))
            return bridge[0]
        return reinitialise(bridge[0], cfg.replace(seed=seed))

    return UntrainedModels(
        architecture=repr(cfg.replace(seed=0)), seeds=tuple(seeds), make=make, rows=rows
    )


def _default_models(pool: int, n_heads: int) -> int:
    return max(2, math.ceil(pool / n_heads))


def _seeds(model_seed: int, n: int) -> tuple[int, ...]:
    return tuple(derive(model_seed, "untrained_model", i) for i in range(n))
