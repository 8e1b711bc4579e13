"""The route by path and the discovered circuits, as page sections and sentences (data in, HTML
out): the study page and the run report show :func:`route_section`; the study page
:func:`circuit_section`; ``interp-toolkit circuit --out`` writes :func:`circuit_page`."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from interp_toolkit.causal.circuit import Circuit
from interp_toolkit.causal.routes import INPUTS, ModelRoute, RouteName
from interp_toolkit.causal.summary import CircuitSummary
from interp_toolkit.reports.findings import INPUT_WORD, OVER_ONE, over_one, route_phrase, share
from interp_toolkit.stats.thresholds import THRESHOLDS, Thresholds
from interp_toolkit.views.circuit import circuit_figure, drawn_note, faithfulness_curve
from interp_toolkit.views.page import FOLD_AT, Row, Section, fold, render_report, table, text


def route_rule(t: Thresholds = THRESHOLDS) -> str:
    return (
        "For every induction head, each input (query, key, value) is resampled from the corrupt "
        "prompts of the induction task (the same random tokens with the first repeat replaced), "
        "first from every earlier head at once, then from one head at a time (TransformerLens's "
        "direct path patching). The head's effect is the share of the clean-corrupt gap of the "
        "task's metric (the repeated token's logit minus the mean logit) that resampling its "
        "output removes; an input's (a path's) effect is the share of the head's effect it "
        "removes, with a 95% bootstrap interval over prompts. An input carries the induction "
        f"when its share is ≥ "
        f"{t.carries:g} and its interval lies above the control's (the role-less earlier head "
        "that composes most with the head by weights). The route is K-, Q- or V-composition when "
        "one input carries it, mixed when two do, not found when none does, no effect when the "
        "head's own effect's interval reaches 0 (then no share is printed: a share of a total "
        "near 0 is noise, and the table says no effect to route). A share above 1 (the path's "
        "effect exceeds the head's own total) is printed with that note; a model whose gap is "
        f"below {t.min_gap:g} has no induction to route. Composition scores are ‖W_A W_B‖_F / "
        "(‖W_A‖_F ‖W_B‖_F) of the path's kind, beside the mean for random matrices."
    )


#: What the input columns say for a head whose own effect's interval reaches 0.
NO_EFFECT_TO_ROUTE = "no effect to route"


def route_rows(run: str, route: ModelRoute) -> list[list[object]]:
    rows: list[list[object]] = []
    for h in route.heads:
        if h.name == RouteName.NO_EARLIER:
            rows.append([run, str(h.head), "—", "—", "—", "—", h.name.value, "—", "—", "—"])
            continue
        if h.name == RouteName.NO_EFFECT:  # shares of a ~0 effect are noise: none is printed
            none = [NO_EFFECT_TO_ROUTE] * len(INPUTS)
            rows.append([run, str(h.head), str(h.effect), *none, h.name.value, "—", "—", "—"])
            continue
        best = max(h.paths, key=lambda p: p.removed.value)
        ctl = h.control_effects()
        worst = None if ctl is None else max(ctl.values(), key=lambda e: e.high)
        rows.append(
            [
                run,
                str(h.head),
                str(h.effect),
                *[share(h.inputs[c]) for c in INPUTS],
                h.name.value,
                "—" if h.feeder is None else str(h.feeder),
                f"{best.source} -> {h.head} ({INPUT_WORD[best.input]}) removes "
                f"{share(best.removed)}; comp {best.composition:.3f} "
                f"(random {route.composition_baseline or 0:.3f})",
                "—"
                if worst is None
                else f"{h.control} removes ≤ {worst.high:.2f}{over_one(worst)}",
            ]
        )
    return rows


def route_section(routes: Sequence[tuple[str, ModelRoute]], t: Thresholds = THRESHOLDS) -> Section:
    """The route by path of every run's induction heads: sentences, then one table."""
    lines = [f"{run}: {route_phrase(r, t)}." for run, r in routes]
    header = ["run", "induction head", "its effect", "query", "key", "value", "route", "feeder"]
    header += ["strongest path", "control (max upper bound)"]
    rows = [row for run, r in routes for row in route_rows(run, r)]
    gaps = "; ".join(
        f"{run}: clean {r.clean:.2f}, corrupt {r.corrupt:.2f}, gap {r.gap}"
        for run, r in routes
        if r.n_prompts
    )
    return Section(
        "Route by path",
        [
            text(route_rule(t), "p", "note"),
            "".join(text(x, "p", "finding") for x in lines),
            table(header, rows),
            text(OVER_ONE, "p", "note") if any("*" in str(c) for r in rows for c in r) else "",
            text(f"Induction task metric ({routes[0][1].n_prompts} prompts): {gaps}.", "p", "note")
            if gaps
            else "",
        ],
    )


