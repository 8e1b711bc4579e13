"""The API reference builds offline from the docstrings (docs/api.sh, pdoc)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_api_reference_builds(tmp_path):
    out = tmp_path / "api"
    env = {**os.environ, "PYTHON": sys.executable}
    done = subprocess.run(
        ["sh", str(ROOT / "docs" / "api.sh"), str(out)], cwd=ROOT, env=env, capture_output=True
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    top = (out / "interp_toolkit.html").read_text(encoding="utf-8")
    for name in ("load", "train", "scores_on", "discover", "exam", "view"):
        assert f'id="{name}"' in top, name
    assert "exist_ok" in top  # docstrings, not only names
    assert (out / "interp_toolkit" / "heads" / "registry.html").is_file()
