"""The TransformerLens tokenizer of our codecs: exact ids, BOS, and TL's text methods on run models."""

from __future__ import annotations

import random

import pytest
import torch
from analysis_helpers import greedy_tokens, make_prev_token_head, tiny_codec
from transformer_lens import head_detector, utilities

from interp_toolkit.heads.discovery import head_scores
from interp_toolkit.heads.repeats import RepeatedTokens
from interp_toolkit.models.build import ModelConfig, build_model
from interp_toolkit.runs.folder import load_run, save_run
from interp_toolkit.text.codecs import ENDOFTEXT, EOT_ID, UNK, CompactVocab, GPT2Codec
from interp_toolkit.text.tl_tokenizer import CodecTokenizer, attach_tokenizer

PROSE = (
    "It's a truth universally acknowledged; they're sure we've said I'd won't can't.\n"
    "The quick brown fox jumps over the lazy dog. 3.14159, 1,000,000 and 2024-01-01T12:00Z.\n"
    "def f(x):\n\tif x > 0:\r\n\t\treturn x ** 2  # comment\n    else:   \n        pass\n\n\n"
    "Email me at someone@example.com, or visit https://example.org/path?q=1&r=2#frag !!!???\n"
)
UNICODE = (
    "naïve café Straße façade Ærøskøbing e\u0301 ñ 日本語のテキスト 한국어 텍스트 "
    "مرحبا بالعالم שלום עולם नमस्ते दुनिया Ελληνικά кириллица "
    "😀 👩\u200d👩\u200d👧\u200d👦 🇫🇷 ✨🔥 \u00a0nbsp\u3000ideographic \u200bzero-width"
)
WHITESPACE = "   leading\n\n\n\t\t  mixed   \r\n trailing   \n \n\t \u00a0 \n" + " " * 17 + "end"


def varied_text() -> str:
    """~7 KB: prose, code, contractions, many scripts, emoji (ZWJ, flags), whitespace runs, and
    3,000 random characters drawn (seeded) from ASCII, Latin, Greek, Cyrillic, Hebrew/Arabic,
    Devanagari, kana, CJK, Hangul and emoji blocks mixed with spaces, tabs, CRLF and NBSP."""
    rng = random.Random(0)
    blocks = [(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x4FF), (0x590, 0x6FF), (0x900, 0x97F)]
    blocks += [(0x3040, 0x30FF), (0x4E00, 0x4FFF), (0xAC00, 0xAD00), (0x1F300, 0x1F64F)]
    spaces = [" ", "  ", "\n", "\t", "\r\n", "   \n", "\u00a0", "\u3000", "\u200d"]
    chars = []
    for _ in range(3000):
        if rng.random() < 0.15:
            chars.append(rng.choice(spaces))
        else:
            lo, hi = rng.choice(blocks)
            chars.append(chr(rng.randint(lo, hi)))
    return PROSE + UNICODE + WHITESPACE + "".join(chars)


TEXT = varied_text()


def _covering(text: str) -> CompactVocab:
    """A compact vocabulary of exactly the GPT-2 tokens of ``text`` (and <|endoftext|>)."""
    return CompactVocab(sorted(set(GPT2Codec().encode(text)) | {EOT_ID}))


#: name -> (codec factory, whether TEXT has tokens outside it)
CODECS = {
    "gpt2": (GPT2Codec, False),
    "compact-covering": (lambda: _covering(TEXT), False),
    "compact-prose": (lambda: _covering(PROSE), True),  # the unicode and random parts are <unk>
}


@pytest.fixture(scope="module", params=sorted(CODECS))
def codec_case(request):
    make, has_unk = CODECS[request.param]
    return make(), has_unk


@pytest.fixture
def codec(codec_case):
    return codec_case[0]


def test_ids_equal_the_codec_on_varied_text(codec_case):
    codec, has_unk = codec_case
    tok = CodecTokenizer(codec)
    ids = codec.encode(TEXT)
    assert len(TEXT.encode()) > 6000 and len(ids) > 3000
    assert tok(TEXT, add_special_tokens=False)["input_ids"] == ids
    assert tok(TEXT)["input_ids"] == [codec.bos_id] + ids
    # line by line (a batch), each line with its own BOS
    lines = TEXT.splitlines(keepends=True)
    assert tok(lines)["input_ids"] == [[codec.bos_id] + codec.encode(line) for line in lines]
    n_unk = sum(i == codec.unk_id for i in ids)
    if has_unk:
        assert n_unk > len(ids) // 2  # the <unk> path is exercised
    else:
        assert n_unk == 0


