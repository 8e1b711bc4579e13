"""Shared fixtures and the test tiers.

Tiers: ``tests/unit`` is the fast default (tiny models, no training): ``pytest -q``. It is
deterministic: no wall-clock, memory or sleep assertions (those are marked ``measured``) and
hypothesis runs derandomized with a fixed example budget (the ``ci`` profile, the default;
``HYPOTHESIS_PROFILE=explore`` draws anew). ``tests/integration`` (marked ``slow``
automatically: training the cpu preset, whole pipelines, GPT-2-shaped models, the notebook),
``browser`` tests (headless Chromium) and ``measured`` tests run with ``pytest -q --all-tiers``,
which CI runs. Naming a test file or tests/integration, or giving a ``-m`` expression, also runs
what it selects from the slow tiers.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    derandomize=True,  # the same examples on every run and machine
    database=None,
    deadline=None,
    max_examples=30,
    suppress_health_check=list(HealthCheck),
)
settings.register_profile("explore", database=None, deadline=None, max_examples=200)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
torch.set_num_threads(1)

INTEGRATION = Path(__file__).resolve().parent / "integration"
SLOW_TIERS = ("slow", "browser", "measured")
_SKIPPED_TIERS = pytest.StashKey[int]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--all-tiers",
        action="store_true",
        help="also run the slow tiers (tests/integration, marked slow or browser); CI runs this",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if INTEGRATION in Path(item.fspath).parents:
            item.add_marker(pytest.mark.slow)
    if config.getoption("--all-tiers") or config.getoption("markexpr"):
        return
    for arg in config.getoption("file_or_dir") or []:
        path = Path(arg.split("::")[0]).resolve()
        if path.is_file() or path == INTEGRATION or INTEGRATION in path.parents:
            return  # a named test file, or the slow tier's folder: run what was asked for
    fast = [i for i in items if not any(i.get_closest_marker(m) for m in SLOW_TIERS)]
    if len(fast) < len(items):
        config.hook.pytest_deselected(items=[i for i in items if i not in fast])
        config.stash[_SKIPPED_TIERS] = len(items) - len(fast)
        items[:] = fast


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    n = config.stash.get(_SKIPPED_TIERS, 0)
    if n:
        terminalreporter.write_line(
            f"fast tier only: {n} slow/browser tests deselected (run them with --all-tiers)"
        )


@pytest.fixture
def tiny_cfg():
    from interp_toolkit.models.build import ModelConfig

    return ModelConfig(n_layers=2, d_model=32, n_heads=4, d_head=8, n_ctx=32, d_vocab=64, seed=0)


@pytest.fixture
def tiny_model(tiny_cfg):
    from interp_toolkit.models.build import build_model

    return build_model(tiny_cfg)


@pytest.fixture(scope="session")
def gpt2_dirs(tmp_path_factory):
    """GPT-2-architecture folders built once: the planted model and bad variants of it."""
    from gpt2_helpers import build_gpt2_dirs

    return build_gpt2_dirs(tmp_path_factory.mktemp("gpt2"))


@pytest.fixture(scope="session")
def arch_dirs(tmp_path_factory):
    """One tiny random-weight model per architecture of ``hf_helpers.ARCHITECTURES``, built once."""
    from hf_helpers import build_arch_dirs

    return build_arch_dirs(tmp_path_factory.mktemp("archs"))


@pytest.fixture(scope="session")
def planted_dirs(tmp_path_factory):
    """The two hand-set families with known heads (hf_helpers): a Llama (rotary, GQA) and a GPT-2."""
    from hf_helpers import build_planted_gpt2, build_planted_llama

    root = tmp_path_factory.mktemp("planted")
    return {"llama": build_planted_llama(root / "llama"), "gpt2": build_planted_gpt2(root / "gpt2")}


@pytest.fixture
def no_boot_no_network(monkeypatch):
    """Booting a model or opening a connection fails the test: a bad name or GPT-2 folder is
    refused from its files alone, first."""

    def forbidden(*args, **kwargs):
        raise AssertionError("a model was booted or the network was used for a bad target")

    import socket

    from interp_toolkit.runs import hf

    monkeypatch.setattr(hf, "_boot", forbidden)
    monkeypatch.setattr(socket.socket, "connect", forbidden)
    monkeypatch.setattr(socket, "create_connection", forbidden)
