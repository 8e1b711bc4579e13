"""One owner per concept, checked on the source (docs/architecture.md, "One owner per concept"):
each test fails when a second place starts doing what the owner does."""

from __future__ import annotations

import re
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "interp_toolkit"


def _where(pattern: str) -> set[str]:
    rx = re.compile(pattern, re.M)
    return {str(p.relative_to(PKG)) for p in PKG.rglob("*.py") if rx.search(p.read_text("utf-8"))}


def test_head_names_are_formatted_by_headid_only():
    # runtime/validate.py sits below heads/ in the layout and names a head that does not exist
    found = _where(r"f\"[^\"]*\{[\w.]*layer[\w.]*\}\.\{[\w.]*head[\w.]*\}")
    assert found <= {"heads/registry.py", "runtime/validate.py"}, found


def test_thresholds_have_one_owner():
    for definition in (
        r"^ARENA_FLOOR\s*=",
        r"^ALPHA\s*=",
        r"^QUANTILE\s*=",
        r"^class Thresholds\b",
    ):
        assert _where(definition) == {"stats/thresholds.py"}, definition


def test_codecs_and_their_loading_have_one_owner():
    assert _where(r"^\s+store = \"(gpt2|bytes)\"") == {"text/codecs.py"}
    assert _where(r"^def (load_codec|codec_from_dict|save_codec)\b") == {"text/codecs.py"}


def test_the_setting_is_named_in_one_place():
    assert _where(r"^def setting_name\b") == {"text/stream.py"}
    assert _where(r"^[^#\n]*\"natural text\"") == {"text/stream.py"}


def test_loading_a_target_has_one_entry():
    assert _where(r"^def load_target\b") <= {"runs/targets.py", "runs/gpt2.py"}
