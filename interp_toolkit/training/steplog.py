"""``StepLog``: the bookkeeping after every optimizer step of :func:`~.trainer.train_model`
(metrics, head scores, snapshots, checkpoints, the progress bar, callbacks and stop signals),
``InductionStop``, the early-stop rule it asks, and ``StepInfo``, what callbacks see."""

from __future__ import annotations

import functools
import math
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformer_lens import TransformerBridge

from interp_toolkit.errors import Interrupted, UserError
from interp_toolkit.heads.induction import best_induction_score, logged_induction_key
from interp_toolkit.heads.repeats import default_probe
from interp_toolkit.runs.folder import RunPaths, read_metrics, save_weights
from interp_toolkit.runtime.devices import STRICT_FP32
from interp_toolkit.runtime.progress import progress_bar
from interp_toolkit.runtime.seeds import derive
from interp_toolkit.runtime.validate import first_three, non_finite
from interp_toolkit.text.codecs import Codec
from interp_toolkit.text.store import TokenWindows
from interp_toolkit.text.stream import TrainStream
from interp_toolkit.training.checkpoints import Progress, committed_step, save_checkpoint
from interp_toolkit.training.distributed import Cluster, any_rank, mean_over_ranks
from interp_toolkit.training.guard import LossWatch, StopSignals
from interp_toolkit.training.loop import StopTraining
from interp_toolkit.training.metrics import TEXT_WINDOWS, MetricsLog, score_grids, text_metrics
from interp_toolkit.training.settings import TrainSettings


@dataclass
class InductionStop:
    """The early stop after induction: due once the strongest induction head's score (the one
    owner: :func:`~interp_toolkit.heads.induction.best_induction_score`) has stayed above
    ``stop_score`` for ``wait`` steps (every scoring since the first above it). ``stop_score``
    None: never due."""

    stop_score: float | None
    wait: int
    above_since: int | None = None  # first step of the current streak above stop_score

    @classmethod
    def of(cls, cfg: TrainSettings) -> InductionStop:
        return cls(cfg.stop_score, cfg.score_every if cfg.stop_after is None else cfg.stop_after)

    def track(self, step: int, induction: list[list[float]]) -> None:
        """Read one scoring's induction grid (``[layer][head]``) at ``step``."""
        best = best_induction_score(induction)
        if best <= (self.stop_score or math.inf):
            self.above_since = None
        elif self.above_since is None:
            self.above_since = step

    def due(self, step: int) -> bool:
        return self.above_since is not None and step - self.above_since >= self.wait

    def due_step(self) -> int | None:
        """The step the stop falls due at if the score stays above the floor (None: below)."""
        return None if self.above_since is None else self.above_since + self.wait


