"""Named recipes: architecture + data + training, for any number of layers (the study trains 1,
2, 3 and 8: :data:`LAYER_CHOICES`).

- ``post`` (earlier ``seed``, still accepted): the post's recipe (d_model 768, 12 heads of 64, n_ctx 128, full GPT-2 vocabulary,
  lr 3e-4, batch 32, plain text). Meant for a GPU; the post trained on OpenWebText
  (``--corpus hf:Skylion007/openwebtext``); offline it falls back to the embedded corpus.
- ``cpu``: what grows induction heads on a 2-core CPU in minutes (see README "The CPU recipe"):
  a compact vocabulary, a short context, and 90% of every batch made of repeated-span windows.
- ``text``: natural text read as bytes (docs/recipes.md §1): plain stdlib source only (no
  synthetic windows), every byte its own token (256 ids, nothing unknown), context 256, batch 4,
  shortformer positions, bf16 autocast (float32 weights) with denormals flushed. Through the
  toolkit each of five seeds grows a head with the induction role (docs/recipes.md §0f, §0g).
- ``text-bpe``: the earlier natural-text recipe on GPT-2 BPE compacted to 256 ids (20% of stdlib
  tokens become ``<unk>``), context 64: it grows a weak layer-1 induction head that does not
  reach the role rule (0.095 against 0.4 after 12,000 steps, docs/recipes.md §2).

Either preset with ``mlp=True`` (``train --mlp``): the same recipe (data, optimiser, steps, seed)
on a model with an MLP in every block (d_mlp = 4 * d_model, GELU) and pre-norm LayerNorm, the
GPT-2 block; so an MLP run differs from its attention-only twin in the architecture alone.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp_toolkit.errors import UserError
from interp_toolkit.models.build import ModelConfig
from interp_toolkit.runs.folder import RunPaths, read_config
from interp_toolkit.text.stream import DataConfig
from interp_toolkit.training import TrainSettings
from interp_toolkit.training.settings import recorded_configs, recorded_preset_name

#: The depths the study trains by default (``reproduce``); ``train`` takes any whole number >= 1.
LAYER_CHOICES = (1, 2, 3, 8)


@dataclass(frozen=True)
class Preset:
    name: str
    model: ModelConfig
    data: DataConfig
    train: TrainSettings
    #: Whether a study trains this recipe's 2+-layer models only until induction has formed (then
    #: its 1-layer control as long), or every depth its fixed number of steps, side by side.
    stops_on_induction: bool = True
    #: How long "until induction has formed" is: the steps a study trains a 2+-layer model once
    #: its logged induction score has passed the floor (the score must stay above it that long).
    after_induction: int = 200

    def validate(self) -> None:
        for cfg in (self.model, self.data, self.train):
            cfg.validate()


def _post(n_layers: int) -> Preset:
    return Preset(
        name="post",
        model=ModelConfig(
            n_layers=n_layers, d_model=768, n_heads=12, d_head=64, n_ctx=128, d_vocab=50257
        ),
        data=DataConfig(corpus="stdlib", vocab_size=None, repeat_fraction=0.0),
        train=TrainSettings(
            steps=20_000,
            batch_size=32,
            lr=3e-4,
            log_every=50,
            score_every=500,
            checkpoint_every=1000,
        ),
    )


def _small(n_layers: int, n_ctx: int, d_vocab: int, **more: Any) -> ModelConfig:
    """The CPU recipes' model: d_model 128, four heads of 32."""
    return ModelConfig(
        n_layers=n_layers, d_model=128, n_heads=4, d_head=32, n_ctx=n_ctx, d_vocab=d_vocab, **more
    )


def _cpu(n_layers: int) -> Preset:
    return Preset(
        name="cpu",
        model=_small(n_layers, n_ctx=32, d_vocab=1024),
        data=DataConfig(corpus="stdlib", vocab_size=1024, repeat_fraction=0.9),
        train=TrainSettings(
            steps=1500,
            batch_size=128,
            lr=3e-3,
            log_every=10,
            score_every=50,
            checkpoint_every=250,
            # one thread, as a study trains it: float32 results depend on the thread count, so
            # `train --preset cpu` gives the study's run bit for bit (on the same CPU)
            threads=1,
        ),
    )


def _text(n_layers: int) -> Preset:
    """Natural text read as bytes (docs/recipes.md §1: the settings screened, over seeds)."""
    return Preset(
        name="text",
        after_induction=TEXT_AFTER_INDUCTION,
        model=_small(n_layers, n_ctx=256, d_vocab=256, positional="shortformer"),
        data=DataConfig(corpus="stdlib", codec="bytes", vocab_size=None, repeat_fraction=0.0),
        train=TrainSettings(
            steps=TEXT_STEPS,
            batch_size=4,
            lr=3e-3,
            warmup_steps=200,
            log_every=100,
            # the head scores on the synthetic probe every 250 steps (a fraction of a second),
            # so the phase change is seen at that resolution; the text measures over 256
            # held-out windows of 256 tokens (seconds each) and the kept snapshots every 1,000
            score_every=250,
            text_every=1000,
            snapshot_every=1000,
            checkpoint_every=1000,
            threads=1,
            # bf16 autocast, float32 weights: 1.30x our float32 step here, every seed checked
            # growing the role (docs/benchmarks.md, recipes.md §0i)
            precision="bf16",
            flush_denormal=True,
        ),
    )


