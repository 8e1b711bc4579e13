"""``train_model``: train an attention-only model into a run folder, or continue one.

Read top to bottom: check the folder, read the corpus and build the codec, build (or restore) the
model, run TL's loop through the adapter (:mod:`.loop`) with :class:`StepLog` doing the per-step
bookkeeping, then write the weights. A resumed run ends with the same weights as an uninterrupted
one: the data are a function of the global sample index (``TrainStream``), and the checkpoint
holds the model, the optimizer state and the step.
"""

from __future__ import annotations

import dataclasses
import math
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from transformer_lens import TransformerBridge

from interp_toolkit.analysis.batches import default_probe, default_token_range
from interp_toolkit.analysis.heads import SCORE
from interp_toolkit.data import DataConfig, TrainStream, build_codec, tokenize_corpus, windows
from interp_toolkit.errors import Interrupted, UserError
from interp_toolkit.models import AttnOnlyConfig, build_model
from interp_toolkit.progress import progress_bar
from interp_toolkit.runs import (
    Run,
    RunPaths,
    apply_weights,
    init_run,
    load_run,
    read_codec,
    read_config,
    read_metrics,
    save_weights,
    write_config,
)
from interp_toolkit.tokenizer import Codec
from interp_toolkit.tokens import TokenWindows
from interp_toolkit.training.checkpoints import Progress, Start, prepare_out, save_checkpoint
from interp_toolkit.training.guard import StopSignals, run_guard
from interp_toolkit.training.loop import StopTraining, run_tl_train
from interp_toolkit.training.metrics import (
    MetricsLog,
    best_induction,
    first_induction_step,
    induction_layer_min,
    score_grids,
    truncate_metrics,
)
from interp_toolkit.training.settings import (
    Configs,
    TrainSettings,
    config_differences,
    recorded_configs,
    settings_dict,
)


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


def train_model(
    out: str | Path,
    model_cfg: AttnOnlyConfig,
    data_cfg: DataConfig,
    train_cfg: TrainSettings,
    *,
    resume: bool = False,
    restart: bool = False,
    preset: str | None = None,
    progress: bool = True,
    callbacks: Sequence[Callable[[StepInfo], None]] = (),
) -> TrainResult:
    """Train an attention-only model into the run folder ``out``.

    ``resume`` continues the run in ``out`` from its last checkpoint (from step 0 when it stopped
    before its first); the configs must equal the run's (a UserError lists what differs) except
    ``train_cfg.steps``, which may end the run later or earlier than planned (not before its
    checkpoint). ``restart`` discards the run in ``out`` first. Ctrl-C or SIGTERM saves a
    checkpoint at the step reached and raises :class:`~interp_toolkit.errors.Interrupted`.
    """
    paths = RunPaths(Path(out))
    for cfg in (model_cfg, data_cfg, train_cfg):
        cfg.validate()  # bad settings: before the folder is touched
    note = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    say = note if progress else (lambda msg: None)
    # 1. The folder: locked; new, or a run to continue (its recorded settings must match).
    with run_guard(paths) as signals:
        begin = prepare_out(paths, resume=resume, restart=restart, note=note)
        if begin.resumed:
            model_cfg, data_cfg, train_cfg, preset = _continued(
                paths, begin, (model_cfg, data_cfg, train_cfg)
            )
        if train_cfg.threads:
            torch.set_num_threads(train_cfg.threads)

        # 2. Data: the corpus, the codec (saved with the run), windows of n_ctx tokens.
        say(f"reading corpus {data_cfg.corpus!r} ...")
        corpus = tokenize_corpus(
            data_cfg.corpus, data_cfg.val_fraction, data_cfg.max_tokens, progress
        )
        codec = read_codec(paths) if begin.resumed else build_codec(corpus, data_cfg.vocab_size)
        model_cfg = model_cfg.replace(d_vocab=codec.d_vocab)
        train_windows = windows(corpus.train_ids, codec, model_cfg.n_ctx)
        val_windows = windows(corpus.val_ids, codec, model_cfg.n_ctx)
        if len(train_windows) == 0 and data_cfg.repeat_fraction < 1.0:
            raise UserError(
                f"corpus {data_cfg.corpus!r} has {len(corpus.train_ids)} tokens, fewer than one "
                f"window of n_ctx={model_cfg.n_ctx}: use a larger corpus or a smaller context."
            )
        say(
            f"corpus: {corpus.n_documents} documents, {len(corpus.train_ids):,} training tokens, "
            f"{len(train_windows):,} windows of {model_cfg.n_ctx}; vocabulary {codec.d_vocab}"
        )

        # 3. The model: fresh (and the run folder started), or restored from the checkpoint.
        model = build_model(model_cfg, codec=codec)
        checkpoint = begin.checkpoint
        start = checkpoint.progress if checkpoint else Progress()
        with signals.deferred():  # from here on, a stop signal ends the current step first
            if checkpoint is not None:
                apply_weights(model, checkpoint.weights, paths.checkpoint_weights(start.step))
            settings = settings_dict(data_cfg, train_cfg, preset)
            if begin.resumed:
                truncate_metrics(paths, start.step)  # only now: the checkpoint has loaded
                write_config(paths, model_cfg, settings)
                if start.step < train_cfg.steps:
                    paths.weights.unlink(
                        missing_ok=True
                    )  # "finished" no more; the checkpoint has them
                say(f"resuming at step {start.step} of {train_cfg.steps}")
            else:
                init_run(paths.root, codec, model_cfg, settings)

            # 4. TL's loop, from the saved step to train_cfg.steps.
            steps_done, elapsed, stopped = start.step, start.elapsed_s, False
            if start.step < train_cfg.steps:
                stream = _stream(train_windows, codec, model_cfg, data_cfg, train_cfg, start.step)
                log = StepLog(
                    paths,
                    model,
                    codec,
                    stream,
                    val_windows,
                    train_cfg,
                    start,
                    progress,
                    callbacks,
                    signals,
                )
                try:
                    steps_done, stopped = run_tl_train(
                        model,
                        stream,
                        train_cfg,
                        start_step=start.step,
                        optimizer_state=checkpoint.optimizer if checkpoint else None,
                        after_step=log,
                    )
                finally:
                    log.close()
                elapsed = log.elapsed()

            # 5. The trained model, and what training logged.
            save_weights(model, paths.weights)
        if signals.signum is not None:  # a signal during the last step: the run is complete
            raise Interrupted(
                f"stopped after the last step ({steps_done}): the run is complete.", signals.signum
            )
    metrics = read_metrics(paths.root)
    layer_min = induction_layer_min(model_cfg.n_layers)
    return TrainResult(
        run=load_run(paths.root),
        steps_done=steps_done,
        elapsed_s=elapsed,
        stopped_early=stopped,
        first_induction_step=first_induction_step(metrics, 0.4, layer_min=layer_min),
        metrics=metrics,
    )


