"""``train_model``: train an attention-only model into a run folder, or continue one.

Read top to bottom: check the folder, read the corpus and build the codec, build (or restore) the
model, run TL's loop through the adapter (:mod:`.loop`) with :class:`StepLog` doing the per-step
bookkeeping, then write the weights. A resumed run ends with the same weights as an uninterrupted
one: the data are a function of the global sample index (``TrainStream``), and the checkpoint
holds the model, the optimizer state and the step.

Devices: the model trains on ``device`` (``auto`` picks a GPU when one is present) under the
run's ``precision``; checkpoints and weights are written as CPU tensors, so a run loads anywhere.
Under torchrun every process runs this function (:mod:`.distributed`); rank 0 alone writes.
"""

from __future__ import annotations

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
from interp_toolkit.devices import STRICT_FP32, precision_named
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
    read_metrics,
    save_weights,
    write_config,
)
from interp_toolkit.tokenizer import Codec
from interp_toolkit.tokens import TokenWindows
from interp_toolkit.training.checkpoints import Progress, continued_configs, save_checkpoint
from interp_toolkit.training.distributed import (
    Cluster,
    any_rank,
    barrier,
    cluster_from_env,
    guard_on,
    join_process_group,
    local_batch,
    mean_over_ranks,
    prepare_on,
    rank0_first,
    training_device,
)
from interp_toolkit.training.guard import StopSignals
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
    TrainSettings,
    settings_dict,
)