def heldout_clause(circuit: Circuit) -> str:
    """The circuit's faithfulness on the held-out prompts, with its interval ("" when none was
    measured): the number that was not chosen on the prompts it is scored on."""
    h = circuit.heldout
    if h is None:
        return ""
    return (
        f"; on {circuit.heldout_prompts} held-out prompts (the task drawn again) it recovers "
        f"{h.value:.0%} [{h.low:.0%}, {h.high:.0%}]"
    )


def circuit_sentence(c: CircuitSummary, t: Thresholds = THRESHOLDS) -> str:
    """What was discovered, how faithful it is, and whether the route's edges are in it."""
    ig = c.circuit
    if not ig.edges:
        return f"{c.run}: no circuit: {ig.reason}."
    s = (
        f"{c.run}: {ig.method} finds a circuit of {len(ig.edges)} of {ig.total_edges} edges that "
        f"recovers {ig.faithfulness:.0%} of the induction gap alone (top {ig.top_k} by score "
        f"reach ≥ {t.recovers:.0%}{', then pruned' if ig.pruned else ''})"
    )
    s += heldout_clause(ig)
    if c.route_edges:
        inside, dropped, missing = route_edge_lists(c)
        if inside:
            s += f"; it holds the route's {_edges(inside)}"
        if dropped:
            one = len(dropped) == 1
            s += f"; {_edges(dropped, bare=True)} belong{'s' if one else ''} to heads pruned whole"
        if missing:
            s += f"; it keeps the head but lacks the route's {_edges(missing)}"
    eap = c.eap
    d = c.disagreement
    if d is None:
        return s + "."
    eap_part = (
        f"plain EAP's ranking needs its top {eap.top_k} edges to recover {t.recovers:.0%}"
        if eap.top_k
        else "plain EAP's ranking reaches no circuit"
    )
    return s + (
        f". {eap_part}; the two rankings' rank correlation is {d.spearman:.2f}, and "
        f"{len(d.only_second)} of {ig.method}'s top {d.k} edges are outside EAP's top {d.k}."
    )


def route_edge_lists(c: CircuitSummary) -> tuple[list[str], list[str], list[str]]:
    """The route's edges the circuit holds, those of heads pruned whole, and those it lacks
    though it keeps the head."""
    inside = [e for e, ok, _ in c.route_edges if ok]
    dropped = [e for e, ok, head in c.route_edges if not ok and not head]
    missing = [e for e, ok, head in c.route_edges if not ok and head]
    return inside, dropped, missing


def _edges(edges: Sequence[str], *, bare: bool = False) -> str:
    """Edges in a sentence: named when few (:data:`~interp_toolkit.views.page.FOLD_AT`),
    counted when many (the page folds the full list under the sentence)."""
    if len(edges) > FOLD_AT:
        return f"{len(edges)} edges"
    word = "" if bare else f"edge{'s' if len(edges) > 1 else ''} "
    return word + ", ".join(edges)


#: The most edges a circuit graph draws (the largest by |score|; the rest are counted under it).
MAX_DRAWN = 20


def _figure(c: Circuit, n_layers: int, n_heads: int, title: str) -> go.Figure:
    """The circuit's graph, its :data:`MAX_DRAWN` largest edges drawn."""
    edges = [e.to_dict() for e in c.edges]
    return circuit_figure(
        edges, n_layers=n_layers, n_heads=n_heads, title=title, max_edges=MAX_DRAWN
    )


