"""Data-parallel training on N processes with torch.distributed (DDP), launched by ``torchrun``.

``torchrun --nproc_per_node N -m interp_toolkit train ...`` starts N copies of the command; each
reads its place from the environment torchrun sets (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``) and
runs the same TransformerLens loop on its own slice of every global batch (see
:class:`~interp_toolkit.training.loop.StepFeed`). The module TL's loop trains is wrapped in
``DistributedDataParallel``, so gradients are averaged over the processes before each optimizer
step: every process holds the same weights, and the update is the one a single process would make
on the whole global batch. Rank 0 alone writes the run folder (config, metrics, checkpoints,
weights), holds the folder's lock and scores heads; the others wait where it writes first
(:func:`barrier`, :func:`rank0_first`, :func:`prepare_on`). Stop decisions (a stop signal, the
early stop) are taken together after each step (:func:`any_rank`).

GPUs use the NCCL backend (process ``LOCAL_RANK`` on GPU ``LOCAL_RANK``), the CPU uses gloo.
Multi-node runs are the same launcher with ``--nnodes`` and a rendezvous (``--rdzv-backend c10d
--rdzv-endpoint HOST:PORT``): nothing here depends on the node count.
"""

from __future__ import annotations

import atexit
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import TypeVar

import torch
import torch.distributed as dist

from interp_toolkit.errors import UserError
from interp_toolkit.runs.folder import RunPaths
from interp_toolkit.runtime.devices import resolve_device
from interp_toolkit.training.checkpoints import Start, prepare_out, read_checkpoint
from interp_toolkit.training.guard import StopSignals, run_guard

#: How long a process waits for the others at a collective (rank 0 may be tokenizing a corpus for
#: the others first; torchrun ends every process as soon as one of them fails).
GROUP_TIMEOUT = timedelta(hours=2)
T = TypeVar("T")


@dataclass(frozen=True)
class Cluster:
    """Where this process stands: its rank among ``world_size`` processes, and on its node."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.world_size > 1


SINGLE = Cluster()


def cluster_from_env() -> Cluster:
    """The process's place as torchrun sets it in the environment (one process without torchrun)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return SINGLE
    return Cluster(int(os.environ["RANK"]), world, int(os.environ.get("LOCAL_RANK", "0")))


def training_device(spec: str | torch.device, cluster: Cluster) -> torch.device:
    """The device this process trains on: ``spec`` resolved; under torchrun a GPU spec (or ``auto``
    on a GPU machine) means GPU ``LOCAL_RANK``."""
    device = resolve_device(spec)
    if not cluster.active:
        return device
    if device.type == "mps":
        raise UserError("--device mps cannot train on several processes: use --device cpu or cuda.")
    if device.type == "cpu":
        return device
    if ":" in str(spec):
        raise UserError(
            f"--device {spec}: under torchrun each process uses GPU LOCAL_RANK: use --device cuda "
            "(or auto), and CUDA_VISIBLE_DEVICES to choose the GPUs."
        )
    n = torch.cuda.device_count()
    if cluster.local_rank >= n:
        raise UserError(
            f"torchrun started {cluster.local_rank + 1}+ processes on this node but it has {n} "
            f"GPU{'s' if n != 1 else ''}: use --nproc_per_node {n} or fewer."
        )
    return torch.device("cuda", cluster.local_rank)


def local_batch(batch_size: int, cluster: Cluster) -> int:
    """Rows each process trains on per step: the global batch split evenly (refused otherwise)."""
    if batch_size % cluster.world_size:
        raise UserError(
            f"batch_size={batch_size} does not split over {cluster.world_size} processes: "
            f"use a batch size divisible by {cluster.world_size} (the global batch stays as set)."
        )
    return batch_size // cluster.world_size


def join_process_group(cluster: Cluster, device: torch.device) -> None:
    """Join torchrun's process group (once per process; left at exit). Nothing for one process."""
    if not cluster.active or dist.is_initialized():
        return
    if device.type == "cuda":
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", timeout=GROUP_TIMEOUT, device_id=device)
    else:
        dist.init_process_group("gloo", timeout=GROUP_TIMEOUT)
    atexit.register(dist.destroy_process_group)


def barrier(cluster: Cluster) -> None:
    """Wait until every process gets here (e.g. after rank 0 wrote what the others read)."""
    if cluster.active:
        dist.barrier()


def rank0_first(cluster: Cluster, fn: Callable[[], T]) -> T:
    """``fn()`` on rank 0, then on the others (e.g. rank 0 fills a cache the others then read)."""
    first = [fn()] if cluster.is_main else []
    barrier(cluster)
    return first[0] if first else fn()


def mean_over_ranks(value: torch.Tensor, cluster: Cluster) -> torch.Tensor:
    """The mean of ``value`` over the processes (a collective: every rank must call it)."""
    if not cluster.active:
        return value
    total = value.detach().clone()
    dist.all_reduce(total)
    return total / cluster.world_size


def any_rank(flag: bool, cluster: Cluster, device: torch.device) -> bool:
    """Whether ``flag`` is true on any process (a collective: every rank must call it)."""
    if not cluster.active:
        return flag
    t = torch.tensor([1.0 if flag else 0.0], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item())


@contextmanager
def guard_on(cluster: Cluster, paths: RunPaths) -> Iterator[StopSignals]:
    """Rank 0 holds the run folder (:func:`~interp_toolkit.training.guard.run_guard`: the lock,
    stop signals); the other processes only defer stop signals to the end of a step."""
    if cluster.is_main:
        with run_guard(paths) as signals:
            yield signals
    else:
        with StopSignals(f"continue with --resume --out {paths.root}.") as signals:
            yield signals


def prepare_on(
    cluster: Cluster, paths: RunPaths, *, resume: bool, restart: bool, note: Callable[[str], None]
) -> Start:
    """Rank 0 checks (or, with ``restart``, empties) the folder; the others wait for it, then
    read the checkpoint it found, if resuming."""
    begin = (
        prepare_out(paths, resume=resume, restart=restart, note=note) if cluster.is_main else None
    )
    barrier(cluster)
    return begin or Start(resumed=resume, checkpoint=read_checkpoint(paths) if resume else None)


def data_parallel(
    module: torch.nn.Module, device: torch.device, cluster: Cluster
) -> torch.nn.Module:
    """``module`` wrapped in DDP (gradients averaged over the processes), or as is for one process.

    Buffers are not re-broadcast every step (the bridge's only buffers are constant causal masks).
    """
    if not cluster.active:
        return module
    from torch.nn.parallel import DistributedDataParallel

    ids = [device.index] if device.type == "cuda" else None
    return DistributedDataParallel(module, device_ids=ids, broadcast_buffers=False)
