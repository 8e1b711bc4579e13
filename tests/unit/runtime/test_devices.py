"""Device names, mixed-precision settings, and memory-sized chunks (interp_toolkit.runtime.devices)."""

from __future__ import annotations

import json

import pytest
import torch

from interp_toolkit.errors import UserError
from interp_toolkit.runtime import devices as D

no_gpu = pytest.mark.skipif(
    torch.cuda.is_available() or D._mps_available(), reason="this machine has a GPU"
)


def _one_line_error(spec: str) -> str:
    with pytest.raises(UserError) as info:
        D.resolve_device(spec)
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith("--device ")
    return msg


def test_cpu_and_auto_work():
    assert D.resolve_device("cpu") == torch.device("cpu")
    assert D.resolve_device(" CPU ") == torch.device("cpu")
    assert D.resolve_device(torch.device("cpu")) == torch.device("cpu")
    auto = D.resolve_device("auto")
    assert auto.type in ("cpu", "cuda", "mps")
    assert D.resolve_device() == auto


@no_gpu
def test_auto_is_the_cpu_without_a_gpu():
    assert D.resolve_device("auto") == torch.device("cpu")


@no_gpu
@pytest.mark.parametrize("spec", ["cuda", "cuda:0", "cuda:3", "mps"])
def test_an_absent_gpu_is_one_line(spec):
    msg = _one_line_error(spec)
    assert msg.startswith(f"--device {spec}: no ") and "use --device cpu or auto" in msg


@pytest.mark.parametrize("spec", ["gpu", "cuda:", "cuda:x", "cuda:-1", "cpu:0", "", "cuda:1:2"])
def test_malformed_names_are_one_line(spec):
    msg = _one_line_error(spec)
    assert "not a device name" in msg and "auto, cpu, cuda, cuda:N" in msg


def test_cuda_indices_are_checked_against_the_visible_gpus(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    assert D.resolve_device("cuda") == torch.device("cuda", 0)
    assert D.resolve_device("auto") == torch.device("cuda", 0)
    assert D.resolve_device("cuda:1") == torch.device("cuda", 1)
    msg = _one_line_error("cuda:3")
    assert "has 2 CUDA GPUs (cuda:0..cuda:1)" in msg


def test_chunks_follow_the_device_memory(monkeypatch):
    cpu = torch.device("cpu")
    assert D.memory_budget(cpu) == D.CPU_BUDGET_BYTES
    assert D.rows_per_chunk(cpu, 1024) == D.CPU_BUDGET_BYTES // 1024
    assert D.rows_per_chunk(cpu, 10 * D.CPU_BUDGET_BYTES) == 1
    assert D.rows_per_chunk(cpu, 100, budget=1000) == 10
    free = 40 * 2**30
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (free, 80 * 2**30))
    gpu = torch.device("cuda", 0)
    assert D.memory_budget(gpu) == int(free * D.CUDA_FREE_FRACTION)
    assert D.rows_per_chunk(gpu, 2**20) == int(free * D.CUDA_FREE_FRACTION) // 2**20


def test_precision_round_trips_through_json():
    for p in (D.Precision(), D.Precision(bf16_autocast=True), D.Precision(True, True)):
        assert D.Precision.from_dict(json.loads(json.dumps(p.to_dict()))) == p
    assert D.Precision.from_dict({}) == D.Precision()


def test_what_applies_where(monkeypatch):
    """bf16 autocast: CUDA GPUs with bf16, and every CPU; TF32: CUDA only; MPS: neither."""
    on = D.Precision(bf16_autocast=True, tf32=True)
    assert on.effective(torch.device("cpu")) == D.Precision(bf16_autocast=True)
    assert D.PRECISIONS["tf32"].effective(torch.device("cpu")) == D.Precision()
    assert on.effective(torch.device("mps")) == D.Precision()
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: False)
    assert on.effective(torch.device("cuda", 0)) == D.Precision(tf32=True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    assert on.effective(torch.device("cuda", 0)) == on


def test_apply_sets_exactly_its_settings_and_restores_them():
    cpu = torch.device("cpu")
    saved = torch.backends.mkldnn.matmul.fp32_precision
    try:
        torch.backends.mkldnn.matmul.fp32_precision = "bf16"
        with torch.autocast("cpu", dtype=torch.bfloat16):
            with D.STRICT_FP32.apply(cpu):
                assert not torch.is_autocast_enabled("cpu")
                assert torch.backends.mkldnn.matmul.fp32_precision == "ieee"
                x = torch.randn(4, 4)
                assert (x @ x).dtype == torch.float32
            assert torch.is_autocast_enabled("cpu")
        assert torch.backends.mkldnn.matmul.fp32_precision == "bf16"
        with D.PRECISIONS["bf16"].apply(cpu):  # bf16 autocast on the CPU; TF32 ignored there
            assert torch.is_autocast_enabled("cpu")
            assert torch.get_autocast_dtype("cpu") == torch.bfloat16
            assert torch.backends.mkldnn.matmul.fp32_precision == "ieee"
            x = torch.randn(4, 4)
            assert (x @ x).dtype == torch.bfloat16
        assert not torch.is_autocast_enabled("cpu")
        assert torch.backends.mkldnn.matmul.fp32_precision == "bf16"
    finally:
        torch.backends.mkldnn.matmul.fp32_precision = saved


def test_autocast_over_optimizer_steps_sees_the_new_weights():
    """An autocast block spanning optimizer steps multiplies by the updated weights; with
    torch's default weight-cast cache the second step would reuse the first step's bf16 copy."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(8, 8)
    opt = torch.optim.SGD(lin.parameters(), lr=0.1)
    x = torch.randn(4, 8)
    outs, want = [], None
    with D.PRECISIONS["bf16"].apply(torch.device("cpu")):
        for step in range(2):
            if step == 1:  # what the updated weights give, cast by hand
                w, b = lin.weight.detach().bfloat16(), lin.bias.detach().bfloat16()
                want = torch.nn.functional.linear(x.bfloat16(), w, b)
            y = lin(x)
            outs.append(y.detach())
            y.float().square().sum().backward()
            opt.step()
            opt.zero_grad()
    assert outs[1].dtype == torch.bfloat16 and not torch.equal(outs[0], outs[1])
    assert torch.equal(outs[1], want)


@pytest.mark.parametrize(
    ("text", "has"),
    [
        ("flags\t\t: fpu sse avx512f avx512_bf16 avx512_vnni\n", True),
        ("flags\t\t: fpu sse avx512f amx_bf16 amx_tile\n", True),
        ("Features\t: fp asimd bf16 i8mm\n", True),
        ("flags\t\t: fpu sse avx512f avx512_vnni\n", False),
        (None, False),
    ],
)
def test_cpu_bf16_detection_reads_the_cpu_flags(monkeypatch, tmp_path, text, has):
    info = tmp_path / "cpuinfo"
    if text is not None:
        info.write_text("processor\t: 0\n" + text)
    monkeypatch.setattr("interp_toolkit.runtime.machine.Path", lambda _path: info)
    D.cpu_has_bf16.cache_clear()
    try:
        assert D.cpu_has_bf16() is has
    finally:
        D.cpu_has_bf16.cache_clear()
