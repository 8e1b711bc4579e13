"""Causal analysis on TransformerLens 4.3's tools: tasks, the route by path, circuit discovery.

- :mod:`.tasks`: a task is clean prompts, corrupt prompts and a metric (``induction``,
  ``previous-token``, ``ioi``, ``docstring``, or your own).
- :mod:`.fork`: TL's per-head Q/K/V input fork on native models (the one workaround they need).
- :mod:`.graph`: writers, readers and edges; one forward that records writers and edits readers.
- :mod:`.paths`: the route by path of every induction head (TL's ``get_act_patch_direct_path``).
- :mod:`.attribution`: EAP / EAP-IG edge scores and exact faithfulness.
- :mod:`.circuit`: rank, faithfulness curve, the smallest circuit recovering 80%, pruning.
- :mod:`.compare`: where two rankings disagree.

:func:`induction_route` is what the run report and the study call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from interp_toolkit.errors import UserError
from interp_toolkit.text.codecs import Codec

if TYPE_CHECKING:  # imported where used: causal.options (--help) imports no torch
    from transformer_lens import TransformerBridge

    from interp_toolkit.causal.routes import ModelRoute
    from interp_toolkit.causal.tasks import Task
    from interp_toolkit.heads.discovery import HeadReport

#: Prompts of the induction task the route and the study's circuits are measured on.
ROUTE_PROMPTS = 64


def study_task(model: TransformerBridge, codec: Codec, *, seed: int = 0) -> Task:
    """The induction task every study measurement reads (seed ``seed + 11``, as the causal
    probes have always used)."""
    from interp_toolkit.causal.tasks import induction_task
    from interp_toolkit.runtime.seeds import derive

    return induction_task(
        codec, int(model.cfg.n_ctx), n_prompts=ROUTE_PROMPTS, seed=derive(seed, "study_task")
    )


def induction_route(
    model: TransformerBridge, codec: Codec, report: HeadReport, *, seed: int = 0
) -> ModelRoute:
    """The route by path of the model's induction heads (:func:`~.induction.induction_heads`;
    the strongest candidate when no head has the role) on :func:`study_task`."""
    from interp_toolkit.causal.paths import route_by_path
    from interp_toolkit.causal.routes import ModelRoute
    from interp_toolkit.heads.induction import induction_heads, strongest_induction_head

    heads = induction_heads(report) or [
        strongest_induction_head(report.scores.get(report.decides["induction"]))
    ]
    try:
        task = study_task(model, codec, seed=seed)
    except UserError as exc:  # e.g. a vocabulary too small for fresh corrupt tokens
        return ModelRoute.unmeasured("induction", str(exc))
    return route_by_path(model, task, heads, report.roles, seed=seed)