#: The byte preset's budget: the post's own (40-50k steps), 51M tokens here. 30,000 (past the
#: slowest seed screened on an AMD CPU, step 28,247, docs/recipes.md §0c) was not enough on an
#: Intel CPU with AMX, where seed 2's score was 0.389 at step 30,000 (docs/recipes.md §0j).
TEXT_STEPS = 50_000
#: A study trains the byte preset's 2+-layer models this long past the floor: the score passes it
#: while the head is still soft, and the specificity test gives the role 0-3,000 steps later over
#: the five seeds measured (experiments/text_seeds.py, docs/recipes.md §0f).
TEXT_AFTER_INDUCTION = 3_000


def _text_bpe(n_layers: int) -> Preset:
    """The earlier natural-text recipe on GPT-2 BPE compacted to 256 ids: it grew no head with
    the induction role in 12,000 steps (docs/recipes.md §2); kept to measure against."""
    return Preset(
        name="text-bpe",
        stops_on_induction=False,
        model=_small(n_layers, n_ctx=64, d_vocab=256, positional="shortformer"),
        data=DataConfig(corpus="stdlib", vocab_size=256, repeat_fraction=0.0),
        train=TrainSettings(
            steps=TEXT_BPE_STEPS,
            batch_size=64,
            lr=6e-3,
            warmup_steps=200,
            log_every=50,
            score_every=250,
            checkpoint_every=1000,
            threads=1,
        ),
    )


#: The BPE text preset's budget: the longest run measured to its end here (12,000 steps, 49M
#: tokens, 23 minutes beside its 1-layer control, docs/recipes.md §2).
TEXT_BPE_STEPS = 12_000
PRESETS = {"cpu": _cpu, "post": _post, "text": _text, "text-bpe": _text_bpe}
#: Earlier names of presets, still read (runs recorded them): "seed" was the post's recipe's name
#: before "seed" came to mean a random seed only.
PRESET_ALIASES = {"seed": "post"}


def with_mlp(preset: Preset) -> Preset:
    """``preset`` on the GPT-2 block: an MLP of 4 * d_model GELU neurons and LayerNorm. GELU as
    in GPT-2 (so toy and GPT-2 neurons read alike), and it has no dead units: ReLU neurons that
    stop firing early at the cpu preset's lr 3e-3 would never recover."""
    d = preset.model.d_model
    model = preset.model.replace(mlp=True, d_mlp=4 * d, act_fn="gelu", normalization="LN")
    return dataclasses.replace(preset, model=model)


def get_preset(name: str, n_layers: int, *, mlp: bool = False) -> Preset:
    name = PRESET_ALIASES.get(name, name)
    if name not in PRESETS:
        raise UserError(f"unknown preset {name!r}: use one of {', '.join(PRESETS)}.")
    check_layers(n_layers)
    preset = PRESETS[name](n_layers)
    return with_mlp(preset) if mlp else preset


def check_layers(n_layers: object) -> int:
    """A depth: a whole number, 1 or more (``layers="2"``, a str, is named as such)."""
    if isinstance(n_layers, bool) or not isinstance(n_layers, int):
        raise UserError(
            f"layers={n_layers!r} is a {type(n_layers).__name__}, not a whole number: give the "
            "number of layers as an int, e.g. layers=2."
        )
    if n_layers < 1:
        raise UserError(f"--layers {n_layers} cannot work: use a whole number, 1 or more.")
    return n_layers


def induction_outcome(preset: Preset, rows: list[dict], steps_done: int) -> str | None:
    """When a 2+-layer model that trains until induction ends without it: one sentence saying
    so, with the best score it reached, and, when its ``d_model`` is below its preset's (the size
    the preset's induction was measured at), that the smaller model may be why. None otherwise."""
    from interp_toolkit.heads.induction import best_induction_score, logged_induction_key
    from interp_toolkit.stats.thresholds import THRESHOLDS

    if preset.model.n_layers < 2 or not preset.stops_on_induction or not rows:
        return None
    scored = [
        (best_induction_score(r[k]), int(r["step"]))
        for r in rows
        if (k := logged_induction_key(r)) is not None
    ]
    if not scored or max(scored)[0] > THRESHOLDS.induction:
        return None
    best, step = max(scored)
    said = (
        f"induction did not form: the best layer-1+ induction score was {best:.3f} (at step "
        f"{step}), below the floor {THRESHOLDS.induction:g}, in {steps_done:,} steps"
    )
    default = PRESETS[preset.name](preset.model.n_layers).model if preset.name in PRESETS else None
    if default is not None and preset.model.d_model < default.d_model:
        return (
            f"{said}; this model's d_model is {preset.model.d_model}, the {preset.name} preset's "
            f"{default.d_model} (the size its induction was measured at): a smaller model may not "
            f"grow it in this budget, so train at d_model {default.d_model}, or longer (--steps)."
        )
    return f"{said}: train longer (--steps) to see whether it forms."