def _finding(c: CircuitSummary, t: Thresholds) -> str:
    """A circuit's sentence, and under it the route's edge lists it only counts, folded."""
    out = text(circuit_sentence(c, t), "p", "finding")
    nouns = ("in the circuit", "of heads pruned whole", "lacked")
    for noun, edges in zip(nouns, route_edge_lists(c), strict=True):
        if len(edges) > FOLD_AT:
            out += f'<div class="note">{fold(edges, f"route edges {noun}")}</div>'
    return out


def circuit_section(summaries: Sequence[CircuitSummary], t: Thresholds = THRESHOLDS) -> Section:
    """Each depth's circuit (a graph), the faithfulness curves of EAP and EAP-IG, and where the
    two rankings disagree."""
    items: list[object] = ["".join(_finding(c, t) for c in summaries)]
    figs, caps, capped = [], [], []
    for c in summaries:
        if c.circuit.edges:
            figs.append(_figure(c.circuit, c.n_layers, c.n_heads, c.run))
            caps.append(f"{c.run}: faithfulness {c.circuit.faithfulness:.0%}")
            n = len(c.circuit.edges)
            if n > MAX_DRAWN:
                capped.append(f"{c.run}: {drawn_note(MAX_DRAWN, n)}")
    if figs:
        items.append(Row(figs, caps))
    if capped:
        items.append(
            text(f"Each graph draws at most {MAX_DRAWN} edges. {'; '.join(capped)}.", "p", "note")
        )
    curves = [
        faithfulness_curve(
            {c.circuit.method: c.circuit.curve, "EAP": c.eap.curve}, target=t.recovers, title=c.run
        )
        for c in summaries
        if c.circuit.curve
    ]
    if curves:
        items.append(Row(curves, [c.run for c in summaries if c.circuit.curve]))
    rows = [
        [
            c.run,
            c.disagreement.k,
            f"{c.disagreement.spearman:.2f}",
            fold([f"{e} (EAP rank {r})" for e, r in c.disagreement.only_second], "edges"),
            fold([f"{e} (IG rank {r})" for e, r in c.disagreement.only_first], "edges"),
        ]
        for c in summaries
        if c.disagreement is not None
    ]
    header = ["run", "top k", "rank corr.", "in EAP-IG's top k only", "in EAP's top k only"]
    items.append(table(header, rows, raw=(3, 4)))
    return Section(
        "Discovered circuits",
        items,  # type: ignore[arg-type]
        intro="Every edge (embedding, each head's query/key/value input, the logits) is ranked by "
        "edge attribution on the induction task, with integrated gradients (EAP-IG) and without "
        "(EAP); the top-k edges alone are run, every other edge fed its corrupt value, and the "
        f"smallest k recovering ≥ {t.recovers:.0%} of the gap is pruned edge by edge (exactly) "
        "to the circuit drawn. Edge colour: the input it enters; width: |score|.",
    )


def circuit_page(
    circuit: Circuit, *, target: str, n_layers: int, n_heads: int, t: Thresholds = THRESHOLDS
) -> str:
    """The standalone page of ``interp-toolkit circuit --out``."""
    items: list[object] = []
    if circuit.edges:
        items.append(_figure(circuit, n_layers, n_heads, target))
        summary = (
            f"{circuit.method}: {len(circuit.edges)} of {circuit.total_edges} edges recover "
            f"{circuit.faithfulness:.0%} of the gap (clean {circuit.clean:.3f}, corrupt "
            f"{circuit.corrupt:.3f}){heldout_clause(circuit)}."
        )
    else:
        summary = f"No circuit: {circuit.reason}."
    items.insert(0, text(summary, "p", "finding"))
    if circuit.curve:
        items.append(faithfulness_curve({circuit.method: circuit.curve}, target=t.recovers))
    rows = [
        [e.edge.source.label, e.edge.target.label, e.edge.input, f"{e.score:.4g}"]
        for e in circuit.ranked[:30]
    ]
    items.append(table(["source", "target", "input", "score"], rows))
    return render_report(
        [Section(f"Circuit for the {circuit.task} task", items)],  # type: ignore[arg-type]
        title=f"Circuit: {target}",
        subtitle=f"{circuit.method}, {circuit.n_prompts} prompt pairs",
    )
