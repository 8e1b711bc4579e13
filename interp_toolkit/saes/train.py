"""Training an SAE on activations streamed from the model (:func:`train_sae`), top to bottom.

The batch of step ``s`` is a function of the seed and ``s``: block ``s // batches_per_block``
(rows of :class:`~.activations.TokenSource`, run through the model to the hook), permuted by a
generator seeded with (seed, block), slice ``s % batches_per_block``. So a resumed SAE sees
exactly the batches an uninterrupted one would, and only one block of activations is ever held.

- Inputs are scaled so that their mean norm is ``sqrt(d_in)`` (SAELens's
  ``normalize_activations="expected_average_only_in"``; the factor is measured on block 0), so one
  learning rate serves every hook; the saved SAE has the factor folded in and reads raw
  activations (:meth:`~.sae.SparseAutoencoder.fold_input_scale`; cfg.json says ``"none"``).
- Loss: squared error summed over ``d_in``, averaged over the batch (SAELens's ``mse_loss``);
  plus the architecture's terms (:meth:`~.architectures.SAEArchitecture.loss_terms`): for
  ``relu``, ``l1 * sum(f)`` (decoder rows have unit norm, so SAELens's ``f * |W_dec|`` is ``f``);
  for ``topk``/``batchtopk``, the aux-k loss of Gao et al. 2024 as SAELens computes it
  (:func:`~.architectures.aux_k_loss`) on latents that did not fire in the last
  ``dead_window()`` activations. After each step the architecture's
  :meth:`~.architectures.SAEArchitecture.after_step` runs (BatchTopK's threshold EMA).
- Adam (betas 0.9, 0.999), gradients clipped at norm 1 (as SAELens), the learning rate constant
  then decayed linearly to 0 over the last 20% of steps; decoder rows back to unit norm after
  every step (the gradient along each row removed first).
- Checkpoints every ``checkpoint_every`` steps and at the end (``checkpoints/step_N.*`` then
  ``state.json``, which commits them); ``resume=True`` continues from the last one. A stop signal
  (SIGINT, SIGTERM, SIGHUP: :mod:`interp_toolkit.runtime.signals`) ends the step under way, saves
  a checkpoint of it and raises :class:`~interp_toolkit.errors.Interrupted` saying where.
"""

from __future__ import annotations

import io
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from transformer_lens import TransformerBridge

from interp_toolkit.errors import Interrupted, UserError, signal_of
from interp_toolkit.files.io import folder_lock, read_json, tidy_folders, write_bytes, write_json
from interp_toolkit.files.serialize import Jsonable, json_field
from interp_toolkit.runtime.progress import progress_bar
from interp_toolkit.runtime.seeds import rng, seed_global
from interp_toolkit.runtime.signals import deferred, stop_signals
from interp_toolkit.saes.activations import TokenSource, block_activations
from interp_toolkit.saes.architectures import aux_k_loss as aux_k_loss  # re-exported
from interp_toolkit.saes.config import SAEConfig, SAEPaths, SAETrainConfig
from interp_toolkit.saes.sae import SparseAutoencoder, save_sae

DECAY_FRACTION = 0.2


def sae_loss(
    sae: SparseAutoencoder, x: Tensor, dead: Tensor, tcfg: SAETrainConfig
) -> tuple[Tensor, dict[str, float], Tensor]:
    """(total loss, its parts, the activations) of one batch (module docstring)."""
    pre = sae.pre(x)
    f = sae.activate(pre, train=True)
    x_hat = sae.decode(f)
    mse = (x_hat - x).pow(2).sum(-1).mean()
    loss, parts = mse, {"mse": float(mse.detach())}
    for name, term in sae.architecture.loss_terms(sae, x, x_hat, pre, f, dead, tcfg).items():
        loss = loss + term
        parts[name] = float(term.detach())
    return loss, parts, f


_SKIP = json_field(skip=True)


@dataclass
class TrainedSAE(Jsonable):
    """A trained SAE, where it was saved, and how training went (its JSON: how it went)."""

    sae: SparseAutoencoder = field(metadata=_SKIP)
    paths: SAEPaths | None = field(metadata=_SKIP)
    steps: int
    tokens: int
    elapsed_s: float = field(metadata=json_field(key="seconds", digits=2))
    scale: float = field(metadata=_SKIP)
    # latents that did not fire in the last dead_window() activations
    dead_in_training: int = field(metadata=_SKIP)
    resumed_from: int | None
    last: dict[str, float] = field(metadata=_SKIP)

    json_order = ("tokens", "steps", "seconds", "resumed_from")


def _lr(step: int, steps: int, lr: float) -> float:
    start = int(steps * (1 - DECAY_FRACTION))
    return lr if step < start else lr * (steps - step) / max(1, steps - start)