def test_gpt2_ids_equal_hf_gpt2_tokenizer():
    """An independent implementation (HF ``tokenizers`` BPE) gives the same ids as ours (tiktoken)."""
    from interp_toolkit.runs.hf import offline_gpt2_tokenizer

    ours = CodecTokenizer(GPT2Codec())
    with offline_gpt2_tokenizer() as hf:
        assert (
            ours(TEXT, add_special_tokens=False)["input_ids"]
            == hf(TEXT, add_special_tokens=False)["input_ids"]
        )
        assert ours.convert_ids_to_tokens(ours.encode("Hello world")) == hf.convert_ids_to_tokens(
            [EOT_ID, 15496, 995]
        )


def test_decode_round_trips(codec):
    tok = CodecTokenizer(codec)
    ids = tok(TEXT)["input_ids"]
    if not codec.contains_unk(ids):
        # bytes are joined before UTF-8 decoding: emoji split over several tokens survive
        assert tok.decode(ids, skip_special_tokens=True) == TEXT
        assert tok.decode(ids) == ENDOFTEXT + TEXT
    ascii_ids = codec.encode(PROSE)
    assert tok.decode(ascii_ids) == codec.decode(ascii_ids)
    assert tok.batch_decode([[i] for i in ids]) == codec.str_tokens(ids)


def test_special_tokens_and_vocabulary(codec):
    tok = CodecTokenizer(codec)
    assert len(tok) == tok.vocab_size == codec.d_vocab
    vocab = tok.get_vocab()
    assert sorted(vocab.values()) == list(range(codec.d_vocab))
    assert tok.bos_token_id == tok.eos_token_id == tok.pad_token_id == codec.bos_id
    assert tok.unk_token_id == codec.unk_id
    assert tok.convert_ids_to_tokens(codec.bos_id) == ENDOFTEXT
    # like GPT-2's own tokenizer, a literal <|endoftext|> in the text is the special token
    assert tok("a" + ENDOFTEXT, add_special_tokens=False)["input_ids"][-1] == codec.bos_id


def _tiny(d_vocab: int = 64, n_ctx: int = 32, seed: int = 0) -> ModelConfig:
    return ModelConfig(
        n_layers=2, d_model=32, n_heads=4, d_head=8, n_ctx=n_ctx, d_vocab=d_vocab, seed=seed
    )


