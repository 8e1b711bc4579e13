# %% [markdown]
# # Induction heads, end to end, with interp-toolkit
#
# This walkthrough trains a 1-layer and a 2-layer attention-only transformer with the CPU recipe,
# gives both the seed's exam, finds their previous-token and induction heads (each head's score
# tested against its own null model), reads a head's circuits, checks the circuit causally, and draws attention views.
# It is the script twin of `walkthrough.ipynb`; both run top to bottom.
#
# Set `INTERP_TOOLKIT_TINY=1` for a seconds-long version (what the test suite runs): the models are
# then too small and too briefly trained to show the finding. Set `INTERP_TOOLKIT_WORK=DIR` to keep
# the runs in DIR: training then happens once, and re-running the notebook loads them.

# %%
import os
import tempfile
from pathlib import Path

import torch

from interp_toolkit import train
from interp_toolkit.causal.ablation import induction_after_ablation
from interp_toolkit.exams.single import BUILTIN_EXAMS, run_exam
from interp_toolkit.heads.discovery import discover_heads
from interp_toolkit.heads.options import DiscoveryOptions
from interp_toolkit.heads.registry import partner_of, top_head
from interp_toolkit.heads.repeats import default_layout, default_token_range, repeated_tokens
from interp_toolkit.reports.attention import attention_view
from interp_toolkit.views import plots
from interp_toolkit.weights.circuits import copying_scores, head_circuit

TINY = os.environ.get("INTERP_TOOLKIT_TINY") == "1"
torch.set_num_threads(2)
work = Path(os.environ.get("INTERP_TOOLKIT_WORK") or tempfile.mkdtemp(prefix="interp-walkthrough-"))

# %% [markdown]
# ## 1. Train one and two layers, identically
# The `cpu` preset: GPT-2 BPE compacted to the 1,023 most frequent tokens of the Python standard
# library (+ `<unk>`), context 32, 90% of each batch made of windows where a random span of 2-16
# tokens repeats. Seed 0 and 700 steps, the test suite's trained runs (past the phase change at
# ~350 steps; which layer-0 heads the induction heads read from varies by seed and depth: README,
# "What the study shows" and "Seed robustness").
# `exist_ok="load"` loads a run already in the folder instead of failing.

# %%
recipe = dict(steps=700, seed=0, score_every=25)
if TINY:
    recipe = dict(steps=20, d_model=32, d_head=8, score_every=10, log_every=5)
runs = {}
for n_layers in (1, 2):
    run = train(work / f"cpu-{n_layers}l", layers=n_layers, exist_ok="load", quiet=TINY, **recipe)
    runs[n_layers] = run
    last = run.metrics()[-1]
    print(f"{n_layers} layer(s): {last['step']} steps, final loss {last['loss']:.3f}")

# %%
plots.loss_curve(runs[2].metrics(), title="2 layers: loss and induction score while training")

# %% [markdown]
# ## 2. The exam
# `A B C X D E F A B C X D E F A B C X D E` → ` F`. One layer cannot compose match-then-shift; two can.

# %%
for n_layers, run in runs.items():
    for exam in BUILTIN_EXAMS:
        r = run_exam(run.model, run.codec, exam.prompt, exam.target)
        print(f"{n_layers}L {exam.name}: target rank {r.rank}, p = {r.prob:.3f}")

# %%
exam_2l = run_exam(runs[2].model, runs[2].codec, BUILTIN_EXAMS[0].prompt, BUILTIN_EXAMS[0].target)
plots.exam_topk(exam_2l)

# %% [markdown]
# ## 3. Which heads are previous-token and induction heads?
# Scores on repeated random tokens (random prefix, so the repeat offset varies). Each (head,
# score) is tested against its own null model (untrained models of the same architecture; for the
# repeat scores, the head's own score without repeats too): a role needs p <= 0.05 and the
# effect-size floor 0.4. The seed's value-weighted induction score decides the induction role.

# %%
reports = {
    n: discover_heads(run.model, run.codec, DiscoveryOptions(n_seqs=32)) for n, run in runs.items()
}
for n, rep in reports.items():
    print(f"{n}L  roles={rep.to_dict()['roles']}")

# %%
rep2 = reports[2]
plots.head_score_heatmap(
    rep2.scores.induction_vw,
    kind="induction_vw",
    passes=rep2.passes("induction_vw"),
    floor=rep2.floors["induction_vw"],
    tau=rep2.tests.tau["induction_vw"],
    p_value=rep2.tests.p_value["induction_vw"],
    test=rep2.significance(),
)

# %% [markdown]
# ## 4. Circuits of the best induction head
# OV and QK circuits stay factored (`FactoredMatrix`); the copying score is Σλ/Σ|λ| of the OV circuit.

# %%
best = top_head(rep2.scores.induction_vw, layers=range(1, 2))  # the strongest layer-1 head
layer, head = best
circ = head_circuit(
    runs[2].model, runs[2].codec, layer, head, token_ids=runs[2].codec.encode(" F"), k=5
)
print(circ.to_dict())
print("copying scores per head:\n", copying_scores(runs[2].model))

# %% [markdown]
# ## 5. The causal check: ablate the previous-token partner

# %%
partner = partner_of(rep2.scores.previous_token, best)  # strongest previous-token score before it
low, high = default_token_range(runs[2].codec)
period, prefix = default_layout(runs[2].model_cfg.n_ctx)
batch = repeated_tokens(
    32, period, low=low, high=high, bos_id=runs[2].codec.bos_id, prefix_max=prefix, seed=1
)
after = induction_after_ablation(runs[2].model, batch, [partner], mode="mean")
print(
    f"value-weighted induction score of {best}: {float(rep2.scores.induction_vw[best]):.3f} -> "
    f"{float(after.induction_vw[best]):.3f} after ablating {partner}"
)

# %% [markdown]
# ## 6. Attention view (circuitsvis, works offline)

# %%
attention_view(runs[2].model, BUILTIN_EXAMS[0].prompt, codec=runs[2].codec, layer=layer)
