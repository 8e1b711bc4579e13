"""Analysis: pure functions over a TransformerBridge and tensors.

- :mod:`.batches`  repeated-random-token probes
- :mod:`.scores`   per-head scores, null-model τ, roles (:func:`discover_heads`)
- :mod:`.circuits` QK/OV FactoredMatrix circuits, copying scores, composition scores
- :mod:`.self_ranks` exact top-k self-ranks of a factored V x V matrix (full-vocabulary copy accuracy)
- :mod:`.exam`     the repeated-pattern exam
- :mod:`.ablation` per-head impact across positions, causal checks

Submodules import torch and TransformerLens; import them directly (this package stays light).
"""
