"""The adapter around TransformerLens's training loop (``transformer_lens.tools.training.train``).

TL's loop builds its own optimizer and DataLoader, has no callbacks, no resume and no per-step
learning rate, and draws progress bars that cannot be turned off. What we need from it, and how
(each line is a trap of TL 4.3's loop, worked around here):

1. **Loss.** TL calls ``model(tokens, return_type="loss")``: we hand it :class:`NextTokenLoss`, the
   same next-token loss with fused cross-entropy, which remembers the loss of the step.
2. **A hook after every step.** torch's *global* optimizer step hooks; they fire for every
   optimizer in the process, so they act only on the optimizer that holds our parameters.
3. **Betas.** TL's ``TrainConfig`` has none: they are set on its optimizer before the first step.
4. **Resume.** TL builds a fresh optimizer: the saved optimizer state is loaded into it before
   the first step.
5. **Learning rate.** TL's warmup restarts on resume and gives LR 0 on the first step, so it is
   not used: the LR of every global step is set before the step.
6. **Data order.** TL reseeds the global RNG and shuffles with a DataLoader: :class:`StepFeed`
   serves samples in stream order whatever index the sampler asks for.
7. **Output.** TL's tqdm bars and "Moving model to device" go to /dev/null while it runs.
8. **Stopping early.** ``after_step`` raises :class:`StopTraining`; TL's loop has no other exit.
9. **Precision.** Autocast wraps each forward pass and loss only (:meth:`NextTokenLoss.forward`),
   not TL's whole loop: the backward pass and the optimizer step run outside it, as torch
   advises, and no bf16 copy of a weight outlives the step that made it (an autocast block around
   the loop kept multiplying by the step-1 copies). Float32 matmul settings (TF32 on CUDA) hold
   for the whole loop.
10. **Host syncs.** TL's loop reads no value of the loss, and neither do we between logged steps:
   the loss stays a tensor on the device (reading it would make the host wait for the GPU).

On several processes (torchrun, :mod:`.distributed`) TL trains the DDP-wrapped loss module, and
each process's :class:`StepFeed` serves its own rows of every global batch.
"""

from __future__ import annotations

import contextlib
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

from interp_toolkit.runtime.devices import Precision
from interp_toolkit.text.stream import TrainStream
from interp_toolkit.training.distributed import SINGLE, Cluster, data_parallel, local_batch
from interp_toolkit.training.sdpa import fused_attention
from interp_toolkit.training.settings import TrainSettings

