"""One owner per concept, checked on the source (docs/architecture.md, "One owner per concept"):
each test fails when a second place starts doing what the owner does."""

from __future__ import annotations

import ast
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


THRESHOLDS_MODULE = PKG / "stats/thresholds.py"


def _top_level_names(path: Path) -> dict[str, ast.expr | None]:
    """The names a module binds at its top level (constants and classes), with their values."""
    names: dict[str, ast.expr | None] = {}
    for node in ast.parse(path.read_text("utf-8")).body:
        if isinstance(node, ast.Assign):
            names |= {t.id: node.value for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node.value
        elif isinstance(node, ast.ClassDef):
            names[node.name] = None
    return {n: v for n, v in names.items() if not n.startswith("_")}


def _defines(name: str) -> str:
    return rf"^(class\s+{name}\b|{name}\s*(:[^=\n]*)?=)"


def test_thresholds_have_one_owner():
    """Every name stats/thresholds.py defines (read from it, not listed here) is defined nowhere
    else: a module that needs a threshold imports it."""
    names = _top_level_names(THRESHOLDS_MODULE)
    assert {"ARENA_FLOOR", "ALPHA", "N_BOOT", "RIVAL_RATIO", "RIVAL_WIDTH", "Thresholds"} <= set(
        names
    )
    for planted, name in (
        ("RIVAL_WIDTH: int | None = 2", "RIVAL_WIDTH"),
        ("class Thresholds:", "Thresholds"),
    ):
        assert re.search(_defines(name), planted)  # a second definition would be found
    assert not re.search(_defines("ALPHA"), "BEATS_ALPHA = 0.01")
    for name in names:
        assert _where(_defines(name)) == {"stats/thresholds.py"}, name


#: Numbers with a fractional part a module binds at its top level outside stats/thresholds.py, each
#: with why it is not a threshold (a verdict's cut-off). A new one is either moved to
#: stats/thresholds.py or named here with its reason.
NOT_THRESHOLDS: dict[str, str] = {
    "stats/intervals.py: Z95": "the normal quantile of 95%, a constant of nature",
    "runs/records.py: FLOAT32_MAX": "the largest float32, a constant of the format",
    "runtime/devices.py: CUDA_FREE_FRACTION": "the share of free GPU memory a chunk may take",
    "runtime/progress.py: PIPED_INTERVAL": "seconds between progress lines on a pipe",
    "runtime/progress.py: STATUS_INTERVAL": "seconds between status lines",
    "training/settings.py: LR_MAX": "the largest learning rate the input check accepts",
    "saes/train.py: DECAY_FRACTION": "the share of SAE training the learning rate decays over",
    "study/jobs.py: STOP_WAIT_S": "seconds a stopped study waits for its workers",
}


def _float_constants() -> set[str]:
    found = set()
    for path in PKG.rglob("*.py"):
        if path == THRESHOLDS_MODULE:
            continue
        for name, value in _top_level_names(path).items():
            if isinstance(value, ast.UnaryOp):
                value = value.operand
            if isinstance(value, ast.Constant) and isinstance(value.value, float):
                found.add(f"{path.relative_to(PKG)}: {name}")
    return found


def test_no_threshold_outside_its_module():
    found = _float_constants()
    assert found <= set(NOT_THRESHOLDS), sorted(found - set(NOT_THRESHOLDS))
    assert set(NOT_THRESHOLDS) <= found, sorted(set(NOT_THRESHOLDS) - found)  # a stale entry


def test_codecs_and_their_loading_have_one_owner():
    assert _where(r"^\s+store = \"(gpt2|bytes)\"") == {"text/codecs.py"}
    assert _where(r"^def (load_codec|codec_from_dict|save_codec)\b") == {"text/codecs.py"}


def test_the_setting_is_named_in_one_place():
    assert _where(r"^def setting_name\b") == {"text/stream.py"}
    assert _where(r"^[^#\n]*\"natural text\"") == {"text/stream.py"}


def test_sae_architectures_branch_only_in_their_registry():
    """What differs between SAE architectures is each one's class in saes/architectures.py: no
    ``arch ==`` / ``cfg.arch !=`` branch elsewhere (a new architecture edits no other file)."""
    assert _where(r"^[^#\n]*\barch\s*[!=]=") <= {"saes/architectures.py"}


def test_loading_a_target_has_one_entry():
    assert _where(r"^def load_target\b") <= {"runs/targets.py"}


#: Seeded draws still made outside runtime/seeds.py, by file, each with why it is still there. None
#: today: every site in interp_toolkit/ asks ``rng``, ``np_rng`` or ``seed_global`` for its stream.
#: (A site in a folder being edited elsewhere goes here with that reason, until it is moved.)
SEED_SITES_LEFT: dict[str, str] = {}


def test_seed_streams_have_one_owner():
    found = _where(r"^[^#\n]*\b(manual_seed|default_rng|RandomState|random\.seed)\(\s*[^)\s]")
    assert found - set(SEED_SITES_LEFT) == {"runtime/seeds.py"}, found


def _stream_keys() -> list[str]:
    tree = ast.parse((PKG / "runtime/seeds.py").read_text("utf-8"))
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "STREAMS":
            assert isinstance(node.value, ast.Dict)
            return [k.value for k in node.value.keys if isinstance(k, ast.Constant)]
    raise AssertionError("runtime/seeds.py has no STREAMS = {...}")


def test_seed_purposes_are_unique_words_and_every_one_is_drawn():
    from interp_toolkit.runtime.seeds import STREAMS

    keys = _stream_keys()  # in the source: a repeated key in a dict literal silently replaces one
    assert len(keys) == len(set(keys)) == len(STREAMS), sorted(k for k in keys if keys.count(k) > 1)
    assert all(re.fullmatch(r"[a-z]+(_[a-z]+)*", k) for k in keys), keys
    drawn: set[str] = set()
    for path in PKG.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            if name in {"rng", "np_rng", "seed_global"} and path.name != "seeds.py":
                purpose = node.args[1] if len(node.args) > 1 else None
                where = f"{path.relative_to(PKG)}:{node.lineno}"
                assert isinstance(purpose, ast.Constant) and purpose.value in STREAMS, where
                drawn.add(purpose.value)
    assert drawn == set(STREAMS), sorted(set(STREAMS) ^ drawn)


def test_seed_streams_keep_their_offsets():
    """The numbers each site added to its seed before runtime/seeds.py (issue 29): renumbering
    one changes what every run, snapshot and study draws."""
    from interp_toolkit.runtime.seeds import STREAMS

    blocks = 1_000_003
    assert {p: (s.offset, s.kind, s.block_stride) for p, s in STREAMS.items()} == {
        "embedding_init": (1_000_003, "torch", 0),
        "sampling": (0, "torch", 0),
        "repeat_rows": (1, "numpy", 0),
        "text_order": (2, "numpy", 0),
        "repeated_tokens": (0, "torch", 0),
        "no_repeat_control": (0, "torch", 0),
        "sign_flips": (7_368_787, "torch", 0),
        "untrained_hf_init": (0, "global", 0),
        "composition_baseline": (0, "torch", 0),
        "prompt_bootstrap": (0, "torch", 0),
        "induction_corrupt": (104_729, "torch", 0),
        "previous_token_prompts": (7, "torch", 0),
        "ioi_prompts": (0, "torch", 0),
        "docstring_prompts": (0, "torch", 0),
        "probe_split": (0, "torch", 0),
        "probe_windows": (0, "torch", 0),
        "control_task": (104_729, "torch", 0),
        "probe_bootstrap": (31_337, "torch", 0),
        "similar_pairs": (0, "torch", 0),
        "shuffled_activations": (0, "torch", 0),
        "sae_init": (0, "torch", 0),
        "sae_training": (0, "global", 0),
        "sae_batch_order": (0, "torch", blocks),
        "head_share_null": (0, "torch", 0),
        "planted_directions": (104_729, "torch", 0),
        "planted_samples": (7, "torch", blocks),
        "planted_heldout": (15_485_863, "torch", blocks),
        "row_bootstrap": (49_979_687, "torch", 0),
        "exam_order_control": (67_867_967, "numpy", 0),
        "cluster_bootstrap": (104_395_301, "numpy", 0),
        "passage_order_control": (86_028_121, "torch", 0),
    }


def test_seed_streams_draw_what_the_sites_drew():
    import numpy as np
    import pytest
    import torch

    from interp_toolkit.runtime.seeds import np_rng, rng, seed_global

    def old(value: int) -> torch.Tensor:
        return torch.rand(8, generator=torch.Generator().manual_seed(value))

    for seed in (0, 5, 123):
        for purpose, value in (
            ("control_task", seed + 104_729),
            ("induction_corrupt", seed + 104_729),
            ("sign_flips", seed + 7_368_787),
            ("probe_bootstrap", seed + 31_337),
            ("embedding_init", seed + 1_000_003),
            ("previous_token_prompts", seed + 7),
            ("sampling", seed),
        ):
            assert torch.equal(torch.rand(8, generator=rng(seed, purpose)), old(value)), purpose
        got = torch.rand(8, generator=rng(seed, "planted_samples", block=3))
        assert torch.equal(got, old(seed * 1_000_003 + 7 + 3))
        got = torch.rand(8, generator=rng(seed, "sae_batch_order", block=2))
        assert torch.equal(got, old(seed * 1_000_003 + 2))
        for purpose, word in (("repeat_rows", 1), ("text_order", 2)):
            new = np_rng(seed, purpose, 4).integers(0, 1000, 8)
            assert (new == np.random.default_rng([seed, word, 4]).integers(0, 1000, 8)).all()
        with torch.random.fork_rng(devices=[]):
            seed_global(seed, "sae_training")
            new = torch.rand(8)
            torch.manual_seed(seed)
            assert torch.equal(new, torch.rand(8))
    for bad in (
        lambda: rng(0, "no_such_purpose"),
        lambda: rng(0, "repeat_rows"),  # a numpy stream
        lambda: np_rng(0, "sampling"),  # a torch stream
        lambda: seed_global(0, "sampling"),
        lambda: rng(0, "planted_samples"),  # drawn block by block: the block is required
        lambda: rng(0, "sampling", block=1),
    ):
        with pytest.raises(ValueError):
            bad()


def test_the_longest_row_read_has_one_owner():
    assert _where(r"^MAX_SEQ\s*=") == {"models/activations.py"}
    # study/layers.py is being edited elsewhere (issue 29's lead moves it): its SAE rows still
    # spell the limit
    assert _where(r"^[^#\n]*min\(.*n_ctx.*,\s*128\)") <= {"study/layers.py"}


def test_cli_defaults_are_their_owners_values():
    """A CLI default its owner holds in a module that imports torch stays a literal (``--help``
    imports no torch, test_cli_help.py): it must be the owner's value."""
    import typer.main

    import interp_toolkit.cli  # noqa: F401 (registers every command)
    from interp_toolkit.causal import ROUTE_PROMPTS
    from interp_toolkit.cli.app import app
    from interp_toolkit.exams.prompts import MAX_OFFSET, N_PROMPTS
    from interp_toolkit.heads.discovery import N_SEQS
    from interp_toolkit.models.activations import MAX_SEQ
    from interp_toolkit.probing.data import NEURON_POSITIONS
    from interp_toolkit.probing.probes import DEFAULT_POSITIONS
    from interp_toolkit.stats.thresholds import ALPHA

    commands = typer.main.get_command(app).commands
    option = {
        (name, opt): p for name, cmd in commands.items() for p in cmd.params for opt in p.opts
    }
    assert option["heads", "--alpha"].default == ALPHA
    assert option["heads", "--n-seqs"].default == N_SEQS
    assert option["exam", "--n-prompts"].default == N_PROMPTS
    assert option["exam", "--max-offset"].default == MAX_OFFSET
    assert option["circuit", "--n-prompts"].default == ROUTE_PROMPTS
    assert f"at most {MAX_SEQ})" in option["probe", "--seq-len"].help
    assert f"{DEFAULT_POSITIONS:,} positions" in option["probe", "--n-seqs"].help
    assert f"{NEURON_POSITIONS:,} positions" in option["neurons", "--n-seqs"].help


def test_the_induction_layer_rule_has_one_owner():
    # "an induction head sits in layer >= 1 (any layer of a 1-layer model)": induction_layer_min
    assert _where(r"\b1 if [\w.()]*layers[\w.()]* > 1 else 0\b") == {"heads/induction.py"}
    assert _where(r"^def (induction_layer_min|strongest_induction_head)\b") == {
        "heads/induction.py"
    }


#: A run folder's file names, spelled as a path step. Besides ``RunPaths``: a Hugging Face folder
#: has its own ``config.json``/``model.safetensors``/``vocab.json`` (runs/hf.py, runs/hf_checks.py, runs/hub.py) and
#: an SAE folder its own ``checkpoints`` (saes/config.py: SAEPaths, SAELens's layout).
RUN_FILES = (
    r"/ \"(config\.json|model\.safetensors|vocab\.json|metrics\.jsonl|samples\.json|heads\.json"
    r"|exam\.json|circuits\.json|report\.html|snapshots|checkpoints|saes)\""
)


def test_run_folder_names_have_one_owner():
    found = _where(RUN_FILES)
    assert found <= {
        "runs/folder.py",
        "runs/hf.py",
        "runs/hf_checks.py",
        "runs/hub.py",
        "saes/config.py",
    }, found


def test_derived_seeds_have_one_owner():
    # a seed passed on as ``seed + 1`` or ``seed * 1000 + period`` is runtime/seeds.py: derive's
    found = _where(r"^[^#`\"\n]*\b\w*seed\)?\s*[+*]\s*[A-Za-z0-9_(]")
    assert found == {"runtime/seeds.py"}, found
