"""``heads``, ``exam`` and ``copying`` (formerly ``circuits``) commands on a tiny saved run (fast)."""

from __future__ import annotations

import json

import pytest
from analysis_helpers import tiny_codec
from cli_helpers import run_main

from interp_toolkit.heads.registry import SCORE_KINDS


@pytest.fixture
def tiny_run(tmp_path, tiny_cfg, tiny_model):
    from interp_toolkit.runs.folder import save_run

    return save_run(tmp_path / "run", tiny_model, tiny_codec(tiny_cfg.d_vocab), tiny_cfg)


def test_heads_json_csv(tiny_run, tmp_path, capsys):
    out, csv_out = tmp_path / "o" / "heads.json", tmp_path / "heads.csv"
    argv = ["heads", str(tiny_run), "--n-seqs", "8", "--n-untrained", "5"]
    code = run_main(
        [*argv, "--induction-score", "plain", "--json", str(out), "--csv", str(csv_out)]
    )
    assert code == 0
    data = json.loads(out.read_text())
    assert data["target"] == "run"
    assert {"probe", "test", "effect_size_floor", "decides", "rule", "heads", "roles"} <= set(data)
    assert data["decides"]["induction"] == "induction"  # --induction-score plain
    head = data["heads"][5]
    assert head["head"] == "1.1" and len(data["heads"]) == 8
    for field in ("scores", "tau", "p_value", "decided_by", "significant", "passes"):
        assert set(head[field]) == set(SCORE_KINDS), field
    # the specificity test decides; the untrained models are a second test beside it:
    # 5 untrained models x 4 heads of layer 1 per null, so its p is a multiple of 1/21
    assert data["test"]["name"] == "specificity" and data["test"]["n_draws"] == 9999
    second = head["vs_untrained"]["p_value"]
    assert all(round(p * 21, 6) == round(p * 21) for p in second.values())
    assert data["test"]["untrained"]["n_null"]["previous_token"] == 20
    assert data["test"]["untrained"]["n_models"] == 5
    lines = csv_out.read_text().splitlines()
    assert lines[0].startswith("head,layer,index,role,previous_token,tau_previous_token,p_value_")
    assert len(lines) == 9
    assert "effect-size floor" in capsys.readouterr().out