def _recorded(cfg: SAEConfig, tcfg: SAETrainConfig) -> dict[str, Any]:
    train = tcfg.to_dict()
    train.pop("tokens")
    return {"sae": cfg.to_saelens(), "train": train}


def _load_checkpoint(paths: SAEPaths, cfg: SAEConfig, tcfg: SAETrainConfig) -> dict[str, Any]:
    from safetensors.torch import load_file

    fix = "train it again without --resume (choose another --out, or remove the folder)."
    state = read_json(paths.state, "SAE checkpoint state", fix)
    want = _recorded(cfg, tcfg)
    diffs = [k for k in ("sae", "train") if state.get("config", {}).get(k) != want[k]]
    if diffs:
        raise UserError(
            f"{paths.root} holds an SAE trained with other settings ({', '.join(diffs)}): resume "
            "it with the settings it was started with, or choose another --out."
        )
    step = int(state["step"])
    try:
        tensors = load_file(str(paths.checkpoint_weights(step)))
        opt = torch.load(
            io.BytesIO(paths.checkpoint_optimizer(step).read_bytes()), weights_only=True
        )
    except Exception as exc:  # a missing or damaged checkpoint file
        raise UserError(
            f"the SAE checkpoint of step {step} in {paths.checkpoints} is damaged "
            f"({type(exc).__name__}): {fix}"
        ) from None
    return {"state": state, "tensors": tensors, "optimizer": opt}


def _save_checkpoint(
    paths: SAEPaths,
    sae: SparseAutoencoder,
    opt: torch.optim.Optimizer,
    since_fired: Tensor,
    info: dict[str, Any],
) -> None:
    from safetensors.torch import save

    step = int(info["step"])
    old = read_json(paths.state, "state", "") if paths.state.is_file() else {}
    tensors = sae.state() | {"since_fired": since_fired.cpu().contiguous()}
    write_bytes(paths.checkpoint_weights(step), save(tensors))
    buf = io.BytesIO()
    torch.save(opt.state_dict(), buf)
    write_bytes(paths.checkpoint_optimizer(step), buf.getvalue())
    write_json(paths.state, info)  # commits the checkpoint
    prev = old.get("step") if isinstance(old, dict) else None
    if prev is not None and int(prev) != step:
        paths.checkpoint_weights(int(prev)).unlink(missing_ok=True)
        paths.checkpoint_optimizer(int(prev)).unlink(missing_ok=True)


#: Block ``b`` of training activations (raw, ``[n, d_in]``), a pure function of ``b``.
Blocks = Callable[[int], Tensor]


def train_sae(
    model: TransformerBridge,
    source: TokenSource,
    cfg: SAEConfig,
    tcfg: SAETrainConfig,
    out: str | Path,
    *,
    resume: bool = False,
    progress: bool = True,
) -> TrainedSAE:
    """Train an SAE at ``cfg.hook_name`` on ``source`` into the folder ``out`` (module docstring).

    A folder that already holds an SAE (or an interrupted one) is refused unless ``resume``."""
    tcfg.validate()
    cfg.check_memory()
    paths = SAEPaths(Path(out))

    blocks = partial(block_activations, model, source, cfg.hook_name)
    # the lock first (a second `sae --out D` while one trains is named as such), and no folder
    # left behind by a failure before the first checkpoint
    with tidy_folders(paths.checkpoints):
        paths.root.mkdir(parents=True, exist_ok=True)
        with folder_lock(paths.root, "SAE folder"):
            if not resume and (paths.cfg.exists() or paths.state.exists()):
                raise UserError(
                    f"{paths.root} already holds an SAE: continue it with --resume, or choose "
                    "another --out."
                )
            if resume and not paths.state.is_file():
                raise UserError(f"{paths.root} holds no SAE checkpoint to resume: drop --resume.")
            paths.checkpoints.mkdir(exist_ok=True)
            trained = fit_sae(blocks, cfg, tcfg, paths, resume=resume, progress=progress)
    extra = {"training": tcfg.to_dict(), "input_scale": trained.scale, "steps": trained.steps}
    extra |= {"tokens_trained": trained.tokens, "setting": source.setting}
    save_sae(paths.root, trained.sae, extra)
    return trained


