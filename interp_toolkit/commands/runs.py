"""``sample``, ``stages``, ``view`` and ``report``: what a run (or any target) gives back: text
it writes, the stages of its training, its attention, its report page."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from interp_toolkit.development.options import StagesOptions
from interp_toolkit.errors import UserError

if TYPE_CHECKING:
    from interp_toolkit.development.curve import Stages


def sample(
    run: Path,
    prompt: str = "",
    *,
    tokens: int = 40,
    temperature: float = 1.0,
    top_k: int | None = None,
    seed: int = 0,
    device: str = "auto",
) -> None:
    """Continue ``prompt`` with ``tokens`` tokens from a trained run, written to standard output
    as they come, with a progress bar on standard error when it is not a terminal; Ctrl-C keeps
    the text so far and says how far it got."""
    from interp_toolkit.errors import Interrupted
    from interp_toolkit.models.sampling import decode_stream, sample_ids
    from interp_toolkit.runs.folder import load_run
    from interp_toolkit.runtime.progress import progress_bar
    from interp_toolkit.stats.thresholds import UNKNOWN_NOTICE_SHARE
    from interp_toolkit.text.codecs import describe_vocab, unknown_share

    out = sys.stdout
    r = load_run(run, device=device)
    ids = sample_ids(
        r.model, r.codec, prompt, n_tokens=tokens, temperature=temperature, top_k=top_k, seed=seed
    )
    if prompt and (share := unknown_share(r.codec, r.codec.encode(prompt))) > UNKNOWN_NOTICE_SHARE:
        print(
            f"warning: {share:.0%} of the prompt's tokens are <unk> to this model (it knows "
            f"{describe_vocab(r.codec)}): it continues from <unk>, not from those words.",
            file=sys.stderr,
            flush=True,
        )
    shown = not out.isatty()
    bar = progress_bar(
        total=tokens, unit="tok", desc="sampling", enabled=shown, leave=False, delay=1.0
    )

    def counted() -> Iterator[int]:
        for i in ids:
            bar.update()
            yield i

    out.write(prompt)
    try:
        for piece in decode_stream(r.codec, counted()):
            out.write(piece)
            out.flush()
    except KeyboardInterrupt:
        raise Interrupted(
            f"stopped after {bar.n} of {tokens} tokens (the text so far is above)."
        ) from None
    finally:
        bar.close()
        out.write("\n")
        out.flush()


@dataclass(frozen=True)
class Staged:
    """A run's stages (kept in RUN/stages.json), its figure when asked for, and what was wrong
    with the run's metrics.jsonl (``damage``, None when whole)."""

    stages: Stages
    page: str | None
    damage: str | None


def stages(
    run: Path, options: StagesOptions, *, page: bool = False, device: str = "auto"
) -> Staged:
    """The LLC at every kept checkpoint (the SGLD settings given, the rest calibrated for the
    run's preset) and the stages it marks, kept in RUN/stages.json; ``reuse``: the rule again
    on the LLC kept there."""
    from interp_toolkit.development.llc import calibrated_settings
    from interp_toolkit.runs.spec import split_step

    if (at := split_step(run)) is not None:
        raise UserError(
            f"stages reads every kept checkpoint of a run: give the run folder {at[0]}, not "
            f"{run} (--max-step {at[1]} for the checkpoints up to step {at[1]})."
        )
    from interp_toolkit.development.curve import LLCCurve
    from interp_toolkit.development.curve import stages as find_stages
    from interp_toolkit.files.io import folder_lock, write_json
    from interp_toolkit.runs.folder import RunPaths, metrics_damage, read_config, read_stages, stamp
    from interp_toolkit.runtime.progress import status
    from interp_toolkit.training.settings import recorded_preset_name

    preset = recorded_preset_name(read_config(run))  # not a run folder: its one line
    rule, max_step = options.rule, options.max_step
    # the run is held while its stages are read and kept (a training that would rewrite
    # the run, `train --restart`, is refused meanwhile, and the reverse)
    with folder_lock(run, "run folder"):
        if options.reuse:
            curve = LLCCurve.from_dict(read_stages(run))
            with status("stages", "the rule on the kept LLC"):
                found = find_stages(run, curve=curve, device=device, **rule)
        else:
            settings, source = calibrated_settings(preset, options.sgld)
            kept = RunPaths(run).snapshot_steps()
            steps = [s for s in kept if max_step is None or s <= max_step]
            if max_step is not None and len(kept) >= 3 > len(steps):
                raise UserError(
                    f"--max-step {max_step} leaves {len(steps)} of the {len(kept)} checkpoints {run} "
                    f"kept (steps {', '.join(map(str, kept[:4]))}, ...): stages need 3 or more; "
                    f"use --max-step {kept[2]} or more."
                )
            with status("stages", "estimating the LLC") as shown:
                found = find_stages(
                    run,
                    replace(settings, seed=options.seed),
                    settings_source=source,
                    n_batches=options.n_batches,
                    rows=options.rows,
                    steps=steps,
                    device=device,
                    progress=lambda i, n, step: shown.update(
                        f"checkpoint {i + 1} of {n} (step {step})"
                    ),
                    **rule,
                )
        # kept (its report draws them)
        write_json(RunPaths(run).stages, {**found.to_dict(), **stamp(run)})
    html = None
    if page:
        from interp_toolkit.runs.folder import read_metrics
        from interp_toolkit.views.stages import stages_html

        html = stages_html(found, read_metrics(run))
    return Staged(found, html, metrics_damage(run))


def attention(
    target: str,
    prompt: str,
    *,
    layer: int | None = None,
    heads: list[int] | None = None,
    prepend_bos: bool = True,
    device: str = "auto",
    dtype: str = "fp32",
) -> tuple[str, str | None]:
    """The attention patterns of ``target`` on ``prompt`` as an offline circuitsvis page, and a
    notice when much of the prompt is unknown to the model (None otherwise)."""
    from interp_toolkit.reports.attention import attention_page, attention_view
    from interp_toolkit.runs.targets import load_target
    from interp_toolkit.stats.thresholds import UNKNOWN_NOTICE_SHARE
    from interp_toolkit.text.codecs import unknown_notice

    tgt = load_target(target, device, for_weights=False, dtype=dtype)
    notice = unknown_notice(tgt.codec, tgt.codec.encode(prompt), UNKNOWN_NOTICE_SHARE)
    views = attention_view(
        tgt.model, prompt, codec=tgt.codec, layer=layer, heads=heads, prepend_bos=prepend_bos
    )
    page = attention_page(views, title=f"Attention: {tgt.name}", intro=f"Prompt: {prompt!r}")
    return page, notice


def report(
    run: Path, out: Path | None = None, *, device: str = "auto", dtype: str = "fp32"
) -> tuple[Path, str | None]:
    """Write the report page of a run folder (RUN/report.html unless ``out``) or of a Hugging
    Face model (into ``out``); the path written, and what was wrong with the run's
    metrics.jsonl (None when whole)."""
    from interp_toolkit.runs.hub import is_hf_spec

    hf = is_hf_spec(run)
    if hf and out is None:
        raise UserError(
            "a report of a Hugging Face model needs a file to go to: give --out report.html."
        )
    from interp_toolkit.reports.run_report import build_run_report, build_target_report
    from interp_toolkit.runs.folder import metrics_damage
    from interp_toolkit.runs.targets import load_target

    if hf:
        target = load_target(str(run), device, for_weights=False, dtype=dtype)
        return build_target_report(target, out), None
    path = build_run_report(run, out, device=device)
    return path, metrics_damage(run)  # said once the report stands (an error is one line)