def planned_steps(cfg: TrainSettings) -> str:
    """The steps a run will take, as its stop rule applies them (what a run's first line says)."""
    if cfg.stop_score is None:
        return f"{cfg.steps:,} steps"
    return (
        f"up to {cfg.steps:,} steps (stopping once the induction score has stayed above "
        f"{cfg.stop_score:g} for {InductionStop.of(cfg).wait:,} steps)"
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


class StepLog:
    """The bookkeeping after every optimizer step: metrics.jsonl (with head scores and held-out
    loss every ``score_every`` steps), snapshots, checkpoints (after step 1, every
    ``checkpoint_every`` steps, at the end, and when a stop signal came), the progress bar,
    callbacks, the stop a signal asked for, and the early stop that :class:`InductionStop` rules
    on (a resumed run re-reads its scorings).

    The loss is read from the device only on logged steps (the mean over the processes under
    torchrun). Under torchrun every process keeps count and runs the callbacks; rank 0 alone
    scores, writes and decides the early stop; the processes stop together
    (:func:`~.distributed.any_rank`)."""

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
        self.unk_id = codec.unk_id
        self.cfg, self.start, self.callbacks, self.signals = cfg, start, callbacks, signals
        self.cluster, self.device = cluster, next(model.parameters()).device
        self.kept = frozenset(cfg.snapshot_schedule())  # the steps whose weights are kept
        self.tokens = start.tokens
        self.score_batch = default_probe(
            codec, int(model.cfg.n_ctx), n_seqs=32, seed=derive(cfg.seed, "training_scores")
        )
        self.early_stop = InductionStop.of(cfg)
        # The first step whose loss was not finite (0: none yet), kept on the device: checking
        # it costs no host sync between the steps that read the loss anyway (see __call__).
        self.bad_loss_step = torch.zeros((), dtype=torch.long, device=self.device)
        # The losses since the last logged row, summed on the device (metrics.jsonl's mean_loss).
        self.loss_sum, self.loss_n = torch.zeros((), device=self.device), 0
        self.watch = LossWatch(math.log(int(model.cfg.d_vocab)))  # divergence (rank 0 decides)
        for i, row in enumerate(read_metrics(paths.root) if cluster.is_main else ()):  # resumed
            if (key := logged_induction_key(row)) is not None:
                self.early_stop.track(int(row["step"]), row[key])
            if isinstance(row.get("loss"), (int, float)):
                self.watch.read(int(row["step"]), float(row["loss"]), from_start=i == 0)
        self.t0 = time.perf_counter()
        self.metrics = MetricsLog(paths) if cluster.is_main else None
        self.bar = progress_bar(
            total=cfg.steps,
            initial=start.step,
            desc=paths.root.resolve().name,  # the run's name: side-by-side runs' bars tell apart
            unit="step",
            enabled=progress,
            dynamic_ncols=True,
        )
        self._bar_total()  # a resumed run may already be past the floor

    def _bar_total(self) -> None:
        """The bar's total: the budget, or the step the early stop falls due at once the score
        is past the floor (back to the budget if it falls below again)."""
        due = self.early_stop.due_step()
        total = self.cfg.steps if due is None else min(self.cfg.steps, due)
        if self.bar.total != total:
            self.bar.total = total
            self.bar.refresh()

    def elapsed(self) -> float:
        return self.start.elapsed_s + time.perf_counter() - self.t0

    def close(self) -> None:
        self.bar.close()
        if self.metrics is not None:
            self.metrics.close()

    def __call__(self, step: int, loss: torch.Tensor, optimizer: torch.optim.Optimizer) -> None:
        cfg, end, main = self.cfg, self.stream.end_step, self.cluster.is_main
        self.tokens += self.stream.batch_size * int(self.model.cfg.n_ctx)
        elapsed = self.elapsed()
        scored = step % cfg.score_every == 0 or step == end
        text = scored and (step % (cfg.text_every or cfg.score_every) == 0 or step == end)
        self.loss_sum, self.loss_n = self.loss_sum + loss.detach().float(), self.loss_n + 1
        first_bad = (self.bad_loss_step == 0) & ~torch.isfinite(loss.detach())
        self.bad_loss_step = torch.where(first_bad, step, self.bad_loss_step)
        saves = step == 1 or step % cfg.checkpoint_every == 0 or step == end
        snapshot = step in self.kept
        if step % cfg.log_every == 0 or scored or saves or snapshot:  # before anything is written
            self._refuse_non_finite(step, optimizer, weights=saves or snapshot)
        row: dict[str, Any] | None = None
        scores = None
        if step % cfg.log_every == 0 or scored:
            run_elapsed = time.perf_counter() - self.t0
            mean = lambda t: round(float(mean_over_ranks(t, self.cluster)), 5)  # noqa: E731
            row = {
                "step": step,
                "tokens": self.tokens,
                "loss": mean(loss),  # waits for the device
                "mean_loss": mean(self.loss_sum / self.loss_n),
                "elapsed_s": round(elapsed, 3),
                "tokens_per_s": round(
                    (self.tokens - self.start.tokens) / max(run_elapsed, 1e-9), 1
                ),
                "lr": optimizer.param_groups[0]["lr"],
            }
            self.loss_sum, self.loss_n = torch.zeros((), device=self.device), 0
        if scored and main:
            assert row is not None
            scores = self._scores_and_val_loss(row, text=text)
            self.early_stop.track(step, scores[logged_induction_key(scores) or "induction"])
            self._bar_total()
        if row is not None and self.metrics is not None:
            self.metrics.write(row)
            self.watch.read(step, row["loss"], from_start=self.start.step == 0)
            self.bar.set_postfix(
                loss=f"{row['loss']:.3f}", tok_s=f"{row['tokens_per_s']:.0f}", refresh=False
            )
        if snapshot and main:
            save_weights(self.model, self.paths.snapshot(step))
        stop = self.early_stop.due(step)  # rank 0 only
        signalled = self.signals.signum is not None and step < end  # the last step just finishes
        # a run never ends, nor writes a checkpoint, on a loss past the divergence bound
        past = self.watch.past and not signalled
        diverged = self.watch.diverged or (past and (stop or step == end))
        stop, signalled, diverged = (  # every process stops at the same step
            any_rank(flag, self.cluster, self.device) for flag in (stop, signalled, diverged)
        )
        if diverged:
            what = f"another process saw the loss diverge by step {step}"
            self._raise_diverged(self.watch.what() if main else what, optimizer)
        if main and (saves or stop or signalled) and not past:
            if not saves:  # a stop between the checked steps: check before saving
                self._refuse_non_finite(step, optimizer, weights=True, every_rank=False)
            save_checkpoint(self.paths, self.model, optimizer, Progress(step, self.tokens, elapsed))
        if main and stop and not snapshot:  # an early stop keeps its last weights as RUN@step
            save_weights(self.model, self.paths.snapshot(step))
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

    def _raise_diverged(self, what: str, optimizer: torch.optim.Optimizer) -> None:
        kept = committed_step(self.paths)
        keep = f"its last checkpoint (step {kept}) is kept" if kept else "no checkpoint was written"
        lr = optimizer.param_groups[0]["lr"]
        raise UserError(
            f"training diverged: {what} (lr {lr:g}); the run stops here and {keep}: train it "
            "again with --restart and a lower lr (or max_grad_norm, warmup_steps)."
        )

    def _refuse_non_finite(
        self, step: int, optimizer: torch.optim.Optimizer, *, weights: bool, every_rank: bool = True
    ) -> None:
        """Stop training (one line) when a loss since the last check (or, with ``weights``, a
        weight now) is NaN or infinite: nothing non-finite is logged, snapshotted or
        checkpointed, so the last checkpoint stays the last finite state. ``every_rank``: the
        processes decide together (a collective: called at the same steps on every rank)."""
        bad_step = int(self.bad_loss_step)  # waits for the device
        bad_weights: list[str] = []
        if weights and not bad_step:  # named as in the weights file (TL wraps each native module)
            named = self.model.named_parameters()
            bad_weights = non_finite((n.replace("._original_component", ""), p) for n, p in named)
        diverged = bool(bad_step or bad_weights)
        if every_rank and self.cluster.active:
            diverged = any_rank(diverged, self.cluster, self.device)
        if not diverged:
            return
        if bad_step:
            what = f"the loss became NaN or infinite at step {bad_step}"
        elif bad_weights:
            what = f"the weights became NaN or infinite by step {step} ({first_three(bad_weights)})"
        else:
            what = f"another process's loss or weights became NaN or infinite by step {step}"
        self._raise_diverged(what, optimizer)

    @functools.cached_property
    def text_windows(self) -> tuple[torch.Tensor, Any]:
        """The held-out windows every scoring reads, spread over the whole held-out set, and the
        document each comes from (read once; :meth:`~interp_toolkit.text.store.TokenWindows.spread`)."""
        return self.val.spread(TEXT_WINDOWS)

    def _scores_and_val_loss(
        self, row: dict[str, Any], *, text: bool
    ) -> dict[str, list[list[float]]]:
        """Score the heads on the synthetic probe, and (``text``) the held-out loss with the text
        measures on the same held-out windows (:func:`~.metrics.text_metrics`), in eval mode and
        exact float32, adding all to ``row``."""
        self.model.eval()
        try:
            with STRICT_FP32.apply(self.device), torch.no_grad():
                scores = score_grids(self.model, self.score_batch)
                row.update(scores)
                if len(self.val) and text:
                    windows, docs = self.text_windows
                    row.update(text_metrics(self.model, windows, unk_id=self.unk_id, groups=docs))
        finally:
            self.model.train()
        return scores
