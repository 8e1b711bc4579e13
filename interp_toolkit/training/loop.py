"""The adapter around TransformerLens's training loop (``transformer_lens.tools.training.train``).

TL's loop builds its own optimizer and DataLoader, has no callbacks, no resume and no per-step
learning rate, and draws progress bars that cannot be turned off. What we need from it, and how
(each line is a trap of TL 4.3's loop, worked around here or in :class:`~interp_toolkit.data.TrainStream`):

1. **Loss.** TL calls ``model(tokens, return_type="loss")``: we hand it :class:`NextTokenLoss`, the
   same next-token loss with fused cross-entropy, which remembers the loss of the step.
2. **A hook after every step.** torch's *global* optimizer step hooks; they fire for every
   optimizer in the process, so they act only on the optimizer that holds our parameters.
3. **Betas.** TL's ``TrainConfig`` has none: they are set on its optimizer before the first step.
4. **Resume.** TL builds a fresh optimizer: the saved optimizer state is loaded into it before
   the first step.
5. **Learning rate.** TL's warmup restarts on resume and gives LR 0 on the first step, so it is
   not used: the LR of every global step is set before the step.
6. **Data order.** TL reseeds the global RNG and shuffles with a DataLoader; ``TrainStream``
   serves samples in stream order whatever index the sampler asks for.
7. **Output.** TL's tqdm bars and "Moving model to device" go to /dev/null while it runs.
8. **Stopping early.** ``after_step`` raises :class:`StopTraining`; TL's loop has no other exit.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable
from typing import Any

import torch
from torch.optim.optimizer import (
    register_optimizer_step_post_hook,
    register_optimizer_step_pre_hook,
)
from transformer_lens import TransformerBridge
from transformer_lens.tools.training import TrainConfig, train

from interp_toolkit.data import TrainStream
from interp_toolkit.training.settings import TrainSettings

#: ``after_step(step, loss, optimizer)``, called with the global step number just completed.
AfterStep = Callable[[int, float, torch.optim.Optimizer], None]


class StopTraining(Exception):
    """Raised by ``after_step`` to end TL's loop after the current step."""


class NextTokenLoss(torch.nn.Module):
    """What TL's loop trains: ``forward(tokens, return_type="loss")`` on the wrapped bridge.

    ``tokens`` are windows of ``n_ctx + 1`` tokens: the model reads ``tokens[:, :-1]`` and every
    position is scored against the next token (``tokens[:, 1:]``), so the last position is trained
    too (the bridge's own ``return_type="loss"`` on ``n_ctx`` tokens never scores it). The mean
    cross-entropy is computed with the fused ``F.cross_entropy`` instead of TL's log_softmax +
    gather, which materialises a [batch, pos, vocab] copy and cost ~7% of the step
    (benchmarks/train_throughput.py). The bridge's parameters are this module's parameters.
    """

    def __init__(self, model: TransformerBridge) -> None:
        super().__init__()
        self.model = model
        self.last_loss = math.nan

    def forward(self, tokens: torch.Tensor, return_type: str = "loss") -> torch.Tensor:
        logits = self.model(tokens[:, :-1])  # [batch, n_ctx, vocab]
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1)
        )
        self.last_loss = float(loss.detach())
        return loss


class _StepHooks:
    """The optimizer pre/post-step hooks (traps 2-5): ``step`` counts global steps."""

    def __init__(
        self,
        loss: NextTokenLoss,
        cfg: TrainSettings,
        start_step: int,
        optimizer_state: dict[str, Any] | None,
        after_step: AfterStep,
    ) -> None:
        self.loss, self.cfg, self.step = loss, cfg, start_step
        self.optimizer_state, self.after_step = optimizer_state, after_step
        self.params = {id(p) for p in loss.parameters()}
        self.optimizer: torch.optim.Optimizer | None = None

    def _ours(self, optimizer: torch.optim.Optimizer) -> bool:
        return any(id(p) in self.params for g in optimizer.param_groups for p in g["params"])

    def pre(self, optimizer: torch.optim.Optimizer, _args: Any, _kwargs: Any) -> None:
        if not self._ours(optimizer):
            return
        if self.optimizer is None:  # TL's fresh optimizer, before its first step
            self.optimizer = optimizer
            for group in optimizer.param_groups:
                group["betas"] = tuple(self.cfg.betas)
            if self.optimizer_state is not None:
                optimizer.load_state_dict(self.optimizer_state)
        warm = self.cfg.warmup_steps
        lr = self.cfg.lr * (min(1.0, (self.step + 1) / warm) if warm else 1.0)
        for group in optimizer.param_groups:
            group["lr"] = lr

    def post(self, optimizer: torch.optim.Optimizer, _args: Any, _kwargs: Any) -> None:
        if not self._ours(optimizer):
            return
        self.step += 1
        self.after_step(self.step, self.loss.last_loss, optimizer)


def run_tl_train(
    model: TransformerBridge,
    stream: TrainStream,
    cfg: TrainSettings,
    *,
    start_step: int,
    optimizer_state: dict[str, Any] | None,
    after_step: AfterStep,
) -> tuple[int, bool]:
    """Train ``model`` with TL's loop on ``stream`` from global step ``start_step``, calling
    ``after_step`` after every optimizer step. Returns (last step, stopped early)."""
    loss = NextTokenLoss(model)
    hooks = _StepHooks(loss, cfg, start_step, optimizer_state, after_step)
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
        register_optimizer_step_pre_hook(hooks.pre),
        register_optimizer_step_post_hook(hooks.post),
    ]
    stopped = False
    try:
        with (
            open(os.devnull, "w") as devnull,
            contextlib.redirect_stderr(devnull),
            contextlib.redirect_stdout(devnull),
        ):
            train(loss, tl_cfg, stream)
    except StopTraining:
        stopped = True
    finally:
        for h in handles:
            h.remove()
        model.eval()
    return hooks.step, stopped
