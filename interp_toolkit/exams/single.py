"""The repeated-pattern exam: does the model continue a repeated pattern with the right token?"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import groupby
from typing import Any

import torch
from jaxtyping import Float, Int
from transformer_lens import TransformerBridge

from interp_toolkit.errors import UserError
from interp_toolkit.files.serialize import Jsonable, json_field
from interp_toolkit.runtime import validate
from interp_toolkit.text.codecs import Codec, gpt2_encoding


@dataclass(frozen=True)
class Exam(Jsonable):
    name: str
    prompt: str
    target: str


#: The seed study's two exams.
BUILTIN_EXAMS: tuple[Exam, ...] = (
    Exam("ABCXDEF", "A B C X D E F A B C X D E F A B C X D E", " F"),
    Exam("ABCD", "A B C D A B C D A B C D A B C D A B C", " D"),
)

#: The seed's two exams written for a byte model, where each letter is one token: without
#: spaces (the letters alone), and with them (the target is the letter after the last space).
BYTE_EXAMS: tuple[Exam, ...] = (
    Exam("ABCXDEF", "ABCXDEFABCXDEFABCXDE", "F"),
    Exam("ABCD", "ABCDABCDABCDABCDABC", "D"),
    Exam("ABCXDEF-spaced", "A B C X D E F A B C X D E F A B C X D E ", "F"),
    Exam("ABCD-spaced", "A B C D A B C D A B C D A B C D A B C ", "D"),
)


def exams_for(codec: Codec | None) -> tuple[Exam, ...]:
    """The post's exams in the form ``codec`` reads them: one token per letter either way. A
    byte codec reads :data:`BYTE_EXAMS`; GPT-2's BPE :data:`BUILTIN_EXAMS`; another tokenizer (a
    Hugging Face model's) the first form, spaced or not, it reads one token per letter, and the
    other forms too where it reads them so."""
    if codec is None or codec.kind in ("gpt2", "compact"):
        return BUILTIN_EXAMS
    if codec.kind == "bytes":
        return BYTE_EXAMS
    fits: dict[tuple[tuple[int, ...], ...], Exam] = {}  # one exam per token sequence
    for e in (*BUILTIN_EXAMS, *BYTE_EXAMS):
        ids, target = codec.encode(e.prompt), codec.encode(e.target)
        letters = sum(c.isalpha() for c in e.prompt)
        if len(ids) == letters and len(target) == 1 and not codec.contains_unk([*ids, *target]):
            fits.setdefault((tuple(ids), tuple(target)), e)
    return tuple(fits.values()) or BUILTIN_EXAMS


@dataclass
class ExamResult(Jsonable):
    prompt: str
    target: str
    target_id: int
    rank: int
    prob: float
    top: list[tuple[str, float]] = field(metadata=json_field(skip=True))
    name: str | None = None
    logprob: float = float("nan")
    top_ids: list[int] = field(default_factory=list, metadata=json_field(skip=True))
    n_tokens: int = 0

    json_extra = {"passed": "passed", "top": "top_tokens"}
    json_order = (
        "name",
        "prompt",
        "target",
        "target_id",
        "rank",
        "prob",
        "logprob",
        "passed",
        "n_tokens",
        "top",
    )

    @property
    def passed(self) -> bool:
        return self.rank == 0

    @property
    def top_tokens(self) -> list[dict[str, Any]]:
        ids = self.top_ids or [None] * len(self.top)
        return [
            {"token": s, "token_id": i, "prob": p} for (s, p), i in zip(self.top, ids, strict=True)
        ]


def _unk_pieces(codec: Codec, text: str) -> list[str]:
    """The pieces of ``text`` that a compact vocabulary maps to ``<unk>`` (for messages): each
    run of unknown GPT-2 tokens decoded together, so an emoji is named whole."""
    import numpy as np

    enc = gpt2_encoding()
    g_ids = enc.encode_ordinary(text)
    unknown = codec.from_gpt2(np.asarray(g_ids, dtype=np.int64)) == codec.unk_id
    runs = groupby(zip(g_ids, unknown.tolist(), strict=True), key=lambda pair: pair[1])
    return list(dict.fromkeys(repr(enc.decode([g for g, _ in run])) for unk, run in runs if unk))


def encode_exam(
    codec: Codec, prompt: str, target: str, *, n_ctx: int, prepend_bos: bool = True
) -> tuple[list[int], int]:
    """Prompt ids (with BOS when asked) and the single target id; UserError on bad input."""
    target_ids = codec.encode(target)
    if len(target_ids) != 1:
        raise UserError(
            f"target {target!r} is {len(target_ids)} tokens ({codec.str_tokens(target_ids)}), not one: "
            "give a single token, usually with a leading space, e.g. ' F'."
        )
    if codec.contains_unk(target_ids):
        raise UserError(
            f"target {target!r} is not in this model's compact vocabulary (it maps to <unk>): "
            "choose a target the vocabulary keeps."
        )
    ids = codec.encode(prompt)
    if codec.contains_unk(ids):
        raise UserError(
            f"prompt tokens {', '.join(_unk_pieces(codec, prompt)) or '?'} are not in this model's "
            "compact vocabulary (they map to <unk>): rephrase the prompt with tokens it keeps."
        )
    if prepend_bos:
        ids = [int(codec.bos_id)] + ids
    if not ids:
        raise UserError("the prompt is empty: give at least one token (or keep the BOS token).")
    if len(ids) > n_ctx:
        raise UserError(
            f"the prompt is {len(ids)} tokens{' with BOS' if prepend_bos else ''} but the model's "
            f"context is {n_ctx}: shorten the prompt."
        )
    return ids, int(target_ids[0])


def target_rank(
    logits: Float[torch.Tensor, "*prompt vocab"], target: Int[torch.Tensor, "*prompt"]
) -> Int[torch.Tensor, "*prompt"]:
    """The one definition of an exam's rank: how many *other* tokens have a logit at least the
    target's. 0 means the target alone is the top prediction (a pass); ties count against the
    target, so a model whose logits are all equal ranks it ``d_vocab - 1`` and passes nothing.
    Every exam (:func:`run_exam`, the period exams) reads it."""
    t = logits.gather(-1, target.unsqueeze(-1))
    return (logits >= t).sum(-1) - 1


def run_exam(
    model: TransformerBridge,
    codec: Codec,
    prompt: str,
    target: str,
    top_k: int = 10,
    prepend_bos: bool = True,
    *,
    name: str | None = None,
) -> ExamResult:
    """The target's rank (:func:`target_rank`: 0 = the model's top prediction, ties count
    against the target), its probability, and the ``top_k`` next tokens with probabilities."""
    if top_k < 1:
        raise UserError(f"top_k={top_k} cannot work: use 1 or more.")
    ids, target_id = encode_exam(
        codec, prompt, target, n_ctx=int(model.cfg.n_ctx), prepend_bos=prepend_bos
    )
    validate.in_vocab([*ids, target_id], int(model.cfg.d_vocab), "prompt and target")
    tokens = torch.tensor([ids], device=next(model.parameters()).device)
    with torch.no_grad():
        logp = model(tokens)[0, -1].float().log_softmax(-1).cpu()
    rank = int(target_rank(logp, torch.tensor(target_id)))
    vals, idx = logp.topk(min(top_k, logp.shape[0]))
    strs = codec.str_tokens(idx.tolist())
    return ExamResult(
        prompt=prompt,
        target=target,
        target_id=target_id,
        rank=rank,
        prob=float(logp[target_id].exp()),
        top=[(s, float(v.exp())) for s, v in zip(strs, vals, strict=True)],
        name=name,
        logprob=float(logp[target_id]),
        top_ids=idx.tolist(),
        n_tokens=len(ids),
    )
