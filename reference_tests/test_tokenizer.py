"""The reference tokenizer's and BPE trainer's own ways (internals and extras, not the handout's API).

* the standard-library patterns stand in for the ``regex`` ones exactly where they are used;
* a pre-token on its own pre-tokenizes to itself (the tokenizer's one cache holds words and
  pre-tokens alike), and cutting text into whitespace-led words (the cache keys) never moves a
  pre-token boundary;
* a tokenizer whose cache overflows and empty themselves gives the same ids;
* ``find_chunk_boundaries`` and ``read_text_range`` keep their old import path;
* the BPE trainer's parallel pre-tokenization, chunk boundaries and timings.
"""

from __future__ import annotations

import ast
import random
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import regex
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cs336_basics import bpe, pretokenize_helper
from cs336_basics.bpe import _descending_key, train_bpe
from cs336_basics.chunking import find_chunk_boundaries
from cs336_basics.pretokenization import (
    WHITESPACE,
    count_pretokens,
    gpt2_pretokenizer,
    pretokenize,
    split_words,
)
from cs336_basics.tokenizer import Tokenizer


def test_whitespace_class_is_the_patterns_whitespace() -> None:
    every_character = "".join(map(chr, range(sys.maxunicode + 1)))
    ours = set(re.findall(f"[{WHITESPACE}]", every_character))
    theirs = set(regex.findall(r"\s", every_character))
    assert sorted(hex(ord(c)) for c in ours ^ theirs) == []


@settings(max_examples=300, deadline=None)
@given(text=st.text(st.characters(max_codepoint=127), max_size=60))
def test_ascii_pretokenizer_agrees_with_the_gpt2_pattern(text: str) -> None:
    assert pretokenize(text) == gpt2_pretokenizer().findall(text)


# Text where GPT-2's classes meet: whitespace of every kind, contractions, letters, digits,
# punctuation and characters beyond ASCII; or any text at all.
MIXED_TEXT = st.text(
    st.sampled_from(list(" \t\n\r\x0b\x0c\x1c\xa0\u3000'sdtlmvreA1².,!é日")), max_size=60
) | st.text(max_size=60)


@settings(max_examples=500, deadline=None)
@given(text=MIXED_TEXT)
def test_text_not_all_ascii_gets_the_gpt2_patterns_pretokens(text: str) -> None:
    # Only its pieces between safe boundaries that hold non-ASCII go through the general pattern.
    assert pretokenize(text) == gpt2_pretokenizer().findall(text)


@settings(max_examples=300, deadline=None)
@given(text=MIXED_TEXT)
def test_a_pretoken_alone_is_one_pretoken(text: str) -> None:
    for pretoken in gpt2_pretokenizer().findall(text):
        assert gpt2_pretokenizer().findall(pretoken) == [pretoken]


def test_ascii_pretokenizer_agrees_on_every_three_characters() -> None:
    ascii_chars = [chr(code) for code in range(128)]
    for a in ascii_chars:
        for b in ascii_chars:
            texts = [a + b + c for c in "a1 \n'.s"]
            assert [pretokenize(t) for t in texts] == [
                gpt2_pretokenizer().findall(t) for t in texts
            ]


class _TinyCacheTokenizer(Tokenizer):
    CACHE_SIZE = 7


def _small_tokenizer(cls: type[Tokenizer] = Tokenizer) -> Tokenizer:
    vocab = {i: bytes([i]) for i in range(256)}
    merges = [(b"a", b"b"), (b"ab", b"a"), (b" ", b"a"), (b"b", b"b"), (b" a", b"b")]
    for left, right in merges:
        vocab[len(vocab)] = left + right
    return cls(vocab, merges, ["<|endoftext|>"])


def test_an_overflowing_cache_gives_the_same_ids() -> None:
    rng = random.Random(0)
    text = " ".join("".join(rng.choices("ab", k=rng.randint(1, 9))) for _ in range(3000))
    expected = _small_tokenizer().encode(text)
    tiny = _small_tokenizer(_TinyCacheTokenizer)
    assert tiny.encode(text) == expected
    assert tiny.encode(text) == expected
    assert len(tiny._cache) <= 7
    assert len(tiny._pretoken_cache) <= 7


