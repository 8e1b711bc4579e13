"""The notebook API: a few calls that read like prose, over the packages that do the work.

::

    from interp_toolkit import load, scores_on, view

    run = load("runs/cpu-2l")              # a run folder, a hub id or a save_pretrained folder
    m = run.model                          # a TransformerBridge: to_tokens, run_with_cache, ...
    scores_on(m, "A B C D A B C D").induction   # [layer, head] scores on your own prompt
    view(m, "A B C D A B C D")             # every layer's attention, drawn inline

Every function that takes a model also takes what :func:`load` or :func:`train` returned. Text
goes through the model's own tokenizer (BOS first); token ids (a list, a numpy array or a
tensor) are read as given. Bad input raises :class:`~interp_toolkit.errors.UserError`.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from jaxtyping import Int
from transformer_lens import TransformerBridge

from interp_toolkit.errors import FewQueriesWarning, UnknownTokensWarning, UserError
from interp_toolkit.exams.single import ExamResult, exams_for, run_exam
from interp_toolkit.heads.discovery import Discovery
from interp_toolkit.heads.options import DiscoveryOptions
from interp_toolkit.heads.patterns import HeadSpec
from interp_toolkit.heads.repeats import prompt_probe, whole_period
from interp_toolkit.heads.scorer import HeadScores, head_scores
from interp_toolkit.heads.text_scorer import text_head_scores
from interp_toolkit.runs.folder import Run, RunPaths, load_run, read_config
from interp_toolkit.runs.targets import Target, load_target
from interp_toolkit.runtime import validate
from interp_toolkit.runtime.options import replaced
from interp_toolkit.runtime.validate import path_arg, token_ids
from interp_toolkit.saes.options import SAEOptions
from interp_toolkit.stats.thresholds import UNKNOWN_NOTICE_SHARE
from interp_toolkit.text.codecs import Codec, unknown_notice
from interp_toolkit.text.tl_tokenizer import CodecTokenizer
from interp_toolkit.training.options import TrainOptions

if TYPE_CHECKING:  # circuitsvis (~0.5 s to import) only when a view is drawn
    from interp_toolkit.views.attention import LayerViews

__all__ = ["discover", "exam", "load", "sae", "scores_on", "train", "view"]

#: A model, or what :func:`load` / :func:`train` returned (anything with ``.model`` and ``.codec``).
ModelLike = TransformerBridge | Target | Run
#: A prompt: text, or token ids as a list, a numpy array or a tensor (``[pos]`` or ``[batch, pos]``).
Prompt = str | Sequence[int] | Sequence[Sequence[int]] | np.ndarray | torch.Tensor
#: A folder (or a file): its path as text or a path.
PathLike = str | os.PathLike[str]


def load(target: PathLike, device: str = "auto", dtype: str = "fp32") -> Target:
    """Load a run folder, or a Hugging Face causal LM of any architecture TransformerLens boots:
    a hub id (``"EleutherAI/pythia-70m"``, ``"gpt2"``; read from the local cache) or a
    ``save_pretrained`` folder. The result has ``.model`` (a ``TransformerBridge`` with its
    tokenizer, so ``to_tokens``/``generate`` work), ``.codec``, ``.name``, ``.kind``
    (``toy``/``hf``) and ``.source`` (the :class:`~interp_toolkit.runs.folder.Run` of a toy
    model). ``device`` as the CLI's ``--device`` (default ``auto``: a CUDA GPU, else an Apple GPU,
    else the CPU); ``dtype`` as its ``--dtype`` (``fp32`` or ``bf16``)."""
    path_arg(target, "target")  # None, a number or '' (the current folder): one line
    if dtype not in ("fp32", "bf16"):
        raise UserError(f"dtype={dtype!r} is not offered: use 'fp32' or 'bf16'.")
    return load_target(target, device, dtype=dtype)


def train(
    out: PathLike,
    options: TrainOptions | None = None,
    *,
    exist_ok: str = "error",
    device: str = "auto",
    **changes: Any,
) -> Run:
    """Train a model into the run folder ``out``; returns the trained run. ``options``: the
    ``train`` command's (:class:`~interp_toolkit.training.options.TrainOptions`), or its fields
    as keywords (``layers=``, ``preset=``, ``steps=``, ``seed=``, ``quiet=``...; replacing those
    of ``options``); any other keyword sets that field of the recipe's model, data or training
    settings (``d_head=``, ``batch_size=``, ``threads=``...). Without ``steps=`` (or
    ``all_steps``) a 2+-layer model stops as a study's does, once its induction score has stayed
    above the floor for the preset's ``after_induction`` steps.
    When ``out`` already holds a run, ``exist_ok`` says what to do: ``"load"`` returns its
    trained model (training on from its checkpoint if it was interrupted), so re-running a
    notebook cell loads instead of failing; ``"resume"`` continues it to ``steps``; ``"error"``
    refuses. Both refuse a run whose recorded settings differ from the ones asked for (but
    ``"resume"`` may change ``steps``). ``device`` as the CLI's ``--device`` (default ``auto``).
    """
    from interp_toolkit.training.presets import induction_outcome
    from interp_toolkit.training.settings import config_differences, recorded_configs

    out = path_arg(out, "out")
    if exist_ok not in ("load", "resume", "error"):
        raise UserError(f"exist_ok={exist_ok!r} is not one of 'load', 'resume', 'error'.")
    if "progress" in changes:  # the API's own keyword before it took TrainOptions
        raise UserError("train has no setting 'progress': it is quiet=True (for progress=False).")
    named = {k: changes.pop(k) for k in changes.keys() & TrainOptions.__dataclass_fields__}
    o = replaced(TrainOptions, options, "train", **named)
    paths = RunPaths(Path(out))
    p = o.recipe(paths.root, **changes)  # as `train` assembles it
    held = exist_ok != "error" and paths.config.is_file()
    if held and exist_ok == "load" and paths.weights.is_file():
        recorded = recorded_configs(read_config(paths.root), paths.config)
        diffs = config_differences(recorded, (p.model, p.data, p.train))
        if diffs:
            raise UserError(
                f"{paths.root} holds a run trained with other settings: {'; '.join(diffs)}. "
                "Pass the run's settings, exist_ok='resume' to train it on to more steps, or "
                "choose another folder."
            )
        return load_run(paths.root, device=device)
    result = o.train(paths.root, p, device, resume=held)
    outcome = induction_outcome(p, result.metrics, result.steps_done)
    if outcome is not None:
        warnings.warn(outcome, UserWarning, stacklevel=2)
    return result.run


def _parts(model: ModelLike) -> tuple[TransformerBridge, Codec]:
    """The bridge and its codec, from a model or what :func:`load`/:func:`train` returned;
    its weights checked (on a device, finite: a NaN set in memory gives NaN scores)."""
    bridge, codec = _bridge_and_codec(model)
    params = list(bridge.named_parameters())
    if any(p.device.type == "meta" for _, p in params):
        raise UserError(
            "the model's weights are on the meta device (shapes without values): load it with "
            "load(...), or move real weights in with load_state_dict."
        )
    validate.finite_weights(params, "the model", "load it again, or fix the weights you set.")
    return bridge, codec


def _bridge_and_codec(model: ModelLike) -> tuple[TransformerBridge, Codec]:
    if isinstance(model, (Target, Run)):
        return model.model, model.codec
    tok = getattr(model, "tokenizer", None) if isinstance(model, TransformerBridge) else None
    if isinstance(tok, CodecTokenizer):
        return model, tok.codec
    if tok is not None and len(tok) > 0 and isinstance(model, TransformerBridge):
        from interp_toolkit.runs.hf import codec_of

        return model, codec_of(model)
    bare = isinstance(model, TransformerBridge)
    what = "this model has" if bare else f"a {type(model).__name__} is not a model and has"
    raise UserError(
        f"{what} no interp-toolkit vocabulary: pass a model from load(...) or train(...)."
    )


def _as_tokens(model: TransformerBridge, prompt: Prompt) -> Int[torch.Tensor, "batch pos"]:
    """``[batch, pos]`` ids of a prompt: text through the model's tokenizer (BOS first), ids as
    given; checked against the vocabulary and the context (:mod:`interp_toolkit.runtime.validate`)."""
    if isinstance(prompt, str):
        if not prompt.strip():
            raise UserError("the prompt is empty: give some text or token ids.")
        validate.unicode(prompt, "prompt")
        prompt = model.to_tokens(prompt, truncate=False).cpu()  # too long: refused, not cut
    cfg = model.cfg
    # the CLI's own check and line ("prompt has N tokens but the model's context is ...")
    return token_ids(
        prompt, d_vocab=int(cfg.d_vocab), n_ctx=int(cfg.n_ctx), batch=True, name="prompt"
    )


#: A score averaged over fewer queries than this comes with a :class:`FewQueriesWarning`.
MIN_QUERIES = 10


def scores_on(model: ModelLike, prompt: Prompt, period: int | None = None) -> HeadScores:
    """Every registry score of every head (``.induction``, ``.previous_token``, ... each a
    ``[layer, head]`` tensor) on your own prompt, any text or ids (``[pos]`` or ``[batch, pos]``),
    like TransformerLens's ``detect_head``. ``.reading`` says which reading gave them and
    ``.queries`` how many tokens each score averaged; a score resting on fewer than
    :data:`MIN_QUERIES` comes with a :class:`~interp_toolkit.errors.FewQueriesWarning`.

    - ``"period"``: a prompt that is, as a whole, a span of 3 or more distinct tokens followed
      by itself (``"A B C D A B C D"``: period 4; :func:`~.heads.repeats.whole_period`), or any
      prompt with ``period`` given, is read with the period rule, the scorer discovery uses.
    - ``"text"``: any other text (a run of one token, ``"    "``, is no span) is read at each
      token's earlier occurrence whose context matches furthest back
      (:mod:`interp_toolkit.heads.text_scorer`): the induction stripe is attention to the
      position right after it, duplicate-token to it, previous-token to ``q - 1``. A score with
      no token to read (e.g. induction on text in which no token occurs twice) is NaN.

    Definitions: :data:`interp_toolkit.heads.registry.SCORES`.
    """
    bridge, codec = _parts(model)
    period = validate.count(period, "period", 2, optional=True)  # a span repeats: 2 or more
    tokens = _as_tokens(bridge, prompt)
    _warn_unknown(codec, tokens)
    unk = codec.unk_id
    period = period or whole_period(tokens, bos_id=codec.bos_id, unk_id=unk)
    if period is not None:
        probe = prompt_probe(tokens, bos_id=codec.bos_id, period=period, unk_id=unk)
        scores = head_scores(bridge, probe)
    else:
        has_bos = codec.bos_id is not None and bool((tokens[:, 0] == codec.bos_id).all())
        scores = text_head_scores(bridge, tokens, has_bos=has_bos, unk_id=unk)
    few = {k: n for k, n in scores.queries.items() if n < MIN_QUERIES}
    if few:
        counts = ", ".join(f"{k} {n}" for k, n in few.items())
        warnings.warn(
            f"{len(few)} score(s) rest on fewer than {MIN_QUERIES} tokens ({counts}; the "
            f"{scores.reading} reading): give a longer prompt, or more rows, to trust them.",
            FewQueriesWarning,
            stacklevel=2,
        )
    return scores


def _warn_unknown(codec: Codec, tokens: Int[torch.Tensor, "batch pos"]) -> None:
    """An :class:`~interp_toolkit.errors.UnknownTokensWarning` when much of the prompt is
    ``<unk>`` (:func:`~interp_toolkit.text.codecs.unknown_notice`; a leading BOS not counted)."""
    text = tokens[:, 1:] if bool((tokens[:, 0] == codec.bos_id).all()) else tokens
    notice = unknown_notice(codec, text.flatten().tolist(), UNKNOWN_NOTICE_SHARE)
    if notice is not None:
        warnings.warn(notice, UnknownTokensWarning, stacklevel=3)


def view(
    model: ModelLike,
    prompt: str | Sequence[int] | np.ndarray | torch.Tensor,
    layer: int | None = None,
    heads: HeadSpec = None,
) -> LayerViews:
    """The attention patterns of ``model`` on one prompt as ONE object that draws itself in
    Jupyter: every layer (each under its heading) when ``layer`` is None, else that layer.
    ``heads`` picks head indices or ``(layer, head)`` pairs. ``view(...)[layer]`` is one layer's
    circuitsvis view. For an offline page, see :func:`interp_toolkit.reports.attention.attention_page`.
    """
    from interp_toolkit.reports.attention import attention_view

    bridge, codec = _parts(model)
    tokens = _as_tokens(bridge, prompt)
    if tokens.shape[0] != 1:
        raise UserError(f"view() draws one prompt, not a batch of {tokens.shape[0]}.")
    _warn_unknown(codec, tokens)
    return attention_view(bridge, tokens[0], codec=codec, layer=layer, heads=heads)


def discover(
    model: ModelLike,
    options: DiscoveryOptions | None = None,
    *,
    model_cfg: Any = None,
    progress: Any = None,
    **changes: Any,
) -> Discovery:
    """Find previous-token, duplicate-token and induction heads: scores on repeated random
    tokens, each tested for specificity against the head itself (τ, p; docs/statistics.md), a
    role per head (``.report``), and the heads to draw.
    ``options``: a :class:`~interp_toolkit.heads.options.DiscoveryOptions`, or its fields as
    keywords (``n_seqs``, ``period``, ``seed``, ``alpha``, ``fdr``, ``n_draws``,
    ``n_untrained``, ...; with ``options``, they replace its values); an unknown keyword is one
    line naming the valid ones. ``model_cfg``, ``progress``: those of
    :func:`interp_toolkit.heads.discovery.discover`."""
    from interp_toolkit.heads.discovery import discover as discover_

    opts = replaced(DiscoveryOptions, options, "discovery", **changes)
    bridge, codec = _parts(model)
    return discover_(bridge, codec, opts, model_cfg=model_cfg, progress=progress)


def exam(
    model: ModelLike,
    prompt: str | None = None,
    target: str | None = None,
    *,
    top_k: int = 10,
) -> list[ExamResult]:
    """The repeated-pattern exam: does the model predict ``target`` (one token) after
    ``prompt``? Without a prompt, the built-in exams. Each result has ``rank`` (0 = top),
    ``prob``, ``passed`` and the ``top_k`` next tokens."""
    bridge, codec = _parts(model)
    top_k = validate.count(top_k, "top_k")
    if prompt is not None:
        validate.text(prompt, "prompt", "' A B C D A B C'")
    if target is not None:
        validate.text(target, "target", "' D'")
    if prompt is None:
        exams = [(e.prompt, e.target, e.name) for e in exams_for(codec)]
    elif target is None:
        raise UserError("exam(model, prompt) needs target=, the expected next token, e.g. ' F'.")
    else:
        exams = [(prompt, target, "custom")]
    return [run_exam(bridge, codec, p, t, top_k, True, name=n) for p, t, n in exams]


def sae(
    model: ModelLike, hook: str, out: PathLike, options: SAEOptions | None = None, **changes: Any
) -> Any:
    """Train a sparse autoencoder at ``hook`` (``"blocks.1.attn.hook_z"``, ``hook_resid_pre`` /
    ``_post``, ``mlp.hook_post``) into the folder ``out`` (SAELens's cfg.json and
    sae_weights.safetensors), evaluate it (``.metrics``: L0, explained variance, CE loss
    recovered, KL, dead latents) and read its latents (``.features``); writes index.html and
    features.html there. ``options``: the ``sae`` command's (:class:`~.saes.options.SAEOptions`),
    or its fields as keywords (``arch=``, ``k=``, ``tokens=``...; replacing those of
    ``options``). See docs/dictionaries.md."""
    from interp_toolkit.reports.features import write_pages
    from interp_toolkit.saes.pipeline import run_sae

    bridge, codec = _parts(model)
    out = path_arg(out, "out", "sae/l1-z")
    validate.text(hook, "hook", '"blocks.1.attn.hook_z"')
    o = replaced(SAEOptions, options, "sae", hook=hook, **changes)
    source = model.source if isinstance(model, Target) else model
    if isinstance(source, Run):  # as `sae RUN --out`: never into the run's own files
        from interp_toolkit.files.paths import inside_inputs

        inside_inputs(Path(out), "out", (str(source.path),), (source.paths.saes,), "sae/l1-z")
    result = run_sae(bridge, codec, source, out, o)
    write_pages(result, bridge, codec, show=o.show, title=f"SAE: {hook}")
    return result
