"""The byte codec: lossless text in 256 ids, its TransformerLens tokenizer, its token store (never
pruning the GPT-2 store of the same corpus), its random-token range, and the seed's exams and the
period exams written for it."""

from __future__ import annotations

import numpy as np
import pytest

from interp_toolkit.exams.prompts import exam_prompts, letter_pool, max_exam_period
from interp_toolkit.exams.single import BUILTIN_EXAMS, BYTE_EXAMS, encode_exam, exams_for
from interp_toolkit.heads.repeats import default_probe, default_token_range
from interp_toolkit.text.codecs import (
    PRINTABLE,
    ByteCodec,
    GPT2Codec,
    codec_from_dict,
    load_codec,
    save_codec,
)

TEXTS = ["def f(x):\n    return x\n", "héllo wörld ✓ 😀", "tab\tand\r\nNUL\x00inside", ""]


@pytest.mark.parametrize("text", TEXTS)
def test_bytes_round_trip_losslessly(text):
    codec = ByteCodec()
    ids = codec.encode(text)
    assert ids == list(text.encode("utf-8")) and all(0 <= i < 256 for i in ids)
    assert codec.decode(ids) == text
    assert not codec.contains_unk(ids)


def test_labels_are_characters_or_hex_and_bos_is_named():
    codec = ByteCodec()
    assert codec.str_tokens(codec.encode("def f")) == ["d", "e", "f", " ", "f"]
    assert codec.str_tokens(codec.encode("é")) == ["<0xC3>", "<0xA9>"]
    assert codec.str_tokens([codec.bos_id]) == ["<|endoftext|>"]


def test_the_codec_saves_and_loads(tmp_path):
    save_codec(ByteCodec(), tmp_path / "vocab.json")
    loaded = load_codec(tmp_path / "vocab.json")
    assert isinstance(loaded, ByteCodec) and loaded.d_vocab == 256
    assert isinstance(codec_from_dict({"kind": "bytes"}), ByteCodec)


def test_a_bridge_with_the_byte_tokenizer_reads_bytes():
    from interp_toolkit.models.build import ModelConfig, build_model

    cfg = ModelConfig(n_layers=1, d_model=16, n_heads=2, d_head=8, n_ctx=16, d_vocab=256)
    model = build_model(cfg, codec=ByteCodec())
    assert model.to_str_tokens("def f") == ["<|endoftext|>", "d", "e", "f", " ", "f"]
    assert model.to_tokens("é").tolist() == [[0, 0xC3, 0xA9]]
    assert model.to_string(model.to_tokens("héllo", prepend_bos=False)[0]) == "héllo"


def test_random_tokens_are_printable_and_distinct_within_a_segment():
    codec = ByteCodec()
    assert default_token_range(codec) == PRINTABLE == (32, 127)
    probe = default_probe(codec, 256, n_seqs=8, seed=0)
    body = probe.tokens[:, 1:]
    assert int(body.min()) >= 32 and int(body.max()) < 127
    for row, start in zip(probe.tokens.tolist(), probe.starts.tolist(), strict=True):
        seg = row[start : start + probe.period]
        assert len(set(seg)) == probe.period  # no token twice in a period: one induction target
        assert row[start + probe.period : start + 2 * probe.period] == seg


def test_the_byte_store_holds_bytes_and_keeps_the_gpt2_store(tmp_path, monkeypatch):
    from interp_toolkit.text.stream import tokenize_corpus

    monkeypatch.setenv("INTERP_TOOLKIT_CACHE", str(tmp_path / "cache"))
    (tmp_path / "c.txt").write_text("def f(x):\n    return x + 1\n" * 50)
    spec = str(tmp_path / "c.txt")
    gpt2 = tokenize_corpus(spec, val_fraction=0.1, progress=False)
    raw = tokenize_corpus(spec, val_fraction=0.1, progress=False, store="bytes")
    ids = np.concatenate([raw.train_ids, raw.val_ids])
    text = (tmp_path / "c.txt").read_bytes()
    assert int(ids.max()) < 256 and bytes(ids[ids != 0].astype(np.uint8)) == text
    assert len(list((tmp_path / "cache" / "tokens").iterdir())) == 2  # neither pruned the other
    again = tokenize_corpus(spec, val_fraction=0.1, progress=False)
    assert np.array_equal(again.train_ids, gpt2.train_ids) and int(gpt2.train_ids.max()) > 255


def test_the_seed_exams_in_bytes_are_one_token_per_letter():
    codec = ByteCodec()
    assert exams_for(codec) == BYTE_EXAMS and exams_for(GPT2Codec()) == BUILTIN_EXAMS
    for exam in BYTE_EXAMS:
        ids, target = encode_exam(codec, exam.prompt, exam.target, n_ctx=256)
        assert codec.str_tokens([target]) == [exam.target]
        # the target is what followed the earlier occurrence of the prompt's last two tokens (with
        # spaces the last token is a space, and a space alone is followed by every letter)
        prompt = ids[1:]
        last = max(i for i in range(1, len(prompt) - 1) if prompt[i - 1 : i + 1] == prompt[-2:])
        assert prompt[last + 1] == target
        assert exam.name.endswith("-spaced") == (prompt[-1] == ord(" "))


def test_period_exams_run_on_bytes():
    codec = ByteCodec()
    pool = letter_pool(codec)
    assert len(pool.upper) == 26 and len(pool.ids) == 52
    assert codec.str_tokens(pool.upper[:3]) == ["A", "B", "C"]
    assert max_exam_period(codec, 256, "letters") == 52
    assert max_exam_period(codec, 256, "random") == 94  # 95 printable bytes, one left for prefix
    for kind, period in (("letters", 26), ("random", 90)):
        e = exam_prompts(codec, kind, period, n_prompts=20, n_ctx=256)
        rows = e.tokens.tolist()
        for i, row in enumerate(rows):
            q = int(e.query[i])
            assert row[q - period + 1] == int(e.target[i])  # the answer is one period back
            assert 32 <= int(e.target[i]) < 127
