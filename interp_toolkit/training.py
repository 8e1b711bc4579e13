"""Training with TransformerLens's own loop (``transformer_lens.tools.training.train``), wrapped.

What the wrapper adds around TL's loop, and how (TL's loop has no callbacks, so we observe it):

- **loss of every step**: TL's loop trains :class:`NextTokenLoss`, a thin module around the bridge
  that computes the same next-token loss with fused cross-entropy and remembers it;
- **metrics.jsonl**: every ``log_every`` steps the loss, tokens seen, tokens/s and LR; every
  ``score_every`` steps each head's induction and previous-token scores on repeated random tokens
  (random prefix, so the repeat offset varies) and the held-out loss;
- **checkpoints and resume**: torch's global optimizer step hooks give us TL's optimizer: after a
  step we save model + optimizer state every ``checkpoint_every`` steps (atomically); on
  ``resume`` the pre-step hook loads the saved optimizer state into TL's fresh optimizer before its
  first step. Data come from :class:`~interp_toolkit.data.TrainStream`, a function of the global
  sample index, so a resumed run ends with the same weights as an uninterrupted one;
- **snapshots** at chosen steps (``snapshots/step_N.safetensors``) for training-dynamics analysis;
- **warmup** set per global step by the pre-step hook (TL's own warmup restarts on resume and gives
  LR 0 on the first step — field guide §2 — so we don't use it);
- a progress bar with loss and tokens/s (TL's own tqdm bars cannot be turned off: we send TL's
  stderr to /dev/null while it runs and draw ours on the real stderr).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.optim.optimizer import (
    register_optimizer_step_post_hook,
    register_optimizer_step_pre_hook,
)
from transformer_lens import TransformerBridge
from transformer_lens.tools.training import TrainConfig, train

from interp_toolkit.data import DataConfig, TrainStream, build_codec, tokenize_corpus, windows
from interp_toolkit.errors import UserError
from interp_toolkit.io import write_json, write_text
from interp_toolkit.models import AttnOnlyConfig, build_model
from interp_toolkit.runs import (
    CONFIG,
    FORMAT_VERSION,
    METRICS,
    VOCAB,
    WEIGHTS,
    Run,
    load_weights,
    read_config,
    read_metrics,
    save_weights,
)
from interp_toolkit.tokenizer import CompactVocab, GPT2Codec, load_codec, save_codec
from interp_toolkit.tokens import TokenWindows

CHECKPOINT_DIR = "checkpoints"
SNAPSHOT_DIR = "snapshots"


@dataclass(frozen=True)
class TrainSettings:
    """Optimisation and bookkeeping. The optimizer is TL's AdamW (Adam when weight_decay is None)."""

    steps: int = 2000
    batch_size: int = 64
    lr: float = 1e-3
    betas: tuple[float, float] = (0.9, 0.98)
    weight_decay: float | None = 0.0
    warmup_steps: int = 0
    max_grad_norm: float | None = 1.0
    log_every: int = 10
    score_every: int = 100
    checkpoint_every: int = 200
    snapshot_steps: tuple[int, ...] = ()
    seed: int = 0
    threads: int | None = None
    stop_score: float | None = None  # stop early once the best induction score stays above this

    def validate(self) -> None:
        for name in ("steps", "batch_size", "log_every", "score_every", "checkpoint_every"):
            if getattr(self, name) < 1:
                raise UserError(f"{name}={getattr(self, name)} must be a positive integer.")
        if not self.lr > 0:
            raise UserError(f"lr={self.lr} must be positive.")

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrainSettings:
        names = {f.name for f in dataclasses.fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        for key in ("snapshot_steps", "betas"):
            if key in kw:
                kw[key] = tuple(kw[key])
        return cls(**kw)


@dataclass
class StepInfo:
    """What callbacks see after each optimizer step."""

    step: int
    loss: float
    tokens: int
    elapsed_s: float
    model: TransformerBridge
    scores: dict[str, Any] | None = None


@dataclass
class TrainResult:
    run: Run
    steps_done: int
    elapsed_s: float
    stopped_early: bool = False
    first_induction_step: int | None = None
    metrics: list[dict[str, Any]] = field(default_factory=list)


def settings_dict(
    data_cfg: DataConfig, train_cfg: TrainSettings, preset: str | None = None
) -> dict[str, Any]:
    return {
        "preset": preset,
        "data": dataclasses.asdict(data_cfg),
        "train": dataclasses.asdict(train_cfg),
    }


def _score_batch(codec: CompactVocab | GPT2Codec, n_ctx: int, seed: int) -> Any:
    from interp_toolkit.analysis.batches import default_probe

    return default_probe(codec, n_ctx, n_seqs=32, seed=seed)


def training_scores(model: TransformerBridge, batch: Any) -> dict[str, list[list[float]]]:
    """Each head's induction and previous-token score (rounded) for metrics.jsonl."""
    from interp_toolkit.analysis.scores import head_scores

    with torch.no_grad():
        s = head_scores(model, batch)
    return {
        "induction": [[round(float(v), 4) for v in row] for row in s.induction],
        "prev_token": [[round(float(v), 4) for v in row] for row in s.previous_token],
    }


def _val_loss(model: TransformerBridge, val: TokenWindows, max_windows: int = 64) -> float:
    with torch.no_grad():
        return float(model(val[:max_windows], return_type="loss"))


def _checkpoint_paths(out: Path) -> tuple[Path, Path, Path]:
    ck = out / CHECKPOINT_DIR
    return ck / "model.safetensors", ck / "optimizer.pt", ck / "state.json"


def _save_checkpoint(
    out: Path,
    model: TransformerBridge,
    optimizer: torch.optim.Optimizer,
    step: int,
    tokens: int,
    elapsed: float,
) -> None:
    m, o, s = _checkpoint_paths(out)
    m.parent.mkdir(parents=True, exist_ok=True)
    save_weights(model, m)
    tmp = o.with_suffix(".pt.tmp")
    torch.save(optimizer.state_dict(), tmp)
    os.replace(tmp, o)
    write_json(
        s, {"step": step, "tokens": tokens, "elapsed_s": round(elapsed, 3)}
    )  # written last: commits


def _prepare_out(out: Path, resume: bool) -> dict[str, Any] | None:
    """Check the run folder; return the saved checkpoint state when resuming."""
    if resume:
        read_config(out)  # missing / other version -> UserError
        _, o, s = _checkpoint_paths(out)
        if not s.is_file() or not o.is_file():
            raise UserError(
                f"{out} has no checkpoint to resume from: train it again without --resume."
            )
        return json.loads(s.read_text(encoding="utf-8"))
    if out.exists() and any(out.iterdir()):
        if (out / CONFIG).exists():
            raise UserError(
                f"{out} already holds a run: continue it with --resume, or choose another --out."
            )
        raise UserError(f"{out} is not empty: choose a new or empty folder for --out.")
    return None


def train_model(
    out: str | Path,
    model_cfg: AttnOnlyConfig,
    data_cfg: DataConfig,
    train_cfg: TrainSettings,
    *,
    resume: bool = False,
    preset: str | None = None,
    progress: bool = True,
    callbacks: Sequence[Callable[[StepInfo], None]] = (),
) -> TrainResult:
    """Train an attention-only model into the run folder ``out`` (or continue it with ``resume``).

    On resume the saved config is used (``model_cfg``/``data_cfg`` are ignored) except that
    ``train_cfg.steps`` may extend the run.
    """
    out = Path(out)
    state = _prepare_out(out, resume)
    if resume:
        saved = read_config(out)
        model_cfg = AttnOnlyConfig.from_dict(saved["model"])
        data_cfg = DataConfig(**saved["settings"]["data"])
        steps = train_cfg.steps
        train_cfg = TrainSettings.from_dict(saved["settings"]["train"])
        train_cfg = dataclasses.replace(train_cfg, steps=max(steps, train_cfg.steps))
        preset = saved["settings"].get("preset")
    model_cfg.validate()
    data_cfg.validate()
    train_cfg.validate()
    if train_cfg.threads:
        torch.set_num_threads(train_cfg.threads)

    say = (lambda msg: print(msg, file=sys.stderr, flush=True)) if progress else (lambda msg: None)
    say(f"reading corpus {data_cfg.corpus!r} ...")
    corpus = tokenize_corpus(data_cfg.corpus, data_cfg.val_fraction, data_cfg.max_tokens, progress)
    if resume:
        codec = load_codec(out / VOCAB)
    else:
        codec = build_codec(corpus, data_cfg.vocab_size)
    model_cfg = model_cfg.replace(d_vocab=codec.d_vocab)
    train_windows = windows(corpus.train_ids, codec, model_cfg.n_ctx)
    val_windows = windows(corpus.val_ids, codec, model_cfg.n_ctx)
    if len(train_windows) == 0 and data_cfg.repeat_fraction < 1.0:
        raise UserError(
            f"corpus {data_cfg.corpus!r} has {len(corpus.train_ids)} tokens, fewer than one window of "
            f"n_ctx={model_cfg.n_ctx}: use a larger corpus or a smaller context."
        )
    say(
        f"corpus: {corpus.n_documents} documents, {len(corpus.train_ids):,} training tokens, "
        f"{len(train_windows):,} windows of {model_cfg.n_ctx}; vocabulary {codec.d_vocab}"
    )

    model = build_model(model_cfg)
    start_step, tokens0, elapsed0 = 0, 0, 0.0
    if resume:
        assert state is not None
        load_weights(model, _checkpoint_paths(out)[0])
        start_step, tokens0, elapsed0 = (
            int(state["step"]),
            int(state["tokens"]),
            float(state["elapsed_s"]),
        )
        _truncate_metrics(out, start_step)
        say(f"resuming at step {start_step} of {train_cfg.steps}")
    else:
        out.mkdir(parents=True, exist_ok=True)
        save_codec(codec, out / VOCAB)
        write_json(
            out / CONFIG,
            {
                "format_version": FORMAT_VERSION,
                "model": model_cfg.to_dict(),
                "settings": settings_dict(data_cfg, train_cfg, preset),
            },
        )
    if state is None or start_step < train_cfg.steps:
        from interp_toolkit.analysis.batches import default_token_range

        low, high = default_token_range(codec)
        stream = TrainStream(
            train_windows
            if len(train_windows)
            else torch.zeros(1, model_cfg.n_ctx, dtype=torch.long),
            batch_size=train_cfg.batch_size,
            repeat_fraction=data_cfg.repeat_fraction if len(train_windows) else 1.0,
            low=low,
            high=high,
            span_min=data_cfg.span_min,
            span_max=data_cfg.span_max or max(data_cfg.span_min, model_cfg.n_ctx // 3),
            seed=train_cfg.seed,
            start_step=start_step,
            end_step=train_cfg.steps,
        )
        result = _run_tl_loop(
            out,
            model,
            codec,
            stream,
            val_windows,
            train_cfg,
            start_step,
            tokens0,
            elapsed0,
            progress,
            callbacks,
        )
    else:
        result = (start_step, elapsed0, False)
    steps_done, elapsed, stopped = result
    save_weights(model, out / WEIGHTS)
    metrics = read_metrics(out)
    # induction needs an earlier layer to compose with: count layer >= 1 heads (any head for 1 layer)
    first = first_induction_step(metrics, 0.4, layer_min=1 if model_cfg.n_layers > 1 else 0)
    from interp_toolkit.runs import load_run

    return TrainResult(
        run=load_run(out),
        steps_done=steps_done,
        elapsed_s=elapsed,
        stopped_early=stopped,
        first_induction_step=first,
        metrics=metrics,
    )


def first_induction_step(
    metrics: list[dict[str, Any]], threshold: float = 0.4, layer_min: int = 1
) -> int | None:
    """First logged step where a head in layer >= ``layer_min`` has induction score > threshold."""
    for row in metrics:
        ind = row.get("induction")
        if ind and any(v > threshold for row_l in ind[layer_min:] for v in row_l):
            return int(row["step"])
    return None


def _truncate_metrics(out: Path, step: int) -> None:
    rows = [r for r in read_metrics(out) if int(r.get("step", 0)) <= step]
    write_text(out / METRICS, "".join(json.dumps(r) + "\n" for r in rows))


class _StopTraining(Exception):
    pass


class NextTokenLoss(torch.nn.Module):
    """What TL's loop trains: ``forward(tokens, return_type="loss")`` on the wrapped bridge.

    The loss is the same mean next-token cross-entropy as the bridge's own ``return_type="loss"``
    (logits[:, :-1] against tokens[:, 1:]), computed with the fused ``F.cross_entropy`` instead of
    TL's log_softmax + gather, which materialises a [batch, pos, vocab] copy and cost ~7% of the step
    (benchmarks/train_throughput.py). The bridge's parameters are this module's parameters.
    """

    def __init__(self, model: TransformerBridge) -> None:
        super().__init__()
        self.model = model
        self.last_loss = math.nan

    def forward(self, tokens: torch.Tensor, return_type: str = "loss") -> torch.Tensor:
        logits = self.model(tokens)
        loss = torch.nn.functional.cross_entropy(
            logits[:, :-1].reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1)
        )
        self.last_loss = float(loss.detach())
        return loss


def _run_tl_loop(
    out: Path,
    model: TransformerBridge,
    codec: CompactVocab | GPT2Codec,
    stream: TrainStream,
    val_windows: TokenWindows,
    cfg: TrainSettings,
    start_step: int,
    tokens0: int,
    elapsed0: float,
    progress: bool,
    callbacks: Sequence[Callable[[StepInfo], None]],
) -> tuple[int, float, bool]:
    from tqdm.auto import tqdm

    n_ctx = int(model.cfg.n_ctx)
    score_batch = _score_batch(codec, n_ctx, seed=cfg.seed + 7919)
    params = {id(p) for p in model.parameters()}
    state: dict[str, Any] = {
        "step": start_step,
        "tokens": tokens0,
        "loss": math.nan,
        "optimizer": None,
    }
    t_start = time.perf_counter()
    real_stderr = sys.stderr
    bar = tqdm(
        total=cfg.steps,
        initial=start_step,
        desc="train",
        unit="step",
        file=real_stderr,
        disable=not progress,
        dynamic_ncols=True,
    )
    metrics_file = (out / METRICS).open("a", encoding="utf-8")
    above: list[bool] = []

    def ours(optimizer: torch.optim.Optimizer) -> bool:
        return any(id(p) in params for g in optimizer.param_groups for p in g["params"])

    def pre_step(optimizer: torch.optim.Optimizer, _args: Any, _kwargs: Any) -> None:
        if not ours(optimizer):
            return
        if state["optimizer"] is None:
            state["optimizer"] = optimizer
            # TL's TrainConfig has no betas: set ours on its optimizer before the first step.
            for group in optimizer.param_groups:
                group["betas"] = tuple(cfg.betas)
            opt_path = _checkpoint_paths(out)[1]
            if start_step > 0:
                optimizer.load_state_dict(
                    torch.load(opt_path, map_location="cpu", weights_only=True)
                )
        lr = cfg.lr * (
            min(1.0, (state["step"] + 1) / cfg.warmup_steps) if cfg.warmup_steps else 1.0
        )
        for group in optimizer.param_groups:
            group["lr"] = lr

    def post_step(optimizer: torch.optim.Optimizer, _args: Any, _kwargs: Any) -> None:
        if not ours(optimizer):
            return
        state["step"] += 1
        state["loss"] = wrapped.last_loss
        step = state["step"]
        state["tokens"] += stream.batch_size * n_ctx
        elapsed = elapsed0 + time.perf_counter() - t_start
        row: dict[str, Any] | None = None
        scores = None
        if step % cfg.log_every == 0 or step % cfg.score_every == 0 or step == stream.end_step:
            run_elapsed = time.perf_counter() - t_start
            tok_s = (state["tokens"] - tokens0) / max(run_elapsed, 1e-9)
            row = {
                "step": step,
                "tokens": state["tokens"],
                "loss": round(state["loss"], 5),
                "elapsed_s": round(elapsed, 3),
                "tokens_per_s": round(tok_s, 1),
                "lr": optimizer.param_groups[0]["lr"],
            }
        if step % cfg.score_every == 0 or step == stream.end_step:
            model.eval()
            try:
                scores = training_scores(model, score_batch)
                val = _val_loss(model, val_windows) if len(val_windows) else None
            finally:
                model.train()
            assert row is not None
            row.update(scores)
            if val is not None:
                row["val_loss"] = round(val, 5)
            best = (
                max(max(r) for r in scores["induction"][1:])
                if len(scores["induction"]) > 1
                else 0.0
            )
            above.append(best > (cfg.stop_score or math.inf))
        if row is not None:
            metrics_file.write(json.dumps(row) + "\n")
            metrics_file.flush()
            bar.set_postfix(loss=f"{state['loss']:.3f}", tok_s=f"{row['tokens_per_s']:.0f}")
        if step in cfg.snapshot_steps:
            save_weights(model, out / SNAPSHOT_DIR / f"step_{step}.safetensors")
        if step % cfg.checkpoint_every == 0 or step == stream.end_step:
            _save_checkpoint(out, model, optimizer, step, state["tokens"], elapsed)
        bar.update(1)
        info = StepInfo(step, state["loss"], state["tokens"], elapsed, model, scores)
        for cb in callbacks:
            cb(info)
        if len(above) >= 2 and above[-1] and above[-2]:
            _save_checkpoint(out, model, optimizer, step, state["tokens"], elapsed)
            raise _StopTraining

    tl_cfg = TrainConfig(
        num_epochs=1,
        batch_size=cfg.batch_size,
        lr=cfg.lr,
        seed=cfg.seed,
        max_grad_norm=cfg.max_grad_norm,
        weight_decay=cfg.weight_decay,
        optimizer_name="AdamW",
        device="cpu",
        print_every=None,
    )
    handles = [
        register_optimizer_step_pre_hook(pre_step),
        register_optimizer_step_post_hook(post_step),
    ]
    wrapped = NextTokenLoss(model)
    stopped = False
    try:
        # TL's loop draws tqdm bars we cannot turn off and prints "Moving model to device".
        with (
            open(os.devnull, "w") as devnull,
            contextlib.redirect_stderr(devnull),
            contextlib.redirect_stdout(devnull),
        ):
            train(wrapped, tl_cfg, stream)
    except _StopTraining:
        stopped = True
    finally:
        for h in handles:
            h.remove()
        bar.close()
        metrics_file.close()
        model.eval()
    return state["step"], elapsed0 + time.perf_counter() - t_start, stopped