def test_attach_keeps_the_forward_and_puts_bos_first():
    cfg, codec = _tiny(), tiny_codec(64)
    bare = build_model(cfg)
    model = build_model(cfg, codec=codec)
    assert bare.tokenizer is None and model.tokenizer is not None
    toks = torch.randint(0, 64, (3, 20), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(bare(toks), model(toks))
    assert model.cfg.d_vocab == 64
    text = "A1!B2#"
    ids = codec.encode(text)
    assert model.to_tokens(text).tolist() == [[codec.bos_id] + ids]
    assert model.to_tokens(text, prepend_bos=False).tolist() == [ids]
    assert model.to_str_tokens(text) == [ENDOFTEXT, "A", "1", "!", "B", "2", "#"]
    assert model.to_string(model.to_tokens(text)[0]) == ENDOFTEXT + text
    with torch.no_grad():  # string input goes through the same tokens
        assert torch.equal(model(text), model(model.to_tokens(text)))


def test_to_tokens_pads_a_batch_and_truncates_to_n_ctx():
    codec = tiny_codec(64)
    model = build_model(_tiny(), codec=codec)
    batch = model.to_tokens(["A1", "A1!B2#"])
    bos = codec.bos_id
    assert batch.tolist() == [
        [bos, *codec.encode("A1"), *[bos] * 4],
        [bos, *codec.encode("A1!B2#")],
    ]
    long = model.to_tokens("A1" * 40)
    assert long.shape == (1, 32) and int(long[0, 0]) == bos


def test_compact_text_outside_the_vocabulary_is_unk():
    codec = tiny_codec(64)
    model = build_model(_tiny(), codec=codec)
    assert model.to_str_tokens(" hello world", prepend_bos=False) == [UNK, UNK]


def test_attach_refuses_a_codec_of_another_size():
    with pytest.raises(ValueError, match="d_vocab=64 but the codec has 65"):
        attach_tokenizer(build_model(_tiny()), tiny_codec(65))


def test_load_run_model_has_the_run_codec_tokenizer(tmp_path):
    cfg, codec = _tiny(), tiny_codec(64)
    path = save_run(tmp_path / "run", build_model(cfg), codec, cfg)
    run = load_run(path)
    assert run.model.to_tokens("A1!").tolist() == [[run.codec.bos_id, *run.codec.encode("A1!")]]


def test_generate_is_greedy_over_the_model_ids():
    codec = tiny_codec(64)
    model = build_model(_tiny(seed=3), codec=codec)
    prompt = "A1!B2#"
    greedy = greedy_tokens(model, model.to_tokens(prompt), 5)
    kw = dict(max_new_tokens=5, do_sample=False, stop_at_eos=False, verbose=False)
    with torch.no_grad():  # TL's default path (KV cache) on a native model
        assert model.generate(model.to_tokens(prompt), **kw).tolist() == greedy.tolist()
        text = model.generate(prompt, **kw)
    assert text == model.tokenizer.decode(greedy[0], skip_special_tokens=True)


def test_tl_test_prompt_ranks_the_answer(capsys):
    codec = tiny_codec(64)
    model = build_model(_tiny(seed=4), codec=codec)
    utilities.test_prompt("A1!B2", "#", model, prepend_space_to_answer=False, top_k=3)
    out = capsys.readouterr().out
    assert "Tokenized prompt: ['<|endoftext|>', 'A', '1', '!', 'B', '2']" in out
    with torch.no_grad():
        logits = model(model.to_tokens("A1!B2"))[0, -1]
    rank = int((logits > logits[codec.encode("#")[0]]).sum())
    assert f"Rank: {rank} " in out


def test_tl_detect_head_finds_a_planted_previous_token_head():
    """TL's ``detect_head`` on text, against our previous-token score on the same tokens.

    TL's "mul" score is ``sum(A * D) / sum(A)`` over the whole ``[pos, pos]`` pattern, with
    ``D`` ones on the sub-diagonal: ``(sum_{q>=1} A[q, q-1]) / n``. Row 0 (nothing before it)
    counts in the denominator, and row 1 (whose previous token is BOS) counts in the numerator.
    Ours is ``mean_{q>=2} A[q, q-1]`` (BOS keys excluded). So ``n * TL - (n - 2) * ours =
    A[1, 0]``, a probability, for every head; TL's maximum is ``(n - 1) / n``.
    """
    codec = tiny_codec(64)
    model = build_model(_tiny(), codec=codec)
    make_prev_token_head(model, layer=0, head=1)
    text = "A1!B2#C3$D4%" * 2
    toks = model.to_tokens(text)
    n = toks.shape[1]
    tl = head_detector.detect_head(model, text, "previous_token_head")
    batch = RepeatedTokens(
        tokens=toks, period=(n - 1) // 2, n_repeats=2, starts=torch.tensor([1]), has_bos=True,
        low=0, high=codec.unk_id,
    )  # fmt: skip
    ours = head_scores(model, batch).previous_token
    assert divmod(int(tl.argmax()), 4) == (0, 1) == divmod(int(ours.argmax()), 4)
    assert float(tl[0, 1]) > 0.95 * (n - 1) / n
    others = torch.ones_like(tl, dtype=torch.bool)
    others[0, 1] = False
    assert float(tl[others].max()) < 0.5 * float(tl[0, 1])
    bos_term = n * tl - (n - 2) * ours  # = A[1, 0] of each head
    assert float(bos_term.min()) > -1e-5 and float(bos_term.max()) < 1 + 1e-5
    assert float(bos_term[0, 1]) > 0.99  # the planted head's q=1 attends to BOS (its previous)
