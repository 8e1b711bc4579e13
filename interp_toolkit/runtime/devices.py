"""Where work runs: device names, mixed-precision settings, and chunk sizes from device memory.

- :func:`resolve_device` turns ``auto | cpu | cuda | cuda:N | mps`` into a ``torch.device``
  (``auto``: a CUDA GPU when one is visible, else an Apple-silicon GPU, else the CPU). A device that
  is absent or a name that is malformed is a :class:`~interp_toolkit.errors.UserError` (one line).
- :class:`Precision`: bf16 autocast and TF32 matmuls on or off; JSON-safe (``to_dict`` /
  ``from_dict``) for a run's config, and context managers that set exactly these settings for a
  block and restore the previous ones (:meth:`Precision.apply`: both; :meth:`Precision.matmuls`
  and :meth:`Precision.autocast`: one each, for a training loop). bf16 autocast applies on CUDA
  GPUs that support bf16 and on every CPU (fast where the CPU has bf16 instructions:
  :func:`cpu_has_bf16`); TF32 applies on CUDA only; on MPS both are no-ops
  (:meth:`Precision.effective` says what actually applies). :data:`PRECISIONS` names the
  settings a run may ask for (``--precision fp32 | tf32 | bf16``).
- :func:`memory_budget` / :func:`rows_per_chunk`: how much memory one analysis chunk may take —
  a fixed :data:`CPU_BUDGET_BYTES` on the CPU and MPS, a fraction of the free memory on CUDA.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch

from interp_toolkit.errors import UserError
from interp_toolkit.files.serialize import Jsonable

DEVICE_CHOICES = "auto, cpu, cuda, cuda:N (N = 0, 1, ...) or mps"
#: One analysis chunk's memory on the CPU (and on MPS, whose free memory torch does not report).
CPU_BUDGET_BYTES = 256 * 2**20
#: Patterns per chunk of a text forward pass on the CPU: chunks whose patterns stay near the
#: CPU's caches run faster than one large pass (the byte preset's held-out text measures, 256
#: windows of 256 tokens: 1.6 s in chunks of 8 windows against 3.7 s in one; identical numbers).
CPU_PATTERN_BYTES = 8 * 2**20
#: Share of the GPU's free memory (``torch.cuda.mem_get_info``) one analysis chunk may take.
CUDA_FREE_FRACTION = 0.25

_DEVICE_RE = re.compile(r"(auto|cpu|mps|cuda)(?::(\d+))?")


def resolve_device(spec: str | torch.device = "auto") -> torch.device:
    """``"auto" | "cpu" | "cuda" | "cuda:N" | "mps"`` (or a ``torch.device``) -> a device that is
    present on this machine; UserError (one line) when it is absent or the name is malformed."""
    text = str(spec).strip().lower()
    match = _DEVICE_RE.fullmatch(text)
    if match is None or (match.group(2) is not None and match.group(1) != "cuda"):
        raise UserError(f"--device {spec!s}: not a device name: use {DEVICE_CHOICES}.")
    kind, index = match.groups()
    if kind == "auto":
        kind = "cuda" if torch.cuda.is_available() else "mps" if _mps_available() else "cpu"
    if kind == "mps" and not _mps_available():
        raise UserError(
            "--device mps: no Apple-silicon GPU (MPS) is available on this machine: "
            "use --device cpu or auto."
        )
    if kind in ("cpu", "mps"):
        return torch.device(kind)
    if not torch.cuda.is_available():
        raise UserError(
            f"--device {text}: no CUDA GPU is visible on this machine: use --device cpu or auto."
        )
    if index is None:
        return torch.device("cuda", torch.cuda.current_device())
    n = torch.cuda.device_count()
    if int(index) >= n:
        raise UserError(
            f"--device {text}: this machine has {n} CUDA GPU{'s' if n != 1 else ''} "
            f"(cuda:0..cuda:{n - 1}): use one of those, or auto."
        )
    return torch.device("cuda", int(index))


def _mps_available() -> bool:
    return torch.backends.mps.is_available()


@functools.cache
def cpu_has_bf16() -> bool:
    """Whether this CPU multiplies bf16 in hardware (x86 AVX512-BF16 or AMX-BF16, Arm BF16),
    read from /proc/cpuinfo (False where it cannot be read). Speed depends on it, and so do
    the results: the kernels oneDNN picks for bf16 (AMX, AVX512-BF16, or emulated in float32)
    round differently, so seeded bf16 training is bit-identical only on CPUs that run the same
    kernels (docs/devices.md)."""
    from interp_toolkit.runtime.machine import cpu_flags

    return bool(cpu_flags()[1] & {"avx512_bf16", "amx_bf16", "bf16"})


def fast_bf16(device: torch.device) -> bool:
    """Whether bf16 matmuls on ``device`` run on bf16 hardware: a CUDA GPU that supports bf16, or
    a CPU with bf16 instructions (:func:`cpu_has_bf16`)."""
    if device.type == "cuda":
        return bool(torch.cuda.is_bf16_supported())
    return device.type == "cpu" and cpu_has_bf16()


#: glibc's mallopt parameters (malloc.h) and what :func:`keep_freed_memory` sets them to: blocks
#: up to 32 MiB come from the heap (not a fresh mmap each), the heap is trimmed only past 1 GiB
#: free, and grows 64 MiB at a time.
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3
_KEEP_FREED = (
    (_M_MMAP_THRESHOLD, 32 * 2**20),
    (_M_TRIM_THRESHOLD, 2**30),
    (_M_TOP_PAD, 64 * 2**20),
)


@functools.cache
def keep_freed_memory() -> bool:
    """Keep the memory torch frees on the CPU for its next allocation (glibc ``mallopt``,
    process-wide; True when set, False off glibc). By default glibc returns each large freed
    block to the system and the next step's tensors fault their pages in again: a byte-preset
    training step took ~500 page faults (the plain-PyTorch reference ~1,500) and ran 5-12% slower
    (docs/benchmarks.md). Numbers do not change; the process keeps up to its peak plus 1 GiB."""
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):  # not glibc (macOS, musl, Windows)
        return False
    return all(mallopt(param, value) == 1 for param, value in _KEEP_FREED)


def memory_budget(device: torch.device) -> int:
    """Bytes one analysis chunk may use on ``device``: :data:`CPU_BUDGET_BYTES` on the CPU and MPS,
    :data:`CUDA_FREE_FRACTION` of the GPU's free memory on CUDA."""
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free * CUDA_FREE_FRACTION)
    return CPU_BUDGET_BYTES


