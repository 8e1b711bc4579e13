"""The schemas a run's own files are read back with: ``metrics.jsonl``, ``stages.json``,
``samples.json``. Pure checks (data in, the data or one line out); reading the files is
``runs/folder.py``'s (:func:`~.folder.read_metrics`, :func:`~.folder.read_stages`,
:func:`~.folder.read_samples`).

One mechanism for the three: checks (:func:`whole`, :func:`real`, :func:`items`,
:func:`fields`, :func:`grid`: types, ranges, order, score grids of the run's own shape) and the
run the file belongs to: each is stamped with :func:`run_identity` when written (a digest of
the run's model config, data settings, seed, vocabulary and corpus, as config.json records
them) and compared on read (:func:`belongs`). A file of another run, or a value out of range, is
one line naming the file, the value and the fix; a metrics line that fails its schema is damage,
skipped and named, as a line cut off by a kill always was. Files written before runs recorded
digests carry no stamp and are read unchecked for it.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp_toolkit.errors import UserError

#: A check: ``(value, where)`` -> the value, or :class:`Damage` naming ``where``.
Check = Callable[[Any, str], Any]


class Damage(ValueError):
    """A value a schema refuses: ``where`` in the file, and ``what`` is wrong with it."""


def whole(least: int = 0, most: float | int = math.inf) -> Check:
    """A whole number (not a float such as 1.9, not a bool) from ``least`` to ``most``."""

    def check(v: Any, where: str) -> int:
        if not isinstance(v, int) or isinstance(v, bool) or not least <= v <= most:
            raise Damage(f"{where} is {v!r}, not a whole number from {least} to {most:g}")
        return v

    return check


def real(least: float | int = -math.inf, most: float | int = math.inf, nan: bool = False) -> Check:
    """A finite number from ``least`` to ``most`` (``nan``: NaN or None too)."""

    def check(v: Any, where: str) -> Any:
        if nan and (v is None or (isinstance(v, float) and math.isnan(v))):
            return v
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        if not ok or not least <= v <= most:
            raise Damage(f"{where} is {v!r}, not a number from {least:g} to {most:g}")
        return v

    return check


def kind(*types: type) -> Check:
    def check(v: Any, where: str) -> Any:
        if not isinstance(v, types):
            names = " or ".join(t.__name__ for t in types)
            raise Damage(f"{where} is {type(v).__name__} {str(v)[:40]!r}, not {names}")
        return v

    return check


def items(item: Check, least: int = 0, rising: Callable[[Any], Any] | None = None) -> Check:
    """A list of at least ``least`` items, each passing ``item``; ``rising``: the key that must
    grow strictly from item to item (a step)."""

    def check(v: Any, where: str) -> list[Any]:
        if not isinstance(v, list) or len(v) < least:
            raise Damage(f"{where} is {str(v)[:40]}, not a list of {least} or more")
        out = [item(x, f"{where}[{i}]") for i, x in enumerate(v)]
        keys = [rising(x) for x in out] if rising else []
        for i in range(1, len(keys)):
            if keys[i] <= keys[i - 1]:
                raise Damage(f"{where}[{i}] repeats or goes back ({keys[i - 1]} then {keys[i]})")
        return out

    return check


def fields(required: dict[str, Check], optional: dict[str, Check] | None = None) -> Check:
    """A JSON object with every ``required`` key (each passing its check) and any ``optional``
    one that is present; other keys are kept unchecked."""

    def check(v: Any, where: str) -> dict[str, Any]:
        if not isinstance(v, dict):
            raise Damage(f"{where or 'the file'} is {type(v).__name__}, not a JSON object")
        out = dict(v)
        for name, c in [*required.items(), *(optional or {}).items()]:
            if name in v:
                out[name] = c(v[name], f"{where}.{name}" if where else name)
            elif name in required:
                raise Damage(f"{where or 'the file'} has no {name!r}")
        return out

    return check


def maybe(check: Check) -> Check:
    return lambda v, where: None if v is None else check(v, where)


@dataclass(frozen=True)
class RunFacts:
    """What a run's files are checked against: its layers and heads, and its identity (None: a
    run from before identities)."""

    n_layers: int
    n_heads: int
    identity: str | None


def facts_of(config: dict[str, Any] | None) -> RunFacts | None:
    """The facts of a run's config.json (None without one, or without a readable shape)."""
    if config is None:
        return None
    try:
        shape = int(config["model"]["n_layers"]), int(config["model"]["n_heads"])
    except (KeyError, TypeError, ValueError):
        return None
    return RunFacts(*shape, run_identity(config))


