"""Analysis: pure functions over a TransformerBridge and tensors (model and tensors in; tensors or
dataclasses out).

- :mod:`.heads`        the head vocabulary: HeadId, the score registry, roles, top head / partner
- :mod:`.batches`      repeated-random-token probes
- :mod:`.stripes`      the generic scorer (every registry score, one forward pass)
- :mod:`.nulls`        null models and τ
- :mod:`.scores`       discovery: τ and roles (:func:`discover_heads`); re-exports the scorer
- :mod:`.discovery`    discovery plus the heads and probe row an attention view needs
- :mod:`.patterns`     attention patterns of a model on one sequence
- :mod:`.circuits`     QK/OV FactoredMatrix circuits, copying scores, copy accuracy
- :mod:`.composition`  Q/K/V composition scores and their random baseline
- :mod:`.self_ranks`   exact top-k self-ranks of a factored V x V matrix (full-vocabulary copy accuracy)
- :mod:`.exam`         the repeated-pattern exam; the one rank (:func:`target_rank`, ties fail)
- :mod:`.exam_prompts` the period exams' prompts (two token kinds, random offsets)
- :mod:`.period_exam`  two-repeat exams at every period (:func:`exam_by_period`), measured chance
- :mod:`.exam_verdict` the exams' pass rule (Wilson lower bound) and verdict (McNemar vs chance)
- :mod:`.intervals`    Wilson and mean intervals, the exact McNemar test
- :mod:`.text_scores`  head scores on any text (each token's previous occurrence)
- :mod:`.text_induction` in-context score, repeated-passage loss, induction on held-out text
- :mod:`.routes`       verdicts from numbers: the route by path (typed rows); the Thresholds
- :mod:`.induction`    which heads are "the induction heads" (study, report, stop rule)
- :mod:`.causal`       tasks, the route by path, edge attribution, faithfulness, circuits
- :mod:`.ablation`     per-head impact across positions, scores with heads ablated
- :mod:`.dynamics`     scores over training (metrics.jsonl, snapshots)
- :mod:`.run_analysis` everything a run report shows, as data (:func:`analyse_run`)

Submodules import torch and TransformerLens; import them directly (this package stays light).
"""