def _continued(
    paths: RunPaths, begin: Start, requested: Configs
) -> tuple[AttnOnlyConfig, DataConfig, TrainSettings, str | None]:
    """The recorded configs of the run being resumed, with the requested step budget; a
    UserError when the request differs in anything else, or ends before the checkpoint."""
    config = read_config(paths.root)
    recorded = recorded_configs(config, paths.config)
    diffs = config_differences(recorded, requested, steps=False)
    if diffs:
        raise UserError(
            f"{paths.root} was trained with other settings than asked: {'; '.join(diffs)}. "
            "--resume continues a run as it was configured: leave those options out, or start "
            "it over with them with --restart (discards the run), or choose another --out."
        )
    steps = requested[2].steps
    done = begin.checkpoint.progress.step if begin.checkpoint else 0
    if steps < done:
        raise UserError(
            f"{paths.root} is already at step {done}: ask for --steps {done} or more "
            f"(the run was planned for {recorded[2].steps})."
        )
    model_cfg, data_cfg, train_cfg = recorded
    return (
        model_cfg,
        data_cfg,
        dataclasses.replace(train_cfg, steps=steps),
        config["settings"].get("preset"),
    )


def _stream(
    train_windows: TokenWindows,
    codec: Codec,
    model_cfg: AttnOnlyConfig,
    data_cfg: DataConfig,
    train_cfg: TrainSettings,
    start_step: int,
) -> TrainStream:
    low, high = default_token_range(codec)
    has_text = len(train_windows) > 0
    return TrainStream(
        train_windows if has_text else torch.zeros(1, model_cfg.n_ctx, dtype=torch.long),
        batch_size=train_cfg.batch_size,
        repeat_fraction=data_cfg.repeat_fraction if has_text else 1.0,
        low=low,
        high=high,
        span_min=data_cfg.span_min,
        span_max=data_cfg.span_max or max(data_cfg.span_min, model_cfg.n_ctx // 3),
        seed=train_cfg.seed,
        start_step=start_step,
        end_step=train_cfg.steps,
    )


class StepLog:
    """The bookkeeping after every optimizer step: metrics.jsonl (with head scores and held-out
    loss every ``score_every`` steps), snapshots, checkpoints (after step 1, every
    ``checkpoint_every`` steps, at the end, and when a stop signal came), the progress bar,
    callbacks, the stop a signal asked for, and the early stop once the best layer>=1 induction
    score stays above ``stop_score``."""

    def __init__(
        self,
        paths: RunPaths,
        model: TransformerBridge,
        codec: Codec,
        stream: TrainStream,
        val_windows: TokenWindows,
        cfg: TrainSettings,
        start: Progress,
        progress: bool,
        callbacks: Sequence[Callable[[StepInfo], None]],
        signals: StopSignals,
    ) -> None:
        self.paths, self.model, self.stream, self.val = paths, model, stream, val_windows
        self.cfg, self.start, self.callbacks, self.signals = cfg, start, callbacks, signals
        self.tokens = start.tokens
        self.score_batch = default_probe(
            codec, int(model.cfg.n_ctx), n_seqs=32, seed=cfg.seed + 7919
        )
        self.above: list[bool] = []
        self.t0 = time.perf_counter()
        self.metrics = MetricsLog(paths)
        self.bar = progress_bar(
            total=cfg.steps,
            initial=start.step,
            desc="train",
            unit="step",
            enabled=progress,
            dynamic_ncols=True,
        )

    def elapsed(self) -> float:
        return self.start.elapsed_s + time.perf_counter() - self.t0

    def close(self) -> None:
        self.bar.close()
        self.metrics.close()

    def __call__(self, step: int, loss: float, optimizer: torch.optim.Optimizer) -> None:
        cfg, end = self.cfg, self.stream.end_step
        n_ctx = int(self.model.cfg.n_ctx)
        self.tokens += self.stream.batch_size * n_ctx
        elapsed = self.elapsed()
        row: dict[str, Any] | None = None
        scores = None
        if step % cfg.log_every == 0 or step % cfg.score_every == 0 or step == end:
            run_elapsed = time.perf_counter() - self.t0
            row = {
                "step": step,
                "tokens": self.tokens,
                "loss": round(loss, 5),
                "elapsed_s": round(elapsed, 3),
                "tokens_per_s": round(
                    (self.tokens - self.start.tokens) / max(run_elapsed, 1e-9), 1
                ),
                "lr": optimizer.param_groups[0]["lr"],
            }
        if step % cfg.score_every == 0 or step == end:
            assert row is not None
            scores = self._scores_and_val_loss(row)
            induction = scores[SCORE["induction"].logged_as]
            best = best_induction(induction, 1) if len(induction) > 1 else 0.0
            self.above.append(best > (cfg.stop_score or math.inf))
        if row is not None:
            self.metrics.write(row)
            self.bar.set_postfix(
                loss=f"{loss:.3f}", tok_s=f"{row['tokens_per_s']:.0f}", refresh=False
            )
        if step in cfg.snapshot_steps:
            save_weights(self.model, self.paths.snapshot(step))
        stop = len(self.above) >= 2 and self.above[-1] and self.above[-2]
        signum = self.signals.signum if step < end else None  # the last step just finishes
        if step == 1 or step % cfg.checkpoint_every == 0 or step == end or stop or signum:
            save_checkpoint(self.paths, self.model, optimizer, Progress(step, self.tokens, elapsed))
        self.bar.update(1)
        info = StepInfo(step, loss, self.tokens, elapsed, self.model, scores)
        for cb in self.callbacks:
            cb(info)
        if signum is not None:
            raise Interrupted(
                f"stopped at step {step} of {end} by {signal.Signals(signum).name}: checkpoint "
                f"saved; {self.signals.resume_hint}",
                signum,
            )
        if stop:
            raise StopTraining

    def _scores_and_val_loss(self, row: dict[str, Any]) -> dict[str, list[list[float]]]:
        """Score the heads and the held-out loss (eval mode), adding both to ``row``."""
        self.model.eval()
        try:
            scores = score_grids(self.model, self.score_batch)
            with torch.no_grad():
                val = (
                    float(self.model(self.val[:64], return_type="loss")) if len(self.val) else None
                )
        finally:
            self.model.train()
        row.update(scores)
        if val is not None:
            row["val_loss"] = round(val, 5)
        return scores