def test_a_pretoken_is_merged_once_whatever_words_hold_it() -> None:
    # New words made of known pre-tokens (real English has many: " ab,", " (ab)") look their
    # pre-tokens up rather than merging them again.
    class Counting(Tokenizer):
        def _encode_pretoken(self, pretoken: str) -> list[int]:
            self.merged.append(pretoken)
            return super()._encode_pretoken(pretoken)

    tokenizer = _small_tokenizer(Counting)
    tokenizer.merged = []
    text = " ab, ab. (ab) ab! ab\n  ab"
    assert tokenizer.encode(text) == _small_tokenizer().encode(text)
    assert sorted(tokenizer.merged) == sorted(set(tokenizer.merged))
    assert " ab" in tokenizer.merged


# Whitespace of every kind the GPT-2 pattern knows (and \x1c, which str.isspace calls whitespace but
# the pattern does not), letters, digits, apostrophes and non-ASCII characters.
ALPHABET = st.sampled_from(list(" \t\n\r\x0b\x0c\x1c\xa0\u3000'sdtlmvreA1.,!é日"))


@settings(max_examples=200, deadline=None)
@given(text=st.text(ALPHABET, max_size=40) | st.text(max_size=40))
@example(text="a  b\n\n c ")
@example(text="it's  'll\u3000x\xa0 y")
def test_pretokens_of_words_are_pretokens_of_text(text: str) -> None:
    words = split_words(text)
    assert "".join(words) == text
    assert all(words)
    # Compare with the pattern applied to the whole text, independently of the word split.
    assert [
        p for word in words for p in gpt2_pretokenizer().findall(word)
    ] == gpt2_pretokenizer().findall(text)


def test_words_are_one_whitespace_then_non_whitespace_or_whitespace() -> None:
    # A run of whitespace before a word leaves its last character to the word (as the pattern's
    # \s+(?!\S) does): indented lines share their words, whatever the indentation.
    assert split_words("Once upon\n\na time,  there ") == [
        "Once",
        " upon",
        "\n",
        "\na",
        " time,",
        " ",
        " there",
        " ",
    ]
    assert split_words("héllo\u3000wörld\n\u3000 x") == ["héllo", "\u3000wörld", "\n\u3000", " x"]


CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "corpora" / "stories-400k.txt"
EOT = "<|endoftext|>"


def test_train_bpe_same_result_for_any_worker_count():
    assert train_bpe(CORPUS, 500, [EOT], num_workers=1) == train_bpe(
        CORPUS, 500, [EOT], num_workers=2
    )


def test_train_bpe_helper_processes_count_as_one_process(monkeypatch):
    # Chunks small enough that the corpus makes several, so 2 and 3 processes start helpers.
    monkeypatch.setattr(bpe, "CHUNK_BYTES", 32 * 1024)
    alone = train_bpe(CORPUS, 500, [EOT], num_workers=1)
    assert train_bpe(CORPUS, 500, [EOT], num_workers=2) == alone
    assert train_bpe(CORPUS, 500, [EOT], num_workers=3) == alone


def test_helper_reports_a_bad_byte_by_file_offset(monkeypatch, tmp_path):
    # The bad byte lies in the last chunk, which a helper counts; its error is raised here.
    monkeypatch.setattr(bpe, "CHUNK_BYTES", 1024)
    good = ("once upon a time " * 400).encode()
    (tmp_path / "bad.txt").write_bytes(good + b"w\xf6rld")
    with pytest.raises(ValueError, match=rf"bad\.txt.*offset {len(good) + 1}"):
        train_bpe(tmp_path / "bad.txt", 300, [EOT], num_workers=2)


def test_a_helper_that_dies_is_an_error(monkeypatch):
    monkeypatch.setattr(bpe, "CHUNK_BYTES", 32 * 1024)
    monkeypatch.setattr(pretokenize_helper, "_START", "import sys; sys.exit(3)")
    with pytest.raises(RuntimeError, match=r"pre-tokenization helper .*\(exit 3\)"):
        train_bpe(CORPUS, 300, [EOT], num_workers=2)


