"""`reproduce --preset all` on a tiny budget: both settings train and are measured, study.json
holds one block per setting (natural text first), and the page names the setting of every
section and leads with natural text."""

from __future__ import annotations

import json

from interp_toolkit.study.reproduce import StudyConfig, reproduce


def test_both_settings_on_one_page(tmp_path):
    out = tmp_path / "s"
    cfg = StudyConfig(out=out, preset=None, layers=(1, 2), steps=6, sample_tokens=4, workers=2)
    result = reproduce(cfg)
    study = json.loads((out / "study.json").read_text())
    assert study["status"] == "done" and study["presets"] == {"text": [1, 2], "cpu": [1, 2]}
    assert [b["preset"] for b in study["settings"]] == ["text", "cpu"]
    for block in study["settings"]:
        assert [r["name"] for r in block["runs"]] == [
            f"{block['preset']}-1l",
            f"{block['preset']}-2l",
        ]
        assert block["claims"]["two_can"]["mark"] and block["depths"]
    text_block = study["settings"][0]
    assert all(d["setting"] == "natural text" for d in text_block["depths"])
    assert all(d["setting"] == "curriculum" for d in study["settings"][1]["depths"])
    page = (out / "index.html").read_text()
    assert page.index("Natural text (bytes): ") < page.index("Curriculum: ")
    assert len(result.summaries) == 4