def run_identity(config: dict[str, Any]) -> str | None:
    """The run a config.json describes, as a digest of its model config, data settings, seed
    and the digests of its vocabulary and corpus (what stays the same when a run is resumed to
    more steps); None for a run trained before digests were recorded."""
    digests = config.get("digests") or {}
    if not digests.get("vocab"):
        return None
    settings = config.get("settings") or {}
    what = {
        "model": config.get("model"),
        "data": settings.get("data"),
        "seed": (settings.get("train") or {}).get("seed"),
        "vocab": digests.get("vocab"),
        "corpus": digests.get("corpus"),
    }
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:16]


def belongs(stamp: Any, facts: RunFacts | None, file: Path, fix: str) -> None:
    """A file stamped ``stamp`` must be the run's of ``facts``."""
    if stamp is None or facts is None or facts.identity is None or stamp == facts.identity:
        return
    raise UserError(
        f"{file} belongs to another run (its run digest {str(stamp)[:16]}, this run's "
        f"{facts.identity}): it was copied in or the run was retrained; {fix}"
    )


def checked(schema: Check, data: Any, facts: RunFacts | None, file: Path, fix: str) -> Any:
    """``data`` (a whole file's) passed through ``schema``, and of the run of ``facts``
    (:func:`belongs`); damage is one line naming ``file`` and the ``fix``."""
    try:
        data = schema(data, "")
    except Damage as exc:
        raise UserError(f"{file} is damaged ({exc}): {fix}") from None
    belongs(data.get("run_digest"), facts, file, fix)
    return data


# ----------------------------------------------------------------------------- metrics.jsonl

#: The score grids a metrics row may hold, ``[layer][head]``.
GRID_KEYS = ("induction", "prev_token", "induction_vw", "text_induction")


def grid(facts: RunFacts | None) -> Check:
    """A ``[layer][head]`` grid of scores in [0, 1] (NaN allowed: a score that read nothing),
    of the run's own shape when its config is known."""
    score = real(-1e-6, 1 + 1e-6, nan=True)

    def check(v: Any, where: str) -> Any:
        rows = items(items(score, least=1), least=1)(v, where)
        if len({len(r) for r in rows}) != 1:
            raise Damage(f"{where} has rows of different lengths")
        if facts and (len(rows), len(rows[0])) != (facts.n_layers, facts.n_heads):
            raise Damage(
                f"{where} is {len(rows)} layers x {len(rows[0])} heads; the run has "
                f"{facts.n_layers} x {facts.n_heads}"
            )
        return v

    return check


def metrics_row(facts: RunFacts | None) -> Check:
    g = grid(facts)
    row = fields(
        {"step": whole(0)},
        {"loss": real(0), "val_loss": real(0), "tokens": whole(0), "lr": real(0)}
        | {k: g for k in GRID_KEYS},
    )

    def check(v: Any, where: str) -> dict[str, Any]:
        out = row(v, where)
        if "induction" in out and "prev_token" not in out:
            raise Damage(f"{where} has head scores but no 'prev_token' grid")
        return out

    return check


@dataclass(frozen=True)
class MetricsLines:
    rows: list[dict[str, Any]]
    bad: list[int]  # line numbers (from 1) that are not whole records
    total: int
    why: str | None  # what the first bad line fails


def check_metrics(lines: list[str], facts: RunFacts | None, file: Path) -> MetricsLines:
    """The lines of a metrics.jsonl, each checked (:func:`metrics_row`; steps rising); another
    run's rows are a UserError."""
    check = metrics_row(facts)
    rows: list[dict[str, Any]] = []
    bad, why = [], None
    for number, line in enumerate(lines, 1):
        try:
            row = check(json.loads(line), f"line {number}")
            if rows and row["step"] <= rows[-1]["step"]:
                raise Damage(f"line {number} goes back to step {row['step']}")
        except (json.JSONDecodeError, Damage) as exc:
            if line.strip():
                bad.append(number)
                why = why or (str(exc) if isinstance(exc, Damage) else "not JSON")
            continue
        belongs(row.get("run_digest"), facts, file, "restore this run's own, or retrain it.")
        rows.append(row)
    return MetricsLines(rows, bad, len(lines), why)


