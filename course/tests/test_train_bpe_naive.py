"""BPE training against a naive trainer (every pair recounted at every step): random corpora
over small alphabets, where repeated pairs and exact ties are common, random corpora of special
tokens that are easy to cut, and the stories."""

from __future__ import annotations

from pathlib import Path

import regex
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from course.cases.truths.tokenizers import GPT2_PATTERN, naive_train_bpe
from tests.adapters import run_train_bpe
from tests.hints import matching_hints

FIXTURES = Path(__file__).resolve().parent.parent.parent / "fixtures"
CORPUS = FIXTURES / "corpora" / "stories-400k.txt"
EOT = "<|endoftext|>"


def write(tmp_path: Path, text: str, name: str = "corpus.txt") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


def assert_same_vocab(vocab: dict[int, bytes], expected: dict[int, bytes]) -> None:
    """The same set of byte strings under distinct ids (which id each gets is free)."""
    assert len(vocab) == len(expected), f"{len(vocab)} tokens, expected {len(expected)}"
    assert set(vocab.values()) == set(expected.values())


# Small alphabets make repeated pairs and exact ties common; the specials split the text.
_ALPHABET = st.sampled_from(
    ["a", "b", "c", " ", "  ", "\n", "'s", "é", "🙂", "1", "2", ".", "ab", "ba", EOT]
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(pieces=st.lists(_ALPHABET, max_size=60), extra=st.integers(0, 40))
@example(pieces=["a"] * 9, extra=10)  # overlapping pairs: "aaaa..."
@example(pieces=["ab", "ba"] * 6, extra=10)  # every pair tied
@example(pieces=[EOT] * 4, extra=5)  # nothing but special tokens
@example(pieces=["é", "🙂", " ", "é"] * 3, extra=20)  # merges inside multi-byte characters
def test_train_bpe_matches_naive_trainer(tmp_path, pieces, extra):
    text = "".join(pieces)
    assume(regex.sub(regex.escape(EOT), "", text))  # the empty corpus has its own test
    path = write(tmp_path, text)
    vocab_size = 257 + extra
    expected_vocab, expected_merges = naive_train_bpe(text, vocab_size, [EOT])
    vocab, merges = run_train_bpe(path, vocab_size, [EOT])
    assert merges == expected_merges
    assert_same_vocab(vocab, expected_vocab)


# Special tokens that are easy to cut: "<|y|>" also sits inside "<|x|><|y|>" (at offset 5), and
# the others hold a space or a newline. (tests/cases/special_tokens.py trains on a file of
# several MB of them, which trainers that pre-tokenize in parallel cut into chunks.)
_TRICKY_SPECIALS = ["<|y|>", "<|x|><|y|>", "<| a b |>", "<|s\nt|>"]
_TRICKY = st.sampled_from(["a", "b", " ", "\n", "ab", "<|", "|>", "x", *_TRICKY_SPECIALS])


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(pieces=st.lists(_TRICKY, max_size=40), extra=st.integers(0, 30))
@example(pieces=["<|x|><|y|>", "a", "<| a b |>", "<|s\nt|>"] * 3, extra=30)
def test_train_bpe_keeps_tricky_special_tokens_whole(tmp_path, pieces, extra):
    text = "".join(pieces)
    assume(regex.sub("|".join(map(regex.escape, _TRICKY_SPECIALS[::-1])), "", text))
    expected_vocab, expected_merges = naive_train_bpe(text, 261 + extra, _TRICKY_SPECIALS)
    vocab, merges = run_train_bpe(write(tmp_path, text), 261 + extra, _TRICKY_SPECIALS)
    assert merges == expected_merges, (
        f"merges {merges}, the naive trainer's {expected_merges}"
        + matching_hints(
            merges,
            {
                "special tokens were pre-tokenized as text: split on every special token "
                "(longest first) before pre-tokenizing": "no_special_split"
            },
            lambda ours, m: ours == naive_train_bpe(text, 261 + extra, _TRICKY_SPECIALS, m)[1],
        )
    )
    assert_same_vocab(vocab, expected_vocab)


def test_train_bpe_matches_naive_trainer_on_stories(tmp_path):
    text = CORPUS.read_bytes()[:6000].decode("utf-8", errors="ignore")
    path = write(tmp_path, text)
    vocab, merges = run_train_bpe(path, 400, [EOT])
    expected_vocab, expected_merges = naive_train_bpe(text, 400, [EOT])
    if merges != expected_merges:
        first = next(
            i for i, (a, b) in enumerate(zip(merges, expected_merges, strict=False)) if a != b
        )
        mistakes = {
            "break frequency ties toward the lexicographically GREATER pair of bytes": "ties_to_smaller",
            "split the text on special tokens before pre-tokenizing, so no merge crosses them": "no_special_split",
        }
        hints = matching_hints(
            merges, mistakes, lambda ours, m: ours == naive_train_bpe(text, 400, [EOT], m)[1]
        )
        # Each distinct pre-token once (each alone between special tokens): what a trainer
        # that counts a pair once per pre-token, not once per occurrence, learns from the text.
        distinct = EOT.join(sorted(set(regex.findall(GPT2_PATTERN, text.replace(EOT, "\n")))))
        if merges == naive_train_bpe(distinct, 400, [EOT])[1]:
            hints += (
                "\nhint: your merges are what counting each distinct pre-token once gives: "
                "weight each pair by how often its pre-token occurs in the corpus"
            )
        raise AssertionError(
            f"merge {first} is {merges[first]}, the naive trainer's is {expected_merges[first]}{hints}"
        )
    assert_same_vocab(vocab, expected_vocab)