def test_helper_imports_only_what_counting_needs():
    # A helper is a fresh interpreter: not the parent's __main__, nor torch or numpy; and
    # ``regex`` only once text that is not ASCII needs it.
    script = (
        "import sys; from cs336_basics.pretokenize_helper import count_ranges; "
        "count_ranges(sys.argv[1], [(0, 4096)], ['<|endoftext|>']); print(sorted(sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, str(CORPUS)], capture_output=True, text=True, check=True
    )
    modules = set(ast.literal_eval(result.stdout))
    assert not modules & {"regex", "numpy", "torch", "tqdm"}


def test_chunk_boundaries_preserve_pretoken_counts():
    data = CORPUS.read_bytes()
    whole = count_pretokens(data.decode("utf-8"), [EOT])
    for num_chunks in (2, 7, 64):
        boundaries = find_chunk_boundaries(CORPUS, num_chunks, [EOT])
        assert (
            boundaries[0] == 0
            and boundaries[-1] == len(data)
            and boundaries == sorted(set(boundaries))
        )
        assert len(boundaries) > num_chunks // 2
        total: Counter[bytes] = Counter()
        for start, end in zip(boundaries, boundaries[1:], strict=False):
            total += count_pretokens(data[start:end].decode("utf-8"), [EOT])
        assert total == whole


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    pieces=st.lists(
        st.sampled_from(
            list("ab '\n\t.é") + ["<|x|>", "<|x", "|>", "<|x|><|y|>", "<|y|>", "<| s |>", "<|\n|>"]
        ),
        max_size=80,
    ),
    num_chunks=st.integers(2, 50),
    specials=st.sampled_from(
        [["<|x|>", "<|x|><|y|>"], ["<|y|>", "<|x|><|y|>"], ["<| s |>", "<|\n|>", "<|y|>"]]
    ),
)
def test_chunk_boundaries_with_nested_specials(tmp_path, pieces, num_chunks, specials):
    # A special that is a prefix of another, one inside another at a non-zero offset, and
    # specials holding a space or a newline.
    text = "".join(pieces)
    path = tmp_path / "corpus.txt"
    path.write_bytes(text.encode("utf-8"))
    data = path.read_bytes()
    boundaries = find_chunk_boundaries(path, num_chunks, specials)
    total: Counter[bytes] = Counter()
    for start, end in zip(boundaries, boundaries[1:], strict=False):
        total += count_pretokens(data[start:end].decode("utf-8"), specials)
    assert total == count_pretokens(text, specials)


def test_train_bpe_reports_timings(tmp_path):
    (tmp_path / "c.txt").write_text("hello hello world")
    timings: dict[str, float] = {}
    train_bpe(tmp_path / "c.txt", 260, [], timings=timings)
    assert set(timings) == {"pretokenize", "merge", "total"}
    assert all(t >= 0 for t in timings.values())


def test_train_bpe_messages_name_the_problem(tmp_path):
    with pytest.raises(FileNotFoundError, match="no-such-corpus.txt"):
        train_bpe(tmp_path / "no-such-corpus.txt", 300, [EOT])
    (tmp_path / "latin1.txt").write_bytes(b"hello w\xf6rld")
    with pytest.raises(ValueError, match=r"latin1\.txt.*offset 7"):
        train_bpe(tmp_path / "latin1.txt", 300, [EOT])
    (tmp_path / "empty.txt").write_text(EOT)
    with pytest.raises(ValueError, match="empty corpus"):
        train_bpe(tmp_path / "empty.txt", 300, [EOT])


# Tokens over a few bytes, the extremes included, so that prefixes and equal parts are common.
_TOKENS = st.lists(st.sampled_from([0, 1, 97, 254, 255]), min_size=1, max_size=3).map(bytes)


@given(pairs=st.lists(st.tuples(_TOKENS, _TOKENS), min_size=2, max_size=30))
def test_descending_keys_order_pairs_of_bytes_in_reverse(pairs):
    # The merge heap breaks ties by these keys: a pair's key is its tokens' keys joined, and the
    # smallest key must be the greatest pair of bytes (prefixes included: (b"a", b"b") < (b"a", b"bc")).
    def pair_key(pair):
        return _descending_key(pair[0]) + _descending_key(pair[1])

    assert sorted(pairs, key=pair_key) == sorted(pairs, reverse=True)
    # A merged token's key is its parts' keys joined without the first one's end mark.
    assert all(
        _descending_key(a + b) == _descending_key(a)[:-1] + _descending_key(b) for a, b in pairs
    )
