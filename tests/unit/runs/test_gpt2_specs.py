"""Hugging Face specs and bad input: one line each, before any model is booted and without the
network (what makes them fast; the timed check is tests/integration/test_measured.py)."""

from __future__ import annotations

import json

import pytest
from cli_helpers import run_cli

from interp_toolkit.errors import UserError
from interp_toolkit.runs import hf
from interp_toolkit.runs.hub import is_hf_spec


def _one_line(exc: pytest.ExceptionInfo) -> str:
    msg = str(exc.value)
    assert "\n" not in msg and msg
    return msg


# ----------------------------------------------------------------------------- specs


def test_is_hf_spec(gpt2_dirs, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl", "distilgpt2", "GPT2"):
        assert is_hf_spec(name)
    assert is_hf_spec("openai-community/gpt2")
    assert is_hf_spec("EleutherAI/pythia-70m")  # a hub id, never "run folder ... does not exist"
    assert is_hf_spec("gpt-5")  # claimed, so the error names the known sizes
    assert is_hf_spec(gpt2_dirs["good"])
    assert is_hf_spec(str(gpt2_dirs["no_tokenizer"]))
    assert is_hf_spec(gpt2_dirs["no_config"])
    assert is_hf_spec(gpt2_dirs["bert"])
    assert not is_hf_spec(gpt2_dirs["toy_run"])  # our run folder: format_version
    assert not is_hf_spec(tmp_path / "missing_run")
    assert not is_hf_spec(tmp_path)  # an empty folder is nobody's model
    (tmp_path / "runs").mkdir()
    assert not is_hf_spec("runs/cpu-2l")  # owner/name under a folder that exists: a run path


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("name", ["gpt-5", "gpt2-small", "pythia-70m"])
def test_unknown_name_is_one_line_before_any_boot(name, no_boot_no_network):
    with pytest.raises(UserError) as exc:
        hf.load(name)
    msg = _one_line(exc)
    assert "unknown model" in msg and "gpt2-medium" in msg and "owner/name" in msg


def _empty_hf_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.mark.parametrize("name", ["gpt2", "EleutherAI/pythia-70m", "openai-community/gpt3"])
def test_hub_name_not_cached_is_one_line_before_any_boot(
    name, tmp_path, monkeypatch, no_boot_no_network
):
    _empty_hf_cache(tmp_path, monkeypatch)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError) as exc:
        hf.load(name)
    msg = _one_line(exc)
    assert "not in the Hugging Face cache" in msg and "Hub cannot be reached" in msg, msg
    assert "HF_HOME" in msg and "save_pretrained" in msg and "run folder" not in msg


@pytest.mark.parametrize(
    "which, needle",
    [
        ("no_weights", "no weights"),
        ("no_config", "no config.json"),
        ("mismatched", "do not match its config.json"),
        ("bert", "not a causal language model"),
        ("unknown_arch", "FooForCausalLM model that transformers cannot read"),
        ("bad_tokenizer", "tokenizer"),
    ],
)
def test_bad_folders_are_one_line(gpt2_dirs, which, needle):
    with pytest.raises(UserError) as exc:
        hf.load(gpt2_dirs[which])
    assert needle in _one_line(exc)


def test_a_file_is_not_a_folder(gpt2_dirs):
    with pytest.raises(UserError) as exc:
        hf.load(gpt2_dirs["good"] / "config.json")
    assert "not a model folder" in _one_line(exc)


def test_a_folder_without_tokenizer_files_is_refused_unless_gpt2(gpt2_dirs, tmp_path):
    """GPT-2 (50,257 ids) falls back to the built-in BPE; any other model needs its own."""
    cfg = json.loads((gpt2_dirs["good"] / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(cfg | {"vocab_size": 100}))
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(UserError) as exc:
        hf.load(tmp_path)
    assert "has no tokenizer files" in _one_line(exc)


# ----------------------------------------------------------------------------- CLI


@pytest.mark.parametrize("spec", ["gpt-5", "gpt2", "EleutherAI/pythia-70m"])
def test_cli_bad_name_exits_2_with_one_line(spec, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    line = run_cli(capsys, "heads", spec).one_line_error()
    assert "run folder" not in line
