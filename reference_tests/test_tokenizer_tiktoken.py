"""The tokenizer against tiktoken, built offline from the shipped vocabulary (the graded cases'
expected values come from the same reference; here on more text, on random text, and on runs
of repeated characters, where the order of equal-rank merges matters)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
import tiktoken
from hypothesis import example, given, settings
from hypothesis import strategies as st

from course.cases.truths.tokenizers import naive_encode, tiktoken_of
from tests.adapters import get_tokenizer
from tests.cases.shipped import Shipped
from tests.test_tokenizer import SHIPPED, runs, special_tokenizer

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CORPUS = FIXTURES / "corpora" / "stories-400k.txt"
SAMPLES = sorted((FIXTURES / "samples").glob("*.txt"))
EOT = "<|endoftext|>"


def read_text(path: Path) -> str:
    return path.read_bytes().decode("utf-8")  # bytes, so "\r\n" survives


@pytest.fixture(scope="module")
def vocab_and_merges():
    return Shipped().vocab_and_merges


@pytest.fixture(scope="module")
def tokenizer(vocab_and_merges):
    vocab, merges = vocab_and_merges
    return get_tokenizer(dict(vocab), list(merges), [EOT])


@pytest.fixture(scope="module")
def reference(vocab_and_merges):
    return tiktoken_of(vocab_and_merges[0], [EOT])


@pytest.fixture(scope="module")
def mistakes(vocab_and_merges):
    """Two common mistakes, each computed on the text: ``{hint: text -> ids}``."""
    vocab, merges = vocab_and_merges
    as_text = tiktoken_of(vocab, [])
    return {
        "merges are applied latest first: apply the earliest-learned (lowest-rank) merge "
        "first": lambda text: naive_encode(text, vocab, merges[::-1], [EOT]),
        "special tokens are encoded as ordinary text: split the text on them first and give "
        "each its own id": lambda text: as_text.encode(text, disallowed_special=()),
    }


def assert_encodes_like(ids: list[int], expected: list[int], text: str, mistakes) -> None:
    """``ids == expected``, or a failure naming the mistakes whose ids equal ``ids``."""
    if ids == expected:
        return
    first = next((i for i, (a, b) in enumerate(zip(ids, expected, strict=False)) if a != b), None)
    hints = "".join(f"\nhint: {hint}" for hint, encode in mistakes.items() if encode(text) == ids)
    raise AssertionError(
        f"encode gave {len(ids)} ids, tiktoken {len(expected)}; first difference at index "
        f"{first if first is not None else min(len(ids), len(expected))}{hints}"
    )


@pytest.mark.parametrize("path", SAMPLES, ids=[p.name for p in SAMPLES])
def test_tokenizer_matches_tiktoken_on_samples(tokenizer, reference, mistakes, path):
    text = read_text(path)
    ids = tokenizer.encode(text)
    assert_encodes_like(ids, reference.encode(text, allowed_special="all"), text, mistakes)
    assert tokenizer.decode(ids) == text


def test_tokenizer_matches_tiktoken_on_stories(tokenizer, reference, mistakes):
    text = read_text(CORPUS)[:50_000]
    expected = reference.encode(text, allowed_special="all")
    assert_encodes_like(tokenizer.encode(text), expected, text, mistakes)


def test_tokenizer_without_special_tokens_treats_them_as_text(vocab_and_merges, reference):
    vocab, merges = vocab_and_merges
    plain = get_tokenizer(dict(vocab), list(merges))
    text = read_text(FIXTURES / "samples" / "special_tokens.txt")
    assert plain.encode(text) == reference.encode(text, disallowed_special=())
    assert plain.decode(plain.encode(text)) == text


@settings(max_examples=50, deadline=None)
@given(text=st.text(max_size=80))
def test_tokenizer_round_trips_any_text(tokenizer, reference, text):
    ids = tokenizer.encode(text)
    assert tokenizer.decode(ids) == text
    assert ids == reference.encode(text, allowed_special="all")


@cache
def tiktoken_reference() -> tiktoken.Encoding:
    """tiktoken with the fixture vocab as ranks; its BPE merges the lowest rank, leftmost first."""
    return tiktoken_of(SHIPPED.vocab_and_merges[0], [EOT])


@given(text=runs)
@example(text="ooo")
@example(text=" ppp lll bbb fff")
def test_tokenizer_encode_matches_tiktoken_on_runs(text: str) -> None:
    ids = special_tokenizer(EOT).encode(text)
    expected = tiktoken_reference().encode(text, allowed_special="all")
    assert ids == expected, f"encode({text!r}) = {ids}, tiktoken gives {expected}" + (
        "\nhint: inside a pre-token, merge the lowest-rank pair at its leftmost occurrence "
        "first ('ooo' is [oo, o], not [o, oo])"
        if sorted(ids) == sorted(expected)
        else ""
    )
