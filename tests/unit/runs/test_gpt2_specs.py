"""GPT-2 specs and bad input: one line each, before any model is booted and without the
network (what makes them fast; the timed check is tests/integration/test_measured.py)."""

from __future__ import annotations

import json

import pytest
from cli_helpers import run_cli

from interp_toolkit.errors import UserError
from interp_toolkit.runs import gpt2
from interp_toolkit.runs.hub import is_gpt2_spec


def _one_line(exc: pytest.ExceptionInfo) -> str:
    msg = str(exc.value)
    assert "\n" not in msg and msg
    return msg


# ----------------------------------------------------------------------------- specs


def test_is_gpt2_spec(gpt2_dirs, tmp_path):
    for name in ("gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl", "distilgpt2", "GPT2"):
        assert is_gpt2_spec(name)
    assert is_gpt2_spec("openai-community/gpt2")
    assert is_gpt2_spec("gpt-5")  # claimed, so the error names the known sizes
    assert is_gpt2_spec(gpt2_dirs["good"])
    assert is_gpt2_spec(str(gpt2_dirs["no_tokenizer"]))
    assert is_gpt2_spec(gpt2_dirs["no_config"])
    assert is_gpt2_spec(gpt2_dirs["llama"])
    assert not is_gpt2_spec(gpt2_dirs["toy_run"])  # our run folder: format_version
    assert not is_gpt2_spec(tmp_path / "missing_run")
    assert not is_gpt2_spec(tmp_path)  # an empty folder is nobody's model


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("name", ["gpt-5", "gpt2-small", "openai-community/gpt3"])
def test_unknown_name_is_one_line_before_any_boot(name, no_boot_no_network):
    with pytest.raises(UserError) as exc:
        gpt2.load(name)
    msg = _one_line(exc)
    assert "unknown model" in msg and "gpt2-medium" in msg


def _empty_hf_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_hub_name_not_cached_is_one_line_before_any_boot(tmp_path, monkeypatch, no_boot_no_network):
    _empty_hf_cache(tmp_path, monkeypatch)
    with pytest.raises(UserError) as exc:
        gpt2.load("gpt2")
    msg = _one_line(exc)
    assert "not in the Hugging Face cache" in msg
    assert "HF_HOME" in msg and "save_pretrained" in msg


@pytest.mark.parametrize(
    "which, needle",
    [
        ("no_weights", "no weights"),
        ("no_config", "no config.json"),
        ("mismatched", "do not match its config.json"),
        ("llama", "not a GPT-2-like"),
        ("bad_tokenizer", "tokenizer"),
    ],
)
def test_bad_folders_are_one_line(gpt2_dirs, which, needle):
    with pytest.raises(UserError) as exc:
        gpt2.load(gpt2_dirs[which])
    assert needle in _one_line(exc)


def test_a_file_is_not_a_folder(gpt2_dirs):
    with pytest.raises(UserError) as exc:
        gpt2.load(gpt2_dirs["good"] / "config.json")
    assert "not a model folder" in _one_line(exc)


def test_small_vocab_is_refused(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2", "vocab_size": 100}))
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(UserError) as exc:
        gpt2.load(tmp_path)
    assert "vocab_size=100" in _one_line(exc)


# ----------------------------------------------------------------------------- CLI


@pytest.mark.parametrize("spec", ["gpt-5", "gpt2"])
def test_cli_bad_name_exits_2_with_one_line(spec, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    run_cli(capsys, "heads", spec).one_line_error()
