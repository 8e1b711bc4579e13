import hashlib
import inspect

import numpy as np
import pytest

from interp_toolkit.errors import UserError
from interp_toolkit.text import codecs as tk


def test_gpt2_encoding_matches_known_ids():
    enc = tk.gpt2_encoding()
    assert enc.encode("Hello world") == [15496, 995]
    assert enc.n_vocab == 50257
    assert enc.decode([15496, 995]) == "Hello world"


def test_pinned_hashes_equal_tiktoken_and_files():
    import tiktoken_ext.openai_public as op

    src = inspect.getsource(op.gpt2)
    assert tk.VOCAB_BPE_SHA256 in src and tk.ENCODER_JSON_SHA256 in src
    enc_json, vocab_bpe = tk.gpt2_bpe_files()
    assert hashlib.sha256(enc_json.read_bytes()).hexdigest() == tk.ENCODER_JSON_SHA256
    assert hashlib.sha256(vocab_bpe.read_bytes()).hexdigest() == tk.VOCAB_BPE_SHA256


def test_hash_mismatch_fails_loudly(tmp_path):
    enc_json, vocab_bpe = tk.gpt2_bpe_files()
    bad = tmp_path / "vocab.bpe"
    bad.write_bytes(vocab_bpe.read_bytes() + b"\n")
    with pytest.raises(RuntimeError, match="sha256"):
        tk.verify_bpe_files(enc_json, bad)


def test_compact_vocab_keeps_most_frequent_and_maps_rest_to_unk():
    counts = np.zeros(50257, dtype=np.int64)
    counts[[15496, 995, 11, 13]] = [50, 40, 30, 1]
    v = tk.CompactVocab.from_counts(counts, size=4)  # eot + 2 most frequent + unk
    assert v.d_vocab == 4 and v.unk_id == 3
    assert set(v.gpt2_ids.tolist()) == {tk.EOT_ID, 15496, 995}
    ids = v.encode("Hello world,")
    assert ids[:2] == [int(v.from_gpt2(np.array([15496]))[0]), int(v.from_gpt2(np.array([995]))[0])]
    assert ids[2] == v.unk_id and v.contains_unk(ids)
    assert not v.contains_unk(ids[:2])
    assert v.decode(ids) == "Hello world<unk>"
    assert v.str_tokens([v.bos_id]) == ["<|endoftext|>"]


def test_codec_round_trip(tmp_path):
    v = tk.CompactVocab([tk.EOT_ID, 15496, 995])
    tk.save_codec(v, tmp_path / "vocab.json")
    w = tk.load_codec(tmp_path / "vocab.json")
    assert isinstance(w, tk.CompactVocab) and w.gpt2_ids.tolist() == v.gpt2_ids.tolist()
    tk.save_codec(tk.GPT2Codec(), tmp_path / "g.json")
    assert isinstance(tk.load_codec(tmp_path / "g.json"), tk.GPT2Codec)


class _Tokenizer:
    """What TokenizerCodec reads of a Hugging Face tokenizer."""

    all_special_ids, bos_token_id, eos_token_id, unk_token_id = [0], None, 0, 1
    name_or_path = "tiny/tok"

    def __len__(self) -> int:
        return 10


@pytest.mark.parametrize(
    ("codec", "saved"),
    [
        (tk.GPT2Codec(), '{"kind": "gpt2"}'),
        (tk.ByteCodec(), '{"kind": "bytes"}'),
        (
            tk.CompactVocab([995, tk.EOT_ID]),
            '{"kind": "compact", "unk_id": 2, "gpt2_ids": [995, 50256]}',
        ),
        (
            tk.TokenizerCodec(_Tokenizer(), 12),
            '{"kind": "hf", "tokenizer": "tiny/tok", "d_vocab": 12}',
        ),
    ],
)
def test_each_codec_saves_exactly_its_kind_and_what_rebuilds_it(codec, saved, tmp_path):
    """vocab.json's bytes, key for key and in order: what runs on disk hold and are read back."""
    tk.save_codec(codec, tmp_path / "vocab.json")
    assert (tmp_path / "vocab.json").read_text() == saved
    if codec.kind != "hf":  # a model's own tokenizer is not saved in a run folder
        tk.save_codec(tk.load_codec(tmp_path / "vocab.json"), tmp_path / "again.json")
        assert (tmp_path / "again.json").read_text() == saved


def test_too_small_vocab_is_user_error():
    with pytest.raises(UserError, match="too small"):
        tk.CompactVocab.from_counts(np.ones(50257), 2)