@dataclass
class StepInfo:
    """What callbacks see after each optimizer step. ``loss_tensor``: the step's loss on the
    training device (under torchrun, this process's rows); reading :attr:`loss` makes the host wait
    for the device. ``scores``: on scored steps (rank 0 only under torchrun)."""

    step: int
    loss_tensor: torch.Tensor
    tokens: int
    elapsed_s: float
    model: TransformerBridge
    scores: dict[str, Any] | None = None

    @property
    def loss(self) -> float:
        return float(self.loss_tensor)


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
    device: str | torch.device = "auto",
) -> TrainResult:
    """Train an attention-only model into the run folder ``out``, on ``device`` (``auto | cpu |
    cuda | cuda:N | mps``; under torchrun, see :mod:`.distributed`; callbacks run on every process).

    ``resume`` continues the run in ``out`` from its last checkpoint (from step 0 when it stopped
    before its first); the configs must equal the run's (a UserError lists what differs) except
    ``train_cfg.steps``, which may end the run later or earlier than planned (not before its
    checkpoint). ``restart`` discards the run in ``out`` first. Ctrl-C or SIGTERM saves a
    checkpoint at the step reached and raises :class:`~interp_toolkit.errors.Interrupted`.
    """
    paths = RunPaths(Path(out))
    for cfg in (model_cfg, data_cfg, train_cfg):
        cfg.validate()  # bad settings: before the folder is touched
    cluster = cluster_from_env()
    dev = training_device(device, cluster)
    local_batch(train_cfg.batch_size, cluster)  # a global batch that does not split: refused
    join_process_group(cluster, dev)
    progress = progress and cluster.is_main
    note = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    say = note if progress else (lambda msg: None)
    # 1. The folder: locked; new, or a run to continue (its recorded settings must match).
    with guard_on(cluster, paths) as signals:
        begin = prepare_on(cluster, paths, resume=resume, restart=restart, note=note)
        if begin.resumed:
            model_cfg, data_cfg, train_cfg, preset = continued_configs(
                paths, begin, (model_cfg, data_cfg, train_cfg)
            )
        if train_cfg.threads:
            torch.set_num_threads(train_cfg.threads)

        # 2. Data: the corpus (rank 0 tokenizes first), the codec (saved with the run), windows.
        say(f"reading corpus {data_cfg.corpus!r} ...")
        corpus = rank0_first(
            cluster,
            lambda: tokenize_corpus(
                data_cfg.corpus, data_cfg.val_fraction, data_cfg.max_tokens, progress
            ),
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
        model = build_model(model_cfg, device=dev, codec=codec)
        precision = precision_named(train_cfg.precision)
        checkpoint = begin.checkpoint
        start = checkpoint.progress if checkpoint else Progress()
        with signals.deferred():  # from here on, a stop signal ends the current step first
            if checkpoint is not None:
                apply_weights(model, checkpoint.weights, paths.checkpoint_weights(start.step))
            runtime = {
                "device": str(dev),
                "processes": cluster.world_size,
                "precision": precision.effective(dev).to_dict(),
            }
            settings = settings_dict(data_cfg, train_cfg, preset, runtime)
            if begin.resumed and cluster.is_main:
                truncate_metrics(paths, start.step)  # only now: the checkpoint has loaded
                write_config(paths, model_cfg, settings)
                if start.step < train_cfg.steps:
                    paths.weights.unlink(
                        missing_ok=True
                    )  # "finished" no more; the checkpoint has them
            elif cluster.is_main:
                init_run(paths.root, codec, model_cfg, settings)
            say(f"{'resuming at' if begin.resumed else 'from'} step {start.step} on {dev}")

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
                    cluster,
                )
                try:
                    steps_done, stopped = run_tl_train(
                        model,
                        stream,
                        train_cfg,
                        start_step=start.step,
                        optimizer_state=checkpoint.optimizer if checkpoint else None,
                        after_step=log,
                        device=dev,
                        precision=precision,
                        cluster=cluster,
                    )
                finally:
                    log.close()
                elapsed = log.elapsed()

            # 5. The trained model, and what training logged.
            if cluster.is_main:
                save_weights(model, paths.weights)
            barrier(cluster)
        if signals.signum is not None:  # a signal during the last step: the run is complete
            raise Interrupted(
                f"stopped after the last step ({steps_done}): the run is complete.", signals.signum
            )
    metrics = read_metrics(paths.root)
    layer_min = induction_layer_min(model_cfg.n_layers)
    return TrainResult(
        run=load_run(paths.root, device=dev),
        steps_done=steps_done,
        elapsed_s=elapsed,
        stopped_early=stopped,
        first_induction_step=first_induction_step(metrics, 0.4, layer_min=layer_min),
        metrics=metrics,
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
    score stays above ``stop_score``.

    The loss is read from the device only on logged steps (the mean over the processes under
    torchrun). Under torchrun every process keeps count and runs the callbacks; rank 0 alone
    scores and writes; the processes stop together (:func:`~.distributed.any_rank`)."""

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
        cluster: Cluster,
    ) -> None:
        self.paths, self.model, self.stream, self.val = paths, model, stream, val_windows
        self.cfg, self.start, self.callbacks, self.signals = cfg, start, callbacks, signals
        self.cluster, self.device = cluster, next(model.parameters()).device
        self.tokens = start.tokens
        self.score_batch = default_probe(
            codec, int(model.cfg.n_ctx), n_seqs=32, seed=cfg.seed + 7919
        )
        self.above: list[bool] = []
        self.t0 = time.perf_counter()
        self.metrics = MetricsLog(paths) if cluster.is_main else None
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
        if self.metrics is not None:
            self.metrics.close()

    def __call__(self, step: int, loss: torch.Tensor, optimizer: torch.optim.Optimizer) -> None:
        cfg, end, main = self.cfg, self.stream.end_step, self.cluster.is_main
        n_ctx = int(self.model.cfg.n_ctx)
        self.tokens += self.stream.batch_size * n_ctx
        elapsed = self.elapsed()
        scored = step % cfg.score_every == 0 or step == end
        row: dict[str, Any] | None = None
        scores = None
        if step % cfg.log_every == 0 or scored:
            run_elapsed = time.perf_counter() - self.t0
            row = {
                "step": step,
                "tokens": self.tokens,
                "loss": round(
                    float(mean_over_ranks(loss, self.cluster)), 5
                ),  # waits for the device
                "elapsed_s": round(elapsed, 3),
                "tokens_per_s": round(
                    (self.tokens - self.start.tokens) / max(run_elapsed, 1e-9), 1
                ),
                "lr": optimizer.param_groups[0]["lr"],
            }
        if scored and main:
            assert row is not None
            scores = self._scores_and_val_loss(row)
            induction = scores[SCORE["induction"].logged_as]
            best = best_induction(induction, 1) if len(induction) > 1 else 0.0
            self.above.append(best > (cfg.stop_score or math.inf))
        if row is not None and self.metrics is not None:
            self.metrics.write(row)
            self.bar.set_postfix(
                loss=f"{row['loss']:.3f}", tok_s=f"{row['tokens_per_s']:.0f}", refresh=False
            )
        if step in cfg.snapshot_steps and main:
            save_weights(self.model, self.paths.snapshot(step))
        stop = len(self.above) >= 2 and self.above[-1] and self.above[-2]
        signalled = self.signals.signum is not None and step < end  # the last step just finishes
        if self.cluster.active:  # every process stops at the same step
            stop, signalled = (
                any_rank(stop, self.cluster, self.device),
                any_rank(signalled, self.cluster, self.device),
            )
        checkpoint = step == 1 or step % cfg.checkpoint_every == 0 or step == end
        if main and (checkpoint or stop or signalled):
            save_checkpoint(self.paths, self.model, optimizer, Progress(step, self.tokens, elapsed))
        self.bar.update(1)
        info = StepInfo(step, loss, self.tokens, elapsed, self.model, scores)
        for cb in self.callbacks:
            cb(info)
        if signalled:
            signum = self.signals.signum or signal.SIGTERM  # another process got the signal
            raise Interrupted(
                f"stopped at step {step} of {end} by {signal.Signals(signum).name}: checkpoint "
                f"saved; {self.signals.resume_hint}",
                signum,
            )
        if stop:
            raise StopTraining

    def _scores_and_val_loss(self, row: dict[str, Any]) -> dict[str, list[list[float]]]:
        """Score the heads and the held-out loss (eval mode, exact float32), adding both to ``row``."""
        self.model.eval()
        try:
            with STRICT_FP32.apply(self.device), torch.no_grad():
                scores = score_grids(self.model, self.score_batch)
                val = (
                    float(self.model(self.val[:64].to(self.device), return_type="loss"))
                    if len(self.val)
                    else None
                )
        finally:
            self.model.train()
        row.update(scores)
        if val is not None:
            row["val_loss"] = round(val, 5)
        return scores