def damage_sentence(file: Path, m: MetricsLines) -> str | None:
    """A sentence naming the lines of a metrics.jsonl that are not whole records (and the last
    step the good ones reach); None when every line is whole."""
    if not m.bad:
        return None
    where = (
        f"its last line ({m.bad[0]} of {m.total}) is cut off (a write stopped half-way, e.g. "
        "kill -9)"
        if m.bad == [m.total] and m.why == "not JSON"
        else f"{len(m.bad)} of its {m.total} lines are not whole records (line "
        f"{', '.join(map(str, m.bad[:5]))}{' ...' if len(m.bad) > 5 else ''}: {m.why})"
    )
    steps = [r["step"] for r in m.rows]
    reach = f"what it shows stops at step {max(steps)}" if steps else "no step is readable"
    return f"{file}: {where}; {reach}."


# ----------------------------------------------------------------------------- stages.json


#: The largest float32: a loss (and so a difference of losses) cannot pass it.
FLOAT32_MAX = 3.4028234663852886e38


def llc_checkpoint(v: Any, where: str) -> dict[str, Any]:
    """One estimate: the LLC is nβ times a difference of float32 losses (so within nβ x the
    largest float32), the mean of its chains' (as written, to 6 decimals), inside its interval."""
    c = fields(
        {
            "step": whole(1),
            "nbeta": real(1e-12),
            "init_loss": maybe(real(0)),
            "diagnostics": fields(
                {"drift": kind(list), "r_hat": maybe(real()), "finite": kind(bool)}
            ),
            "settings": kind(dict),
        },
        {"below_zero": kind(bool), "std": maybe(real(0)), "seconds": real(0)},
    )(v, where)
    bound = c["nbeta"] * FLOAT32_MAX
    llc = maybe(real(-bound, bound))
    c |= fields({"llc": llc, "interval": items(llc, least=2), "per_chain": items(llc, least=1)})(
        v, where
    )
    chains = [x for x in c["per_chain"] if x is not None]
    if c["llc"] is not None and len(chains) == len(c["per_chain"]):
        mean = sum(chains) / len(chains)
        if abs(c["llc"] - mean) > 1e-5 * max(1.0, abs(mean)):
            raise Damage(f"{where}.llc is {c['llc']!r}, not the mean of its chains ({mean:.6g})")
        lo, hi = c["interval"][:2]
        if lo is not None and hi is not None and not lo - 1e-5 <= c["llc"] <= hi + 1e-5:
            raise Damage(f"{where}.llc is {c['llc']!r}, outside its interval [{lo}, {hi}]")
    return c


def stages_schema() -> Check:
    boundary = fields({"step": whole(1), "interval": items(whole(1), least=2), "kind": kind(str)})
    ends, text = {"start_measures": kind(dict), "end_measures": kind(dict)}, kind(str)
    stage = {"stage": whole(1), "start": whole(1), "end": whole(1), "llc": items(real()), **ends}
    rule = {"smoothing": text, "boundary": text, "interval": text, "bandwidth": real()}
    return fields(
        {
            "run": kind(str),
            "checkpoints": items(llc_checkpoint, least=3, rising=lambda c: c["step"]),
            "batches": fields({"source": kind(str)}),
            "rule": fields({**rule, "min_swing": real()}),
            "boundaries": items(boundary),
            "stages": items(fields({**stage, "summary": text})),
            "phase_change": fields({"phase_change_step": maybe(whole(1))}),
            "seconds": real(0),
        },
        {"settings": maybe(kind(dict)), "settings_source": kind(str), "run_digest": kind(str)},
    )


def check_stages(
    data: Any, facts: RunFacts | None, kept: list[int], file: Path, fix: str
) -> dict[str, Any]:
    """A stages.json's data, checked (schema, ranges: at least 3 kept checkpoints at rising
    whole steps that the run kept (``kept``), each LLC consistent with its chains; the run it
    belongs to)."""
    data = checked(stages_schema(), data, facts, file, fix)
    missing = [c["step"] for c in data["checkpoints"] if kept and c["step"] not in kept]
    if missing:
        raise UserError(
            f"{file} reads checkpoints the run did not keep (step "
            f"{', '.join(map(str, missing[:5]))}): it is another run's, or the run was "
            f"retrained; {fix}"
        )
    return data


# ----------------------------------------------------------------------------- samples.json

SAMPLE = fields({"prompt": kind(str), "text": kind(str)})


def check_samples(data: Any, facts: RunFacts | None, file: Path, fix: str) -> list[dict[str, str]]:
    """A samples.json's samples ({"prompt", "text"} each), checked; the older layout (a bare
    list) is read too."""
    schema = fields({"samples": items(SAMPLE)}, {"run_digest": kind(str)})
    data = {"samples": data} if isinstance(data, list) else data
    return checked(schema, data, facts, file, fix)["samples"]