def with_overrides(preset: Preset, **changes: object) -> Preset:
    """Replace fields by name across model/data/train (``None`` values are ignored). A name
    several configs have is replaced in each: ``seed`` sets the model's init and the data order.

    Derived shapes follow: a new ``d_model`` without ``d_head`` keeps the number of heads
    (``d_head = d_model / n_heads``) and an MLP's ``d_mlp = 4 * d_model`` unless given. The CLI
    and the API both come here, so ``train(d_model=256)`` and ``--d-model 256`` agree."""
    d_model = changes.get("d_model")
    if d_model is not None and changes.get("d_head") is None:
        n_heads = int(changes.get("n_heads") or preset.model.n_heads)  # type: ignore[call-overload]
        if not isinstance(d_model, int) or d_model % n_heads:
            raise UserError(
                f"d_model={d_model!r} cannot work with {n_heads} heads: use a multiple of "
                f"{n_heads}."
            )
        changes = {**changes, "d_head": d_model // n_heads}
        if preset.model.mlp and changes.get("d_mlp") is None:
            changes["d_mlp"] = 4 * d_model
    parts = {"model": preset.model, "data": preset.data, "train": preset.train}
    updates: dict[str, dict[str, object]] = {name: {} for name in parts}
    for key, value in changes.items():
        if value is None:
            continue
        owners = [n for n, cfg in parts.items() if key in {f.name for f in dataclasses.fields(cfg)}]
        if not owners:
            raise KeyError(key)
        for name in owners:
            updates[name][key] = value
    return dataclasses.replace(
        preset, **{n: dataclasses.replace(cfg, **updates[n]) for n, cfg in parts.items()}
    )


def until_induction(preset: Preset, after: int | None = None) -> Preset:
    """``preset`` stopping once its induction score has stayed above the floor for ``after``
    steps (default: its ``after_induction``), as a study trains it: for a 2+-layer model of a
    preset that stops on induction; any other preset is returned unchanged (a 1-layer model has no
    layer-1 head to wait for). The steps stay the budget."""
    from interp_toolkit.stats.thresholds import THRESHOLDS

    if not preset.stops_on_induction or preset.model.n_layers < 2:
        return preset
    return with_overrides(
        preset,
        stop_score=THRESHOLDS.induction,
        stop_after=preset.after_induction if after is None else after,
    )


def recipe(
    name: str | None = None,
    layers: int | None = None,
    *,
    mlp: bool = False,
    resumed: str | Path | None = None,
    all_steps: bool = False,
    **changes: object,
) -> Preset:
    """A training's recipe, assembled in this one place (``train`` and :func:`interp_toolkit.api.
    train`): preset ``name`` (default cpu) at ``layers`` (default 2), or, for a run ``resumed``,
    the preset its config.json records (a ``name`` given replaces it, at the run's depth);
    ``changes`` replace fields by name (:func:`with_overrides`: ``None`` is ignored, d_head and
    d_mlp follow d_model). Without ``steps`` (or ``all_steps``) a new 2+-layer run stops once
    induction has formed (:func:`until_induction`). Every setting is checked before any folder
    exists."""
    if all_steps and changes.get("steps") is not None:
        raise UserError(
            "--steps and --all-steps (steps= and all_steps=True) both say how long to train: give "
            "one (--all-steps: the preset's whole budget)."
        )
    if resumed is not None:  # as the run was trained: options given must match it (train_model)
        config = read_config(resumed)
        recorded = recorded_configs(config, RunPaths(Path(resumed)).config)
        p = Preset(recorded_preset_name(config) or "custom", *recorded)
        if mlp and not p.model.mlp:
            raise UserError(
                f"{resumed} was trained without --mlp: resume it without, or --restart."
            )
        if name is not None:
            p = get_preset(name, p.model.n_layers, mlp=mlp or p.model.mlp)
    else:
        p = get_preset("cpu" if name is None else name, 2 if layers is None else layers, mlp=mlp)
    try:
        p = with_overrides(p, **{"n_layers": layers, **changes})
    except KeyError as exc:
        raise UserError(
            f"train has no setting {exc.args[0]!r}: use a field of the preset's model, data or "
            "training settings (steps, seed, d_model, n_ctx, corpus, ...)."
        ) from None
    if resumed is None and changes.get("steps") is None and not all_steps:
        p = until_induction(p)
    p.validate()
    return p
