"""The machine a result was computed on, as a run records it (``config.json``'s ``"machine"``).

bf16 and float32 kernels round differently across CPUs (oneDNN picks AMX, AVX-512 or AVX2 code
at run time, and ``ONEDNN_MAX_CPU_ISA`` can limit it) and across thread counts, so a number
trained on one machine may differ in its last digits on another: the record says which kernels
made it. :func:`machine_record` is the one place that reads it.
"""

from __future__ import annotations

import os
import platform
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from interp_toolkit.files.serialize import Jsonable


@dataclass(frozen=True)
class Machine(Jsonable):
    """``cpu``: the CPU's model name; ``cpu_capability``: the vector ISA torch's own CPU kernels
    use (``torch.backends.cpu.get_cpu_capability()``: AVX2, AVX512, ...); ``amx``: whether the CPU
    has AMX-BF16, and ``onednn_max_isa`` the limit ``ONEDNN_MAX_CPU_ISA`` puts on oneDNN's
    kernels (None: none, so oneDNN uses AMX where present); ``torch``, ``onednn``: versions;
    ``threads``: torch's intra-op threads."""

    cpu: str
    cpu_capability: str
    amx: bool
    onednn_max_isa: str | None
    torch: str
    onednn: str | None
    threads: int

    json_extra = ("uses_amx",)

    @property
    def uses_amx(self) -> bool:
        """Whether oneDNN's bf16 kernels may use AMX here (present and not limited away)."""
        limit = (self.onednn_max_isa or "").upper()
        return self.amx and (not limit or "AMX" in limit or limit == "ALL")

    def words(self) -> str:
        """One line naming the machine (the study page's footer)."""
        amx = ", AMX" if self.uses_amx else ""
        limit = f", oneDNN limited to {self.onednn_max_isa}" if self.onednn_max_isa else ""
        return (
            f"{self.cpu} ({self.cpu_capability}{amx}{limit}), torch {self.torch}, "
            f"oneDNN {self.onednn or 'unknown'}, {self.threads} thread{'s' * (self.threads != 1)}"
        )


def cpu_flags() -> tuple[str, set[str]]:
    """The CPU's model name and feature flags from /proc/cpuinfo (``platform.processor()`` and
    no flags where it cannot be read)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine(), set()
    name, flags = "", set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key in ("model name", "Model", "Hardware") and not name:
            name = value.strip()
        elif key in ("flags", "Features"):
            flags.update(value.split())
    return name or platform.processor() or platform.machine(), flags


def _onednn_version() -> str | None:
    match = re.search(r"(?:oneDNN|MKL-DNN) v(\S+)", torch.__config__.show())
    return match.group(1) if match else None


def machine_record() -> Machine:
    """This machine as it computes now (see :class:`Machine`)."""
    name, flags = cpu_flags()
    return Machine(
        cpu=name,
        cpu_capability=str(torch.backends.cpu.get_cpu_capability()),
        amx="amx_bf16" in flags,
        onednn_max_isa=os.environ.get("ONEDNN_MAX_CPU_ISA") or None,
        torch=torch.__version__,
        onednn=_onednn_version(),
        threads=torch.get_num_threads(),
    )