def test_heads_warns_when_a_correction_cannot_reject(tiny_run, capsys):
    """9 draws: no p can reach 0.05; 99 draws with BH over 48 tests: p >= 0.01 > 0.05 / 48, so
    BH cannot reject fewer than 10 tests at once (a check of the smallest p against alpha alone
    would stay silent); the warning also reaches stderr when the JSON goes to stdout."""
    assert run_main(["heads", str(tiny_run), "--n-seqs", "4", "--n-draws", "9"]) == 0
    assert "no test can be significant" in capsys.readouterr().out
    argv = ["heads", str(tiny_run), "--n-seqs", "4", "--n-draws", "99", "--fdr"]
    assert run_main(argv) == 0
    assert "cannot reject fewer than 10" in capsys.readouterr().out
    assert run_main([*argv, "--json", "-"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["test"]["bh_min_rejections"] == 10
    assert "warning: Benjamini-Hochberg over 48 tests cannot reject fewer than 10" in out.err
    assert run_main(["heads", str(tiny_run), "--n-seqs", "4", "--fdr"]) == 0
    assert "warning" not in capsys.readouterr().out


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [("--alpha", "1.5", "alpha"), ("--induction-score", "bogus", "vw or plain")],
)
def test_heads_bad_flags_write_nothing(tiny_run, tmp_path, capsys, flag, value, says):
    out = tmp_path / "h.json"
    assert run_main(["heads", str(tiny_run), flag, value, "--json", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and len(err.strip().splitlines()) == 1 and says in err
    assert not out.exists()


def test_exam_command(tiny_run, tmp_path, capsys):
    out = tmp_path / "exam.json"
    # the tiny vocabulary has no letters: the built-in exams name the unknown tokens
    assert run_main(["exam", str(tiny_run)]) == 2
    assert "<unk>" in capsys.readouterr().err
    code = run_main(
        [
            "exam",
            str(tiny_run),
            "--prompt",
            "1,2,1,2,1",
            "--target",
            ",",
            "--top-k",
            "3",
            "--json",
            str(out),
        ]
    )
    assert code == 0
    data = json.loads(out.read_text())
    assert data["exams"][0]["target"] == "," and len(data["exams"][0]["top"]) == 3
    assert run_main(["exam", str(tiny_run), "--prompt", "!"]) == 2


@pytest.mark.parametrize("name", ["copying", "circuits"])  # circuits: the hidden earlier name
def test_copying_command(name, tiny_run, tmp_path, capsys):
    out = tmp_path / "c.json"
    assert run_main([name, str(tiny_run), "--head", "1.2", "--token", "!", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["head"] == "1.2" and data["boosted"][0]["token"] == "!"
    assert {"copying_score", "top1_accuracy", "top5_accuracy", "pos_prev_token"} <= set(data)
    assert run_main(["copying", str(tiny_run), "--head", "5.0"]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert run_main(["copying", str(tiny_run), "--head", "x"]) == 2


def test_copying_on_a_byte_model_reads_letters_and_says_which_ids(tmp_path, tiny_cfg, capsys):
    """Issue 47: the default source tokens were control bytes ('<0x01>'..), ``--token ' A'`` was
    refused with "give a single token, e.g. ' A'", and the accuracy ran over all 256 ids without
    a word. Now: letters by default, ' A' read as the letter 'A' (its error suggests a token that
    works here), and the accuracy over the ids the corpus holds beside all ids, each named."""
    from interp_toolkit.models.build import build_model
    from interp_toolkit.runs.folder import save_run
    from interp_toolkit.text.codecs import ByteCodec

    cfg = tiny_cfg.replace(d_vocab=256)
    run = save_run(tmp_path / "bytes", build_model(cfg), ByteCodec(), cfg)
    out = tmp_path / "c.json"
    assert run_main(["copying", str(run), "--head", "1.0", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert [b["token"] for b in data["boosted"]] == ["A", "B", "C", "D"]
    assert data["accuracy_over"] == "all 256 ids of the vocabulary"
    assert 95 <= data["trained_rows"] < 256 and "training text" in data["trained_ids"]
    assert 0.0 <= data["trained_top1_accuracy"] <= 1.0
    assert (
        run_main(["copying", str(run), "--head", "1.0", "--token", " A", "--json", str(out)]) == 0
    )
    assert [b["token"] for b in json.loads(out.read_text())["boosted"]] == ["A"]
    capsys.readouterr()
    assert run_main(["copying", str(run), "--head", "1.0", "--token", "AB"]) == 2
    assert "e.g. 'A'" in capsys.readouterr().err


def test_exam_periods_json(tmp_path, tiny_cfg, capsys):
    """``exam RUN --periods --json F``: per period and token kind the offsets, n, passes, pass
    rate with its Wilson interval, median rank, the chance levels measured (an untrained model of
    the same architecture; ``--chance-run``: another run) and the pass rule."""
    from interp_toolkit.models.build import build_model
    from interp_toolkit.runs.folder import save_run
    from interp_toolkit.text.codecs import EOT_ID, CompactVocab, gpt2_encoding

    enc = gpt2_encoding()
    letters = [enc.encode_ordinary(" " + chr(c))[0] for c in range(65, 91)]
    codec = CompactVocab([EOT_ID, *letters, *range(100, 137)])
    cfg = tiny_cfg.replace(d_vocab=codec.d_vocab, n_ctx=16)
    run = save_run(tmp_path / "letters", build_model(cfg), codec, cfg)
    out = tmp_path / "periods.json"
    args = ["exam", str(run), "--periods", "--n-prompts", "8", "--json", str(out)]
    assert run_main([*args, "--chance-run", str(run)]) == 0
    data = json.loads(out.read_text())
    # 16 positions: BOS + 2 * period - 1 tokens fit up to period 8, for both token kinds
    keys = [(r["kind"], r["period"]) for r in data["periods"]]
    assert keys == [(k, p) for k in ("letters", "random") for p in range(2, 9)]
    assert data["exam_lower_bound"] == 0.9 and "Wilson 95%" in data["pass_rule"]
    assert "McNemar" in data["chance_rule"] and data["n_exams"] == 14
    row = data["periods"][0]
    assert set(row) == {
        "period", "kind", "n_prompts", "passes", "pass_rate", "wilson95", "median_rank",
        "offsets", "chance", "passes_rule", "mean_prob",
    }  # fmt: skip
    assert row["n_prompts"] == 8 and row["offsets"]["max"] <= 16 - 1 - 3
    lo, hi = row["wilson95"]
    assert lo <= row["pass_rate"] <= hi and row["passes_rule"] == (lo >= 0.9)
    untrained, again = row["chance"]
    assert untrained["model"] == f"untrained {cfg.n_layers}-layer model (same architecture)"
    # the run against itself: the same prompts, the same passes, nothing discordant
    assert again["model"] == "letters" and again["passes"] == row["passes"]
    assert again["p_value"] == 1.0
    assert "pass rate" in capsys.readouterr().out
    assert run_main(["exam", str(run), "--periods", "--prompt", "A B", "--target", " A"]) == 2
    assert "--periods makes its own prompts" in capsys.readouterr().err
    assert run_main([*args, "--kinds", "digits"]) == 2
    assert "--kinds 'digits'" in capsys.readouterr().err
    assert run_main([*args[:-2], "--kinds", "random", "--max-period", "3", "--json", "-"]) == 0
    short = json.loads(capsys.readouterr().out)
    assert [(r["kind"], r["period"]) for r in short["periods"]] == [("random", 2), ("random", 3)]


def test_the_period_exams_json_is_declared_in_its_order():
    """``exam --periods --json`` on hand-made exams (its JSON declared, not written by hand):
    the thresholds' rules and the verdict's counts between the seed and the periods, each period
    its own record and whether it passes, last."""
    from interp_toolkit.commands.analysis import PeriodExams
    from interp_toolkit.exams.periods import Chance, PeriodExam
    from interp_toolkit.exams.verdict import chance_rule, exam_verdict, pass_rule

    chance = (Chance("untrained", 0, 200, 1e-9),)
    rows = [PeriodExam(p, "letters", 200, n, 0.0, chance=chance) for p, n in ((2, 200), (3, 100))]
    data = PeriodExams("run", True, 7, exam_verdict(rows), rows).to_dict()
    assert list(data) == [
        "target", "prepend_bos", "seed", "pass_rule", "exam_lower_bound", "chance_rule",
        "n_passing", "n_exams", "above", "periods",
    ]  # fmt: skip
    assert data["pass_rule"] == pass_rule() and data["chance_rule"] == chance_rule(2)
    assert (data["n_passing"], data["n_exams"], data["above"]) == (1, 2, {"untrained": 2})
    assert data["exam_lower_bound"] == 0.9 and data["seed"] == 7
    assert data["periods"] == [
        {**rows[0].to_dict(), "passes_rule": True},
        {**rows[1].to_dict(), "passes_rule": False},
    ]


def test_a_commands_json_is_its_result_between_the_target_and_the_architecture(tiny_model):
    """``Read`` (``heads``, ``copying``, ``circuit --json``): the target, the result's own keys
    written into the record, then the architecture and the notes; the page is not JSON."""
    from dataclasses import dataclass

    from interp_toolkit.commands.analysis import Read
    from interp_toolkit.files.serialize import Jsonable
    from interp_toolkit.models.architecture import architecture_of

    @dataclass(frozen=True)
    class Found(Jsonable):
        score: float
        heads: list[str]

    arch = architecture_of(tiny_model)
    data = Read("run", Found(0.5, ["1.0"]), arch, ["a note"], page="<html>").to_dict()
    assert list(data) == ["target", "score", "heads", "architecture", "notes"]
    assert data["architecture"] == arch.to_dict() and data["notes"] == ["a note"]
    assert (data["target"], data["score"], data["heads"]) == ("run", 0.5, ["1.0"])


def test_the_heads_table_fits_the_terminal_one_line_a_head(tiny_run):
    """Issue 46 item 7: the table was ~230 columns whatever the width (four lines per head at 120
    columns). Now one line per head within 120 columns; --wide keeps every p-value; the JSON holds
    everything."""
    import io

    from rich.console import Console

    from interp_toolkit.commands.analysis import heads
    from interp_toolkit.heads.options import DiscoveryOptions
    from interp_toolkit.reports.terminal import heads_view

    found = heads(str(tiny_run), DiscoveryOptions(n_seqs=8), "cpu")
    data, report = found.to_dict(), found.result.report

    def printed(wide: bool) -> str:
        buf = io.StringIO()
        out = Console(width=120, file=buf)
        for item in heads_view(found.target, report, found.notes, wide):
            out.print(item, soft_wrap=isinstance(item, str))
        return buf.getvalue()

    lines = printed(wide=False).splitlines()
    table = [ln for ln in lines if ln[:1] in "┏┃┡│└"]  # sentences wrap in the terminal itself
    assert table and max(map(len, table)) <= 120
    rows = [ln for ln in lines if ln.startswith("│")]
    assert len(rows) == len(data["heads"])  # one line a head
    wide_text = printed(wide=True)
    wide = [ln for ln in wide_text.splitlines() if ln.startswith("│")]
    assert len(wide) >= 2 * len(data["heads"]) and "p " in wide_text  # p-values too
    assert {"p_value", "decided_by", "tau"} <= set(data["heads"][0])
