"""Why the toolkit's ``--preset text`` run grew less induction than try L (docs/recipes.md §2):
the training engine or the initial weights? Two crossed arms, 1,000 steps each (the first epoch,
where the toolkit's data order and text_tries.py's are the same windows in the same order):

    python benchmarks/text_init_cross.py A    # the toolkit's engine from try L's initial weights
    python benchmarks/text_init_cross.py B    # text_tries.py's engine from the toolkit's seed-0 init

Arm A builds try L's model exactly as ``benchmarks/text_tries.py`` does (its own code, run up to
the optimiser), copies the weights into the toolkit's ``text`` preset model (the unembedding
bias, which the tries lack, starts at 0) and trains it with the toolkit's loop
(``training.loop.run_tl_train``), scoring the toolkit's probe every 250 steps. Arm B runs
text_tries.py with try L's settings after loading the toolkit's seed-0 initial weights into it.
Logs: experiments/archive/results/text_tries/XA_tk_engine_L_init.jsonl and XB_tries_engine_tk_init.jsonl.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import torch
from safetensors.torch import load_file

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from interp_toolkit.heads.repeats import default_probe  # noqa: E402
from interp_toolkit.heads.scorer import head_scores  # noqa: E402
from interp_toolkit.models.build import build_model  # noqa: E402
from interp_toolkit.runs.folder import apply_weights, save_weights  # noqa: E402
from interp_toolkit.text.stream import build_codec, tokenize_corpus, windows  # noqa: E402
from interp_toolkit.training.loop import run_tl_train  # noqa: E402
from interp_toolkit.training.presets import get_preset, with_overrides  # noqa: E402
from interp_toolkit.training.trainer import _stream  # noqa: E402

STEPS, LOG_DIR = 1000, ROOT / "benchmarks" / "archive" / "results" / "text_tries"
TRIES = ROOT / "benchmarks" / "archive" / "text_tries.py"
NAMES = {"A": "XA_tk_engine_L_init", "B": "XB_tries_engine_tk_init"}
# toolkit state-dict key -> text_tries.py key
KEYS = {"embed.weight": "E", "pos_embed.weight": "P", "unembed.weight": "U.weight"}
KEYS |= {
    f"blocks.{i}.attn.{p}.{t}": f"blocks.{i}.{p}.{t}"
    for i in range(2)
    for p in "qkvo"
    for t in ("weight", "bias")
}


def tries_args(name: str) -> list[str]:
    """try L's settings (docs/recipes.md §3)."""
    return ["text_tries.py", "--name", name, "--log-dir", str(LOG_DIR), "--pos", "shortformer"] + [
        "--vocab", "256", "--lr", "6e-3", "--warmup", "200", "--steps", str(STEPS), "--seed", "0"
    ]  # fmt: skip


def toolkit_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    with tempfile.TemporaryDirectory() as tmp:
        save_weights(model, Path(tmp) / "w.safetensors")
        return load_file(Path(tmp) / "w.safetensors")


def main() -> None:
    arm = sys.argv[1]
    torch.set_num_threads(1)
    corpus = tokenize_corpus("stdlib", progress=False)
    codec = build_codec(corpus, 256)
    preset = with_overrides(get_preset("text", 2), steps=STEPS)
    model = build_model(preset.model.replace(d_vocab=codec.d_vocab), codec=codec)
    source = TRIES.read_text()
    env = {"__name__": "__main__", "__file__": str(TRIES)}
    sys.argv = tries_args(NAMES[arm])
    if arm == "B":
        env["INIT"] = {KEYS[k]: v for k, v in toolkit_state(model).items() if k in KEYS}
        source = source.replace(
            "model = Model()\n", "model = Model()\nmodel.load_state_dict(INIT)\n"
        )
        exec(compile(source, str(TRIES), "exec"), env)
        return
    exec(compile(source.split("opt = torch.optim.AdamW(")[0], str(TRIES), "exec"), env)
    tries = env["model"].state_dict()
    ref = toolkit_state(model)
    weights = {
        k: tries[KEYS[k]].clone() if k in KEYS else torch.zeros_like(v) for k, v in ref.items()
    }
    apply_weights(model, weights, Path("try L init"))
    stream = _stream(
        windows(corpus.train_ids, codec, preset.model.n_ctx + 1),
        codec,
        preset.model,
        preset.data,
        preset.train,
        0,
    )
    probe = default_probe(codec, preset.model.n_ctx, n_seqs=32, seed=preset.train.seed + 7919)
    log = (LOG_DIR / f"{NAMES[arm]}.jsonl").open("w")
    t0 = time.time()

    def after(step: int, loss: torch.Tensor, _opt: torch.optim.Optimizer) -> None:
        if step % 250:
            return
        model.eval()
        with torch.no_grad():
            s = head_scores(model, probe)
        row = {
            "step": step,
            "tokens": step * preset.train.batch_size * preset.model.n_ctx,
            "min": round((time.time() - t0) / 60, 2),
            "train": round(float(loss), 4),
            "prev0": [round(float(v), 3) for v in s.get("previous_token")[0]],
            "vw_last": [round(float(v), 3) for v in s.get("induction_vw")[-1]],
        }
        log.write(json.dumps(row) + "\n")
        log.flush()
        model.train()

    run_tl_train(model, stream, preset.train, start_step=0, optimizer_state=None, after_step=after)


if __name__ == "__main__":
    main()
