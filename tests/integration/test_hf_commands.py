"""Every command that takes a model runs on a tiny random-weight model of each architecture
(tests/hf_helpers.py) and writes what it promises; ``report`` on three (learned positions and
LayerNorm; rotary, GQA and RMSNorm; Gemma 2's soft caps, windows and post-attention norms) and on
the planted Llama, whose report names its known heads. Small settings: what is checked is that
each command runs and writes its output, the numbers are tested in tests/unit/runs/test_hf_models.py."""

from __future__ import annotations

import json

import pytest
from cli_helpers import run_main
from hf_helpers import ARCHITECTURES

COMMANDS = {
    "heads": (["--n-seqs", "8"], "json"),
    "copying": (["--head", "1.0"], "json"),
    "circuit": (["--n-prompts", "4", "--ig-steps", "2"], "json"),
    "exam": ([], "json"),
    "periods": (["--periods", "--n-prompts", "8", "--max-period", "3"], "json"),
    "probe": (["--feature", "prev_token", "--n-seqs", "24"], "json"),
    "sae": (["--hook", "blocks.1.attn.hook_z", "--tokens", "1024", "--quiet"], "json"),
    "view": (["--prompt", "A B C D A B C D"], "out"),
}


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_every_command_runs_on_each_architecture(arch, arch_dirs, tmp_path):
    folder = str(arch_dirs[arch])
    for name, (args, writes) in COMMANDS.items():
        command = "exam" if name == "periods" else name
        out = tmp_path / f"{name}.{'html' if writes == 'out' else 'json'}"
        argv = [command, folder, *args, "--device", "cpu", f"--{writes}", str(out)]
        if name == "sae":
            argv += ["--out", str(tmp_path / "sae")]
        assert run_main(argv) == 0, (arch, name)
        assert out.stat().st_size > 0, (arch, name)
        if writes == "json":
            data = json.loads(out.read_text())
            assert data, (arch, name)
    heads = json.loads((tmp_path / "heads.json").read_text())
    assert heads["architecture"]["architecture"].lower().startswith(arch.replace("_", "")[:4])
    assert (tmp_path / "sae" / "cfg.json").is_file()


@pytest.mark.parametrize("which", ["gpt2", "llama", "gemma2", "planted"])
def test_report_on_a_hugging_face_model(which, arch_dirs, planted_dirs, tmp_path):
    folder = planted_dirs["llama"] if which == "planted" else arch_dirs[which]
    out = tmp_path / "report.html"
    assert run_main(["report", str(folder), "--device", "cpu", "--out", str(out)]) == 0
    page = out.read_text()
    assert "Heads" in page and "Route by path" in page
    if which in ("llama", "gemma2", "planted"):
        assert "grouped-query attention" in page and "rotary positions" in page
    if which == "planted":
        assert "1.2" in page and "K-composition" in page