#: ``after_step(step, loss, optimizer)``, called with the global step number just completed and
#: the step's loss (a 0-d tensor on the training device, this process's rows only).
AfterStep = Callable[[int, torch.Tensor, torch.optim.Optimizer], None]


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

    The forward pass and the loss run under ``precision``'s autocast on ``device``: with bf16,
    the matmuls and SDPA take bf16 inputs (the weights stay float32) and the logits come out in
    bf16; the cross-entropy (its log-softmax and mean) runs in float32 (autocast's float32 list),
    so the loss is float32.
    """

    def __init__(
        self, model: TransformerBridge, precision: Precision, device: torch.device
    ) -> None:
        super().__init__()
        self.model, self.precision, self.device = model, precision, device
        self.last_loss = torch.tensor(float("nan"))

    def forward(self, tokens: torch.Tensor, return_type: str = "loss") -> torch.Tensor:
        with self.precision.autocast(self.device):
            logits = self.model(tokens[:, :-1])  # [batch, n_ctx, vocab]
            loss = torch.nn.functional.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1)
            )
        self.last_loss = loss.detach()
        return loss


class StepFeed(torch.utils.data.Dataset):
    """What TL's DataLoader reads: this process's rows of steps ``start_step``..``end_step`` of a
    :class:`~interp_toolkit.text.stream.TrainStream`, in order, on the training device.

    TL wraps the dataset in ``DataLoader(shuffle=True)`` after reseeding the global RNG, so it would
    reorder (and, on resume, repeat) samples: items are served by position within the loop (an
    internal cursor) and the index the sampler asks for is ignored. Process ``rank`` of
    ``world_size`` serves rows ``rank * b/W`` to ``(rank + 1) * b/W`` of every global batch of ``b``
    rows. Off the CPU each step's rows are copied to the device at once from pinned memory without
    blocking the host, so TL's ``batch["tokens"].to(device)`` has nothing left to do.
    ``__len__`` is the number of samples still to serve.
    """

    def __init__(
        self, stream: TrainStream, cluster: Cluster = SINGLE, device: torch.device | None = None
    ) -> None:
        self.stream, self.device = stream, device or torch.device("cpu")
        self.local = local_batch(stream.batch_size, cluster)
        self.first_row = cluster.rank * self.local
        self._cursor = 0
        self._rows = torch.zeros(0, dtype=torch.long)

    def __len__(self) -> int:
        return max(0, (self.stream.end_step - self.stream.start_step) * self.local)

    def __getitem__(self, _index: int) -> dict[str, torch.Tensor]:
        step, row = divmod(self._cursor, self.local)
        self._cursor += 1
        if row == 0:  # this process's rows of the step's global batch (on the CPU)
            first = self.first_row
            rows = self.stream.batch(
                self.stream.start_step + step, range(first, first + self.local)
            )
            if self.device.type == "cuda":
                rows = rows.pin_memory()
            self._rows = rows.to(self.device, non_blocking=True)
        return {"tokens": self._rows[row]}


def run_tl_train(
    model: TransformerBridge,
    stream: TrainStream,
    cfg: TrainSettings,
    *,
    start_step: int,
    optimizer_state: dict[str, Any] | None,
    after_step: AfterStep,
    device: torch.device | None = None,
    precision: Precision | None = None,
    cluster: Cluster = SINGLE,
) -> tuple[int, bool]:
    """Train ``model`` (already on ``device``) with TL's loop on ``stream`` from global step
    ``start_step``, calling ``after_step`` after every optimizer step, under ``precision``, with
    fused attention where no hook reads a pattern (:mod:`.sdpa`); on several processes each trains
    its rows of every batch and gradients are averaged. Returns (last step, stopped early)."""
    device = device or torch.device("cpu")
    loss = NextTokenLoss(model, precision or Precision(), device)
    feed = StepFeed(stream, cluster, device)
    params = {id(p) for p in loss.parameters()}
    # the global steps done, and TL's optimizer once seen
    at: dict[str, Any] = {"step": start_step, "optimizer": None}

    def ours(optimizer: torch.optim.Optimizer) -> bool:  # traps 2-5: TL's optimizer alone
        return any(id(p) in params for g in optimizer.param_groups for p in g["params"])

    def pre(optimizer: torch.optim.Optimizer, *_: Any) -> None:
        if not ours(optimizer):
            return
        if at["optimizer"] is None:  # TL's fresh optimizer, before its first step
            at["optimizer"] = optimizer
            for group in optimizer.param_groups:
                group["betas"] = tuple(cfg.betas)
            if optimizer_state is not None:
                optimizer.load_state_dict(optimizer_state)
        warm = cfg.warmup_steps
        for group in optimizer.param_groups:
            group["lr"] = cfg.lr * (min(1.0, (at["step"] + 1) / warm) if warm else 1.0)

    def post(optimizer: torch.optim.Optimizer, *_: Any) -> None:
        if ours(optimizer):
            at["step"] += 1
            after_step(at["step"], loss.last_loss, optimizer)

    tl_cfg = TrainConfig(
        num_epochs=1,
        batch_size=feed.local,
        lr=cfg.lr,
        seed=cfg.seed,
        max_grad_norm=cfg.max_grad_norm,
        weight_decay=cfg.weight_decay,
        optimizer_name="AdamW",
        device=device,
        print_every=None,
    )
    handles = [register_optimizer_step_pre_hook(pre), register_optimizer_step_post_hook(post)]
    stopped = False
    try:
        with (
            open(os.devnull, "w") as devnull,
            contextlib.redirect_stderr(devnull),
            contextlib.redirect_stdout(devnull),
            fused_attention(model),
            precision.matmuls(device),
        ):
            train(data_parallel(loss, device, cluster), tl_cfg, feed)
    except StopTraining:
        stopped = True
    finally:
        for h in handles:
            h.remove()
        model.eval()
    return at["step"], stopped