def rows_per_chunk(device: torch.device, bytes_per_row: int, budget: int | None = None) -> int:
    """How many rows of ``bytes_per_row`` fit in ``budget`` bytes (default: the device's
    :func:`memory_budget`); at least 1."""
    budget = memory_budget(device) if budget is None else budget
    return max(1, int(budget) // max(1, int(bytes_per_row)))


@dataclass(frozen=True)
class Precision(Jsonable):
    """Mixed-precision settings of a run: bf16 autocast (CUDA and CPUs) and TF32 float32 matmuls
    (CUDA only).

    Off/off is plain IEEE float32 everywhere. Record :meth:`to_dict` in a run's config. Inference
    is wrapped in ``with precision.apply(device):``; a training loop in
    ``with precision.matmuls(device):`` with each forward pass and loss (not the backward pass or
    the optimizer step) in ``with precision.autocast(device):``. bf16 autocast keeps float32
    master weights: matmuls (and SDPA) read bf16 copies of their inputs, while ops torch's
    autocast lists as float32 (cross-entropy among them) run in float32."""

    bf16_autocast: bool = False
    tf32: bool = False

    def effective(self, device: torch.device) -> Precision:
        """The settings that :meth:`apply` really uses on ``device``: on CUDA both (bf16 only on a
        GPU that supports it); on the CPU bf16 autocast (TF32 is a CUDA matmul mode: ignored);
        on MPS neither."""
        if device.type == "cuda":
            return Precision(
                bf16_autocast=self.bf16_autocast and torch.cuda.is_bf16_supported(), tf32=self.tf32
            )
        if device.type == "cpu":
            return Precision(bf16_autocast=self.bf16_autocast)
        return Precision()

    @contextmanager
    def matmuls(self, device: torch.device) -> Iterator[None]:
        """Run the block with float32 matmuls in TF32 when :meth:`effective` says so, else in IEEE
        float32 (an outer setting is overridden), and restore the previous setting afterwards."""
        backend = (
            torch.backends.cuda.matmul if device.type == "cuda" else torch.backends.mkldnn.matmul
        )
        saved = backend.fp32_precision
        backend.fp32_precision = "tf32" if self.effective(device).tf32 else "ieee"
        try:
            yield
        finally:
            backend.fp32_precision = saved

    def autocast(self, device: torch.device) -> torch.autocast:
        """bf16 autocast on ``device`` when :meth:`effective` says so, else autocast off (an
        outer autocast is overridden). Casts of the weights are not cached: a block that spans
        optimizer steps (a whole training loop) would otherwise keep multiplying by the bf16
        copies made at its first step (torch clears the cache only when the outermost autocast
        block exits)."""
        return torch.autocast(
            device.type,
            dtype=torch.bfloat16,
            enabled=self.effective(device).bf16_autocast,
            cache_enabled=False,
        )

    @contextmanager
    def apply(self, device: torch.device) -> Iterator[None]:
        """Run the block with exactly these settings on ``device`` (an outer autocast or TF32
        setting is overridden, not inherited; :meth:`matmuls` and :meth:`autocast`) and restore
        the previous ones afterwards."""
        with self.matmuls(device), self.autocast(device):
            yield


#: IEEE float32 matmuls and no autocast: what exact analysis code runs under.
STRICT_FP32 = Precision()

#: The ``--precision`` choices. fp32: IEEE float32 everywhere; tf32: TF32 float32 matmuls (CUDA
#: only; ignored on CPUs); bf16: bf16 autocast on CUDA and CPUs (and TF32, on CUDA, for what stays
#: float32).
PRECISIONS = {
    "fp32": STRICT_FP32,
    "tf32": Precision(tf32=True),
    "bf16": Precision(bf16_autocast=True, tf32=True),
}


def precision_named(name: str) -> Precision:
    """The :data:`PRECISIONS` entry ``name``; UserError (one line) for another name."""
    if not isinstance(name, str) or name not in PRECISIONS:
        raise UserError(f"--precision {name}: unknown: use {', '.join(PRECISIONS)}.")
    return PRECISIONS[name]


def available_memory(device: torch.device) -> int | None:
    """Bytes a new allocation can still take on ``device``: the GPU's free memory on CUDA; on the
    CPU ``MemAvailable`` (``/proc/meminfo``), lowered to what a cgroup memory limit leaves; None
    where it cannot be read (MPS, a system without ``/proc``)."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    if device.type != "cpu":
        return None
    try:
        info = Path("/proc/meminfo").read_text()
    except OSError:
        return None
    found = re.search(r"^MemAvailable:\s+(\d+) kB", info, re.M)
    if found is None:
        return None
    free = int(found.group(1)) * 1024
    cgroup = Path("/sys/fs/cgroup")
    for limit_file, used_file in (
        (cgroup / "memory.max", cgroup / "memory.current"),  # cgroup v2, then v1
        (cgroup / "memory/memory.limit_in_bytes", cgroup / "memory/memory.usage_in_bytes"),
    ):
        try:
            limit = limit_file.read_text().strip()
            used = int(used_file.read_text().strip())
        except (OSError, ValueError):
            continue
        if limit.isdigit():
            free = min(free, max(0, int(limit) - used))
        break
    return free
