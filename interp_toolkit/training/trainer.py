"""``train_model``: train an attention-only model into a run folder, or continue one.

Read top to bottom: check the folder, read the corpus and build the codec, build (or restore) the
model, run TL's loop through the adapter (:mod:`.loop`) with :class:`~.steplog.StepLog` doing the
per-step bookkeeping, then write the weights. A resumed run ends with the same weights as an
uninterrupted one: the data are a function of the global sample index (``TrainStream``), and the
checkpoint holds the model, the optimizer state and the step.

Devices: the model trains on ``device`` (``auto`` picks a GPU when one is present) under the
run's ``precision``; checkpoints and weights are written as CPU tensors, so a run loads anywhere.
Under torchrun every process runs this function (:mod:`.distributed`); rank 0 alone writes.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from interp_toolkit.errors import Interrupted, UserError
from interp_toolkit.heads.induction import first_induction_step
from interp_toolkit.heads.repeats import default_token_range
from interp_toolkit.models.build import ModelConfig, build_model
from interp_toolkit.runs.folder import (
    Run,
    RunPaths,
    apply_weights,
    init_run,
    load_run,
    read_codec,
    read_metrics,
    record_weights,
    recorded_digests,
    save_weights,
    write_config,
)
from interp_toolkit.runtime.devices import keep_freed_memory, precision_named
from interp_toolkit.text.codecs import Codec
from interp_toolkit.text.store import TokenWindows
from interp_toolkit.text.stream import (
    DataConfig,
    TrainStream,
    build_codec,
    tokenize_corpus,
    windows,
)
from interp_toolkit.training.checkpoints import Progress, continued_configs
from interp_toolkit.training.distributed import (
    barrier,
    cluster_from_env,
    guard_on,
    join_process_group,
    local_batch,
    prepare_on,
    rank0_first,
    training_device,
)
from interp_toolkit.training.loop import run_tl_train
from interp_toolkit.training.metrics import truncate_metrics
from interp_toolkit.training.settings import TrainSettings, settings_dict
from interp_toolkit.training.steplog import StepInfo, StepLog


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
    model_cfg: ModelConfig,
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
    name = f"[{paths.root.resolve().name}] "  # side-by-side runs (a study's workers) print one log
    note = lambda msg: print(name + msg, file=sys.stderr, flush=True)  # noqa: E731
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
        if train_cfg.flush_denormal and dev.type == "cpu":
            torch.set_flush_denormal(True)
        if dev.type == "cpu":
            keep_freed_memory()  # no page faults on each step's fresh tensors

        # 2. Data: the corpus (rank 0 tokenizes first), the codec (saved with the run), training
        #    windows of n_ctx + 1 tokens (the model reads n_ctx and every position, the last one
        #    too, predicts the next; see TrainStream).
        say(f"reading corpus {data_cfg.corpus!r} ...")
        read = (data_cfg.corpus, data_cfg.val_fraction, data_cfg.max_tokens, progress)
        corpus = rank0_first(cluster, lambda: tokenize_corpus(*read, store=data_cfg.store))
        digest = corpus.digest() if cluster.is_main else None
        if begin.resumed:
            check_corpus(paths, digest, data_cfg.corpus)
        codec = (
            read_codec(paths)
            if begin.resumed
            else build_codec(corpus, data_cfg.vocab_size, data_cfg.codec)
        )
        model_cfg = model_cfg.replace(d_vocab=codec.d_vocab)
        train_windows = windows(corpus.train_ids, codec, model_cfg.n_ctx + 1)
        val_windows = windows(corpus.val_ids, codec, model_cfg.n_ctx)
        if len(train_windows) == 0 and data_cfg.repeat_fraction < 1.0:
            raise UserError(
                f"corpus {data_cfg.corpus!r} has {len(corpus.train_ids)} tokens, fewer than one "
                f"window of n_ctx+1={model_cfg.n_ctx + 1}: use a larger corpus or a smaller "
                "context."
            )
        say(
            f"corpus: {corpus.n_documents} documents, {len(corpus.train_ids):,} training tokens, "
            f"{len(train_windows):,} windows of {model_cfg.n_ctx} + 1; vocabulary {codec.d_vocab}"
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
                if start.step < train_cfg.steps:  # "finished" no more; the checkpoint has them
                    paths.weights.unlink(missing_ok=True)
            elif cluster.is_main:
                init_run(paths.root, codec, model_cfg, settings, corpus=digest)
            say(f"{'resuming at' if begin.resumed else 'from'} step {start.step} on {dev}")

            # 4. TL's loop, from the saved step to train_cfg.steps.
            steps_done, elapsed, stopped = start.step, start.elapsed_s, False
            if start.step < train_cfg.steps:
                stream = stream_for(
                    train_windows, codec, model_cfg, data_cfg, train_cfg, start.step
                )
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
                record_weights(paths)
            barrier(cluster)
        if signals.signum is not None:  # a signal during the last step: the run is complete
            raise Interrupted(
                f"stopped after the last step ({steps_done}): the run is complete.", signals.signum
            )
    metrics = read_metrics(paths.root)
    return TrainResult(
        run=load_run(paths.root, device=dev),
        steps_done=steps_done,
        elapsed_s=elapsed,
        stopped_early=stopped,
        first_induction_step=first_induction_step(metrics),
        metrics=metrics,
    )


def check_corpus(paths: RunPaths, digest: str | None, corpus: str) -> None:
    """The corpus must hold the tokens the run was trained on (its config.json's digest):
    an edited or replaced corpus would give other batches than the run's own."""
    recorded = recorded_digests(paths).get("corpus")
    if recorded and digest and digest != recorded:
        raise UserError(
            f"corpus {corpus!r} has changed since {paths.root} was trained on it (its tokens' "
            "digest differs from the one config.json records): the run's own batches cannot be "
            "read from it; restore the corpus as it was, or train anew with --restart."
        )


def stream_for(
    train_windows: TokenWindows,
    codec: Codec,
    model_cfg: ModelConfig,
    data_cfg: DataConfig,
    train_cfg: TrainSettings,
    start_step: int,
) -> TrainStream:
    low, high = default_token_range(codec)
    has_text = len(train_windows) > 0
    span_min, span_max = data_cfg.span_range(model_cfg.n_ctx)
    return TrainStream(
        train_windows if has_text else torch.zeros(1, model_cfg.n_ctx + 1, dtype=torch.long),
        batch_size=train_cfg.batch_size,
        repeat_fraction=data_cfg.repeat_fraction if has_text else 1.0,
        low=low,
        high=high,
        span_min=span_min,
        span_max=span_max,
        seed=train_cfg.seed,
        start_step=start_step,
        end_step=train_cfg.steps,
    )
