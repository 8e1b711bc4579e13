"""The notebooks run top to bottom. The walkthrough (tiny configuration) prints what its models
compute: every number it prints is recomputed here from the run folders it wrote. The quickstart
runs on the shared trained run."""

import re
from pathlib import Path

import nbformat
import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    """The executed notebook's printed text and its work folder (printed by an extra last cell,
    added here only)."""
    from nbclient import NotebookClient

    nb = nbformat.read(EXAMPLES / "walkthrough.ipynb", as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell('print("WORK", work)'))
    mp = pytest.MonkeyPatch()
    mp.setenv("INTERP_TOOLKIT_TINY", "1")
    try:
        NotebookClient(
            nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(EXAMPLES)}}
        ).execute()
    finally:
        mp.undo()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    work = Path(re.search(r"^WORK (.+)$", text, re.M).group(1))
    return nb, text, {n: work / f"cpu-{n}l" for n in (1, 2)}


def test_notebook_shows_the_attention_view(executed):
    nb = executed[0]
    # the walkthrough's last cell (before ours) displays the circuitsvis view as HTML
    assert any("text/html" in o.get("data", {}) for o in nb.cells[-2].outputs)


def test_notebook_prints_the_losses_and_exams_of_its_runs(executed):
    from interp_toolkit.exams.single import BUILTIN_EXAMS, run_exam
    from interp_toolkit.runs.folder import load_run, read_metrics

    _, text, runs = executed
    for n, path in runs.items():
        rows = read_metrics(path)
        want = f"{n} layer(s): {rows[-1]['step']} steps, final loss {rows[-1]['loss']:.3f}"
        assert want in text, (want, text)
        run = load_run(path)
        for exam in BUILTIN_EXAMS:
            r = run_exam(run.model, run.codec, exam.prompt, exam.target)
            want = f"{n}L {exam.name}: target rank {r.rank}, p = {r.prob:.3f}"
            assert want in text, (want, text)


def test_notebook_prints_the_heads_and_the_ablation_of_its_runs(executed):
    from interp_toolkit.heads.discovery import discover_heads
    from interp_toolkit.heads.options import DiscoveryOptions
    from interp_toolkit.heads.registry import partner_of, top_head
    from interp_toolkit.runs.folder import load_run

    _, text, runs = executed
    reports = {
        n: discover_heads(load_run(p).model, load_run(p).codec, DiscoveryOptions(n_seqs=32))
        for n, p in runs.items()
    }
    for n, rep in reports.items():
        want = f"{n}L  roles={rep.to_dict()['roles']}"
        assert want in text, (want, text)
    rep2 = reports[2]
    best = top_head(rep2.scores.induction_vw, layers=range(1, 2))
    partner = partner_of(rep2.scores.previous_token, best)
    line = re.search(
        r"^value-weighted induction score of (\S+): (\S+) -> (\S+) after ablating (\S+)$",
        text,
        re.M,
    )
    assert line, text
    assert line.group(1, 2, 4) == (
        str(best),
        f"{float(rep2.scores.induction_vw[best]):.3f}",
        str(partner),
    )


def test_quickstart_executes_on_a_trained_run(monkeypatch, trained_2l):
    from nbclient import NotebookClient

    monkeypatch.setenv("INTERP_TOOLKIT_RUN", str(trained_2l.path))
    nb = nbformat.read(EXAMPLES / "quickstart.ipynb", as_version=4)
    NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(EXAMPLES)}}
    ).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert f"{trained_2l.name} 2 layers x 4 heads" in text
    assert "FactoredMatrix (128, 128) full OV (1024, 1024) inner dim 32" in text
    assert "induction [layer, head]" in text and "hf roles:" in text
    view_cell = next(c for c in nb.cells if c.source.startswith("view("))
    html = "".join(o["data"]["text/html"] for o in view_cell.outputs if "data" in o)
    assert "Layer 0" in html and "Layer 1" in html  # one output, every layer
    # no cell floods the notebook (progress bars, warnings)
    assert max(len(c.get("outputs", [])) for c in nb.cells if c.cell_type == "code") <= 3
