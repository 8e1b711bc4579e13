"""The batches the LLC reads: the run's own training stream, rebuilt from its config.json.

A run's training data is a deterministic function of its recorded settings (corpus, codec,
repeat fraction, spans, seed: :class:`~interp_toolkit.text.stream.TrainStream`), so the LLC of
every checkpoint reads the same rows: the batches of the run's first ``n_batches`` training steps
(the first ``rows`` rows of each), the distribution its loss was minimised on. The stream is
built as ``training/trainer.py`` builds it (the same arguments, kept in step by
``tests/unit/development/test_stages.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from jaxtyping import Float, Int

from interp_toolkit.files.serialize import Jsonable, json_field
from interp_toolkit.runs.folder import Run, read_config
from interp_toolkit.text.stream import tokenize_corpus, windows
from interp_toolkit.training.sdpa import fused_attention
from interp_toolkit.training.settings import recorded_configs
from interp_toolkit.training.trainer import check_corpus, stream_for


def _counts(batches: list[Int[torch.Tensor, "row pos"]]) -> dict[str, int]:
    return {"n_batches": len(batches), "rows": int(batches[0].shape[0])}


@dataclass
class LLCBatches(Jsonable):
    """``batches``: [rows, n_ctx + 1] token windows; ``source``: how they were drawn, in words."""

    batches: list[Int[torch.Tensor, "row pos"]] = field(
        metadata=json_field(encode=_counts, inline=True)
    )
    source: str


def llc_batches(run: Run, n_batches: int = 8, rows: int | None = None) -> LLCBatches:
    """The first ``n_batches`` training batches of ``run`` (``rows`` rows each; default the
    run's batch size), from its training stream at step 0 (``training/trainer.py: stream_for``,
    the trainer's own builder, over the recorded corpus, checked to be the corpus it trained
    on)."""
    model_cfg, data_cfg, train_cfg = recorded_configs(read_config(run.path), run.paths.config)
    model_cfg = model_cfg.replace(d_vocab=run.codec.d_vocab)
    corpus = tokenize_corpus(
        data_cfg.corpus, data_cfg.val_fraction, data_cfg.max_tokens, False, store=data_cfg.store
    )
    check_corpus(run.paths, corpus.digest(), data_cfg.corpus)
    train_windows = windows(corpus.train_ids, run.codec, model_cfg.n_ctx + 1)
    stream = stream_for(train_windows, run.codec, model_cfg, data_cfg, train_cfg, 0)
    size = train_cfg.batch_size
    rows = min(rows or size, size)
    picked = range(0, size, size // rows)[:rows]  # spread over the batch: its mix is kept
    batches = [stream.batch(step, picked) for step in range(n_batches)]
    n_repeat = sum(r < stream.n_repeat for r in picked)
    source = (
        f"the run's own training stream: {rows} of the {size} rows (every {size // rows}) of "
        f"the batches of steps 0-{n_batches - 1}: {n_repeat} of {rows} rows repeated-span "
        f"windows, the rest text windows of corpus {data_cfg.corpus!r}; seed {train_cfg.seed}"
    )
    return LLCBatches(batches=batches, source=source)


def next_token_loss(
    model: torch.nn.Module, tokens: Int[torch.Tensor, "row pos"]
) -> Float[torch.Tensor, "row pred"]:
    """The training loss (``training/loop.py: NextTokenLoss``) at every position, unreduced (the
    LLC's ``LossFn``): the model reads ``tokens[:, :-1]`` (SDPA attention, as a training step:
    :func:`~interp_toolkit.training.sdpa.fused_attention`) and every position is scored on the
    next token by cross-entropy; its mean is the training loss."""
    device = next(model.parameters()).device
    tokens = tokens.to(device)
    with fused_attention(model):  # no hook reads a pattern here
        logits = model(tokens[:, :-1])
    return torch.nn.functional.cross_entropy(
        logits.transpose(1, 2), tokens[:, 1:], reduction="none"
    )
