"""The reference tokenizer's shortcuts (instructor-only: they are internals, not the handout's API).

* the standard-library patterns stand in for the ``regex`` ones exactly where they are used;
* a pre-token on its own pre-tokenizes to itself (the tokenizer's one cache holds words and
  pre-tokens alike);
* a tokenizer whose cache overflows and empty themselves gives the same ids;
* ``find_chunk_boundaries`` and ``read_text_range`` keep their old import path.
"""

from __future__ import annotations

import random
import re
import sys

import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from cs336_basics.pretokenization import GPT2_PRETOKENIZER, WHITESPACE, pretokenize
from cs336_basics.tokenizer import Tokenizer


def test_whitespace_class_is_the_patterns_whitespace() -> None:
    ours = re.compile(f"[{WHITESPACE}]")
    theirs = regex.compile(r"\s")
    differ = [
        hex(code)
        for code in range(sys.maxunicode + 1)
        if bool(ours.match(chr(code))) != bool(theirs.match(chr(code)))
    ]
    assert differ == []


@settings(max_examples=300, deadline=None)
@given(text=st.text(st.characters(max_codepoint=127), max_size=60))
def test_ascii_pretokenizer_agrees_with_the_gpt2_pattern(text: str) -> None:
    assert pretokenize(text) == GPT2_PRETOKENIZER.findall(text)


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(
        st.sampled_from(list(" \t\n\r\x0b\x0c\x1c\xa0\u3000'sdtlmvreA1².,!é日")), max_size=40
    )
    | st.text(max_size=40)
)
def test_a_pretoken_alone_is_one_pretoken(text: str) -> None:
    for pretoken in GPT2_PRETOKENIZER.findall(text):
        assert GPT2_PRETOKENIZER.findall(pretoken) == [pretoken]


def test_ascii_pretokenizer_agrees_on_every_three_characters() -> None:
    ascii_chars = [chr(code) for code in range(128)]
    for a in ascii_chars:
        for b in ascii_chars:
            texts = [a + b + c for c in "a1 \n'.s"]
            assert [pretokenize(t) for t in texts] == [GPT2_PRETOKENIZER.findall(t) for t in texts]


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
