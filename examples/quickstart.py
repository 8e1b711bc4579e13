# %% [markdown]
# # interp-toolkit for TransformerLens users: a quickstart
#
# The models here are TransformerLens 4 `TransformerBridge`s with their tokenizer attached, so
# what you do with TL's pretrained models works on them: `to_tokens`, `run_with_cache`,
# `model.OV[layer, head]`, `generate`. interp-toolkit adds head scores on your own prompts, a
# null-model threshold for "is this an induction head?", attention views and GPT-2 discovery.
#
# Everything runs offline. The run is trained here (a tiny, seconds-long recipe unless
# `INTERP_TOOLKIT_RUN` names a trained run folder, e.g. one from
# `interp-toolkit train --out runs/cpu-2l`); GPT-2 discovery runs on a GPT-2-*shaped* model with
# random weights saved locally, as the test suite does (no GPT-2 weights are downloaded: pass
# `"gpt2"` to `load` instead when they are in your Hugging Face cache). It is the script twin of
# `quickstart.ipynb`.

# %%
import os
import tempfile
from pathlib import Path

import torch

from interp_toolkit import discover, load, scores_on, train, view

torch.set_num_threads(2)
work = Path(tempfile.mkdtemp(prefix="interp-quickstart-"))

# %% [markdown]
# ## 1. Load a run (or train one; re-running this cell loads it instead of failing)

# %%
RUN = os.environ.get("INTERP_TOOLKIT_RUN")
if RUN is None:
    RUN = work / "tiny-2l"
    train(RUN, layers=2, exist_ok="load", steps=30, d_model=32, d_head=8, quiet=True)
run = load(RUN)
model = run.model
print(run.name, model.cfg.n_layers, "layers x", model.cfg.n_heads, "heads")
print(model.to_str_tokens(" A B C D A B C D"))

# %% [markdown]
# ## 2. `run_with_cache`, as in TransformerLens

# %%
logits, cache = model.run_with_cache(" A B C D A B C D")
print(logits.shape, cache["blocks.1.attn.hook_pattern"].shape)

# %% [markdown]
# ## 3. A head's OV circuit as a `FactoredMatrix`
# `model.OV[layer, head]` is `W_V W_O` ([d_model, d_model], rank ≤ d_head); the full OV circuit
# `W_E W_V W_O W_U` stays factored too.

# %%
ov = model.OV[1, 0]
full = model.W_E @ ov @ model.W_U
print(type(ov).__name__, tuple(ov.shape), "full OV", tuple(full.shape), "inner dim", full.mdim)

# %% [markdown]
# ## 4. Head scores on your own prompt
# The prompt repeats with period 4, found from the tokens; `.induction` is mean attention from
# each token of the second copy to the token after its first occurrence (definitions:
# `interp_toolkit.heads.registry.SCORES`). Text, a list of ids, numpy or a tensor all work.

# %%
scores = scores_on(model, " A B C D A B C D")
print("induction [layer, head]:\n", scores.induction)
print("previous-token [layer, head]:\n", scores.previous_token)

# %% [markdown]
# ## 5. An attention view (every layer in one object; circuitsvis, works offline)

# %%
view(model, " A B C D A B C D")

# %% [markdown]
# ## 6. GPT-2 discovery (offline: a GPT-2-shaped model with random weights)
# Random weights have no induction heads, so expect no roles: the point is the code path, which
# is the one real GPT-2 takes.

# %%
from transformers import GPT2Config, GPT2LMHeadModel  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

from interp_toolkit.runs.hf import save_gpt2_tokenizer  # noqa: E402

hf_logging.disable_progress_bar()
folder = work / "gpt2-shaped"
config = GPT2Config(n_layer=2, n_head=4, n_embd=64, n_positions=64, vocab_size=50257)
GPT2LMHeadModel(config).save_pretrained(folder)
save_gpt2_tokenizer(folder)
gpt2 = load(folder)
found = discover(gpt2, n_seqs=8, n_untrained=2, untrained_rows=8)
print(gpt2.kind, "roles:", found.report.to_dict()["roles"])
