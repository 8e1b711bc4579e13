"""Every option of head discovery in one frozen value, checked once when it is built.

:class:`DiscoveryOptions` travels whole: the ``heads`` command builds one at the boundary,
:func:`interp_toolkit.api.discover` builds one from its keywords (:func:`~.runtime.options.replaced`),
and :func:`~interp_toolkit.heads.discovery.discover` hands it unchanged to
:func:`~interp_toolkit.heads.discovery.discover_heads`. A bad value is one
:class:`~interp_toolkit.errors.UserError` line when the value is built (the rules and lines of
:mod:`interp_toolkit.runtime.validate` and
:func:`~interp_toolkit.stats.significance.check_alpha`), so no invalid one exists.

This module imports no torch, so ``--help`` reads its defaults (``DiscoveryOptions.n_seqs``...);
the checks that live beside torch (α, the induction score) are imported when one is built.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from interp_toolkit.errors import UserError
from interp_toolkit.runtime import validate
from interp_toolkit.runtime.options import option
from interp_toolkit.stats import thresholds

#: Repeated-token rows the discovery batch scores by default (``heads --n-seqs``).
N_SEQS = 64


@dataclass(frozen=True)
class DiscoveryOptions:
    """How discovery is run (every field has today's default; the fields with flags are the
    ``heads`` command's options, in this order, their help saying what each is). The others:
    the batch's rows are ``[BOS] prefix seg x n_repeats filler`` (``prefix_max``: None fits the
    context; ``token_range``: ``(low, high)`` ids, None: the codec's range); τ is at
    ``quantile`` of the null; ``batch_size``: rows per forward pass (None: default chunking).
    """

    alpha: float = option(
        thresholds.ALPHA,
        "--alpha",
        help="A score is significant when p <= alpha (or BH at FDR alpha).",
    )
    fdr: bool = option(
        False,
        "--fdr",
        help="Benjamini-Hochberg over heads x scores (false-discovery rate alpha).",
    )
    induction_score: str = option(
        "vw",
        "--induction-score",
        help="Which score decides the induction role: vw (the post's value-weighted) or plain.",
    )
    n_draws: int | None = option(
        None,
        "--n-draws",
        help="Sign-flip draws per test (default: enough that BH over every test can reject one).",
    )
    n_untrained: int | None = option(
        None,
        "--n-untrained",
        help="Also test each score against K untrained models of the same architecture (a "
        "second test, vs_untrained, that decides no role; off by default).",
    )
    untrained_rows: int | None = option(
        None,
        "--untrained-rows",
        help="Probe rows the untrained models run on (default all; GPT-2 16).",
    )
    n_seqs: int = option(N_SEQS, "--n-seqs", help="Repeated-token sequences to score on.")
    period: int | None = option(
        None, "--period", help="Repeat period (default: fits the context, at most 50)."
    )
    seed: int = option(0, "--seed", help="Seed of the random tokens.")
    quantile: float = thresholds.QUANTILE
    n_repeats: int = 2
    prefix_max: int | None = None
    token_range: tuple[int, int] | None = None
    batch_size: int | None = None

    def __post_init__(self) -> None:
        from interp_toolkit.heads.registry import deciders
        from interp_toolkit.stats.significance import check_alpha

        deciders(self.induction_score)
        check_alpha(self.alpha)
        self._set("n_seqs", validate.count(self.n_seqs, "n_seqs"))
        self._set("period", validate.count(self.period, "period", 2, optional=True))
        self._set("seed", validate.seed(self.seed))
        validate.flag(self.fdr, "fdr")
        self._set("n_repeats", validate.count(self.n_repeats, "n_repeats", 2))
        self._set("prefix_max", validate.count(self.prefix_max, "prefix_max", 0, optional=True))
        self._set("batch_size", validate.count(self.batch_size, "batch_size", optional=True))
        for name in ("n_untrained", "untrained_rows", "n_draws"):
            self._set(name, validate.count(getattr(self, name), name, optional=True))
        validate.number(self.quantile, "quantile", above=0, below=1)
        self._set("token_range", _token_range(self.token_range))

    def _set(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)  # the checked value (an int, not a numpy int)


def _token_range(value: Any) -> tuple[int, int] | None:
    """None, or ``(low, high)``: whole numbers with ``0 <= low`` and at least 2 ids between."""
    if value is None:
        return None
    pair = tuple(value) if isinstance(value, (tuple, list)) else ()
    ok = len(pair) == 2 and all(validate.is_whole(x) for x in pair)
    if not ok or int(pair[0]) < 0 or int(pair[1]) - int(pair[0]) < 2:
        raise UserError(
            f"token_range={value!r} cannot work: give (low, high) ids with 0 <= low and "
            "high - low >= 2, or None for the codec's range."
        )
    return int(pair[0]), int(pair[1])
