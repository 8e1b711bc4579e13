"""Where a number was measured: the CPU, the instruction set its kernels use, the library
versions and the thread count (config.json and study.json record it). Seeded runs are
bit-identical only where all of these agree (docs/devices.md)."""

from __future__ import annotations

import os
import platform
import re
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Machine:
    """``cpu``: the model name; ``isa``: what torch's kernels dispatch to (its CPU capability);
    ``amx``: the CPU has AMX-BF16 tiles and oneDNN may use them (``ONEDNN_MAX_CPU_ISA`` unset or
    allowing them); ``onednn_isa``: that variable's value ('' when unset)."""

    cpu: str
    isa: str
    amx: bool
    onednn_isa: str
    torch: str
    onednn: str
    threads: int

    def words(self) -> str:
        amx = ", AMX" if self.amx else ""
        limit = f", oneDNN limited to {self.onednn_isa}" if self.onednn_isa else ""
        return (
            f"{self.cpu} ({self.isa}{amx}{limit}), torch {self.torch}, oneDNN {self.onednn}, "
            f"{self.threads} thread{'s' * (self.threads != 1)}"
        )


def _cpu_info() -> tuple[str, set[str]]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine(), set()
    name = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
    flags = re.search(r"^(?:flags|Features)\s*:\s*(.+)$", text, re.M)
    return (
        name.group(1).strip() if name else platform.machine(),
        set(flags.group(1).split()) if flags else set(),
    )


def machine_record() -> Machine:
    """This machine as the kernels see it now."""
    import torch

    cpu, flags = _cpu_info()
    limit = os.environ.get("ONEDNN_MAX_CPU_ISA", "")
    amx = "amx_bf16" in flags and (not limit or "AMX" in limit.upper())
    found = re.search(r"MKL-DNN v([\d.]+)", torch.__config__.show())
    return Machine(
        cpu=cpu,
        isa=torch.backends.cpu.get_cpu_capability(),
        amx=amx,
        onednn_isa=limit,
        torch=torch.__version__,
        onednn=found.group(1) if found else "unknown",
        threads=torch.get_num_threads(),
    )