def fit_sae(
    blocks: Blocks,
    cfg: SAEConfig,
    tcfg: SAETrainConfig,
    paths: SAEPaths | None = None,
    *,
    resume: bool = False,
    progress: bool = False,
) -> TrainedSAE:
    """The training loop over ``blocks`` (checkpoints in ``paths`` when given); returns the SAE
    with the input scale folded in (it reads raw activations)."""
    tcfg.validate()
    seed_global(tcfg.seed, "sae_training")
    sae = SparseAutoencoder(cfg, seed=tcfg.seed)
    opt = torch.optim.Adam(sae.parameters(), lr=tcfg.lr, betas=(0.9, 0.999))
    since_fired = torch.zeros(cfg.d_sae, dtype=torch.long)
    start, elapsed, resumed_from = 0, 0.0, None
    block_id, block = -1, torch.zeros(0)
    if resume and paths is not None:
        ck = _load_checkpoint(paths, cfg, tcfg)
        sae.load(ck["tensors"], paths.checkpoints)
        opt.load_state_dict(ck["optimizer"])
        since_fired = ck["tensors"]["since_fired"].long()
        start = resumed_from = int(ck["state"]["step"])
        elapsed, scale = float(ck["state"]["elapsed_s"]), float(ck["state"]["scale"])
    else:
        acts0 = blocks(0)
        scale = float(cfg.d_in**0.5 / acts0.norm(dim=-1).mean().clamp_min(1e-12))
        block_id, block = 0, acts0 * scale
        with torch.no_grad():
            sae.b_dec.copy_(block.mean(0))  # a stand-in for Gao et al.'s geometric median
    steps, window, bpb = tcfg.steps, tcfg.dead_window(), tcfg.batches_per_block
    last: dict[str, float] = {}

    def checkpoint(step: int) -> None:
        if paths is not None:
            spent = elapsed + time.perf_counter() - t0
            info = {"step": step, "tokens": step * tcfg.batch, "elapsed_s": round(spent, 3)}
            info |= {"scale": scale, "config": _recorded(cfg, tcfg)}
            _save_checkpoint(paths, sae, opt, since_fired, info)

    bar = progress_bar(total=steps, initial=start, enabled=progress, desc="SAE", unit="step")
    t0 = time.perf_counter()
    done, perm_id, perm = start, -1, torch.zeros(0, dtype=torch.long)

    def train_step(step: int, x: Tensor) -> Tensor:
        nonlocal last
        for g in opt.param_groups:
            g["lr"] = _lr(step, steps, tcfg.lr)
        loss, last, f = sae_loss(sae, x, since_fired >= window, tcfg)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        sae.remove_parallel_grad()
        torch.nn.utils.clip_grad_norm_(sae.parameters(), 1.0)
        opt.step()
        sae.normalize_decoder()
        with torch.no_grad():
            since_fired.add_(len(x))
            since_fired[(f > 0).any(0)] = 0
            sae.architecture.after_step(sae, f, tcfg)
            last["l0"] = float((f > 0).sum(-1).float().mean())
        return loss

    with stop_signals():  # SIGTERM and SIGHUP stop as Ctrl-C does, for API callers too
        try:
            for step in range(start, steps):
                b, j = divmod(step, bpb)
                if b != block_id:
                    block_id, block = b, blocks(b) * scale
                if b != perm_id:
                    gen = rng(tcfg.seed, "sae_batch_order", block=b)
                    perm_id, perm = b, torch.randperm(len(block), generator=gen)
                x = block[perm[j * tcfg.batch : (j + 1) * tcfg.batch]]
                if len(x) < tcfg.batch:
                    raise UserError(
                        f"a block of {len(block)} activations is short of {bpb} batches of "
                        f"{tcfg.batch}: use a smaller batch."
                    )
                with deferred():  # a stop signal ends this step first: a checkpoint is exact
                    loss = train_step(step, x)
                    done = step + 1
                bar.update(1)
                if step % 10 == 0:
                    dead = int((since_fired >= window).sum())
                    bar.set_postfix(
                        loss=f"{float(loss.detach()):.3g}", l0=f"{last['l0']:.1f}", dead=dead
                    )
                if done % tcfg.checkpoint_every == 0 and done < steps:
                    checkpoint(done)
        except KeyboardInterrupt as exc:
            checkpoint(done)
            if paths is None or str(exc):
                raise
            raise Interrupted(
                f"stopped at step {done} of {steps} by {signal_of(exc)}: checkpoint saved in "
                f"{paths.checkpoints}; continue with the same command and --resume.",
                getattr(exc, "signum", signal.SIGINT),
            ) from None
        finally:
            bar.close()
    checkpoint(steps)
    elapsed += time.perf_counter() - t0
    final = SparseAutoencoder(cfg)
    final.load(sae.state(), Path("(training)"))
    final.fold_input_scale(scale)
    return TrainedSAE(
        sae=final.eval(),
        paths=paths,
        steps=steps,
        tokens=steps * tcfg.batch,
        elapsed_s=elapsed,
        scale=scale,
        dead_in_training=int((since_fired >= window).sum()),
        resumed_from=resumed_from,
        last=last,
    )
