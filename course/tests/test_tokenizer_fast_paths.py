"""Fast paths of the tokenizer and the BPE trainer give exactly the readable algorithm's answer.

Encoders cache ids per word and apply merges incrementally; trainers update pair counts locally
around each merge. Those shortcuts go wrong on the inputs checked here: many distinct words
(nothing cached), repeated and overlapping pairs (``aaaa``, ``abab``), very long pre-tokens,
whitespace of every kind, ASCII beside non-ASCII. References are independent: tiktoken built from
the same merges, and a naive trainer that recounts every pair at every step.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import tiktoken
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from course.cases.truths.tokenizers import naive_train_bpe, tiktoken_of
from tests.adapters import get_tokenizer, run_train_bpe

EOT = "<|endoftext|>"
# Letters that make repeated and overlapping pairs, whitespace of every kind (\x1c is whitespace
# to str.isspace but not to the pattern), digits, apostrophes, non-ASCII letters and symbols.
ALPHABET = list("aaabbbeeinst  \t\n\r\x0b\x0c\x1c\xa0\u3000'.,!-0123456789éß日😀")


def english_like(seed: int, num_words: int) -> str:
    """Text with a long tail of distinct made-up words, plus runs that stress merging."""
    rng = random.Random(seed)
    syllables = ["ba", "ab", "aa", "the", "in", "ess", "st", "ne", "ti", "é", "ßa", "aab"]
    words = ["".join(rng.choices(syllables, k=rng.randint(1, 4))) for _ in range(num_words)]
    extras = ["aaaa" * 5, "abab" * 6, "1234567890" * 3, "  ", "\n\n", "it's", "!!", "日本"]
    pieces = [rng.choice(extras) if rng.random() < 0.05 else w for w in words]
    return " ".join(pieces)


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    path = tmp_path_factory.mktemp("fast-paths") / "corpus.txt"
    text = f"\n{EOT}\n".join(english_like(seed, 2000) for seed in range(5))
    path.write_bytes(text.encode("utf-8"))
    return run_train_bpe(path, 700, [EOT])


@pytest.fixture(scope="module")
def reference(trained) -> tiktoken.Encoding:
    vocab, _ = trained
    # tiktoken needs every rank below the vocab size: ids must be bytes, specials, then merges.
    assert sorted(vocab) == list(range(len(vocab)))
    return tiktoken_of(vocab, [EOT])


def test_unseen_words_match_tiktoken(trained, reference) -> None:
    # Fresh seeds: almost every word is new to the tokenizer's caches.
    vocab, merges = trained
    tokenizer = get_tokenizer(vocab, merges, [EOT])
    for seed in (100, 101):
        text = english_like(seed, 3000) + f" {EOT} " + english_like(seed + 50, 100)
        expected = reference.encode(text, allowed_special="all")
        assert tokenizer.encode(text) == expected, (
            f"cold encode differs from tiktoken (seed {seed})"
        )
        assert tokenizer.encode(text) == expected, (
            f"warm encode differs from tiktoken (seed {seed})"
        )


@pytest.mark.parametrize(
    "text",
    [
        "a" * 2001,
        "ab" * 1500 + "a",
        "aab" * 700,
        "9" * 1000 + "1234567890" * 50,
        " " * 777 + "x",
        "\n" * 300 + " \t " * 200,
        "é" * 500 + "ß" * 333,
        "".join(random.Random(3).choices("ab", k=4000)),
    ],
    ids=["a-run", "ab-run", "aab-run", "digits", "spaces", "mixed-space", "non-ascii", "random-ab"],
)
def test_long_pretokens_match_tiktoken(trained, reference, text: str) -> None:
    vocab, merges = trained
    tokenizer = get_tokenizer(vocab, merges, [EOT])
    assert tokenizer.encode(text) == reference.encode(text, allowed_special="all")


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(pieces=st.lists(st.sampled_from([*ALPHABET, EOT, "aaaa", "abab", "the "]), max_size=60))
def test_any_text_matches_tiktoken(trained, reference, pieces: list[str]) -> None:
    vocab, merges = trained
    text = "".join(pieces)
    tokenizer = get_tokenizer(vocab, merges, [EOT])
    expected = reference.encode(text, allowed_special="all")
    assert tokenizer.encode(text) == expected
    assert tokenizer.encode(text) == expected  # again, from the caches


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    words=st.lists(st.text(alphabet="aab", min_size=1, max_size=12), min_size=1, max_size=40),
    vocab_size=st.integers(257, 290),
)
def test_training_with_overlapping_pairs_matches_naive(tmp_path: Path, words, vocab_size) -> None:
    # Runs like "aaaa" and "abab" overlap with themselves: a merge there changes its neighbours'
    # pairs in ways a local count update easily gets wrong.
    text = " ".join(words)
    path = tmp_path / "corpus.txt"
    path.write_text(text, encoding="utf-8")
    _, merges = run_train_bpe(path, vocab_size, [])
    assert merges == naive_train_bpe(text, vocab_size, [])[1]


def test_training_on_many_distinct_words_matches_naive(tmp_path: Path) -> None:
    text = english_like(7, 1500)
    path = tmp_path / "corpus.txt"
    path.write_bytes(text.encode("utf-8"))
    _, merges = run_train_bpe(path, 400, [])
    assert merges == naive_train_bpe(text, 400, [])[1]
