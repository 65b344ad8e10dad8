"""BPE training: the handout's example, agreement with a naive trainer, speed, bad input."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import regex
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from .adapters import get_tokenizer, run_train_bpe
from .cases.tokenizers import GPT2_PATTERN, naive_train_bpe
from .expect import raises_an_error
from .hints import matching_hints

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CORPUS = FIXTURES / "corpora" / "stories-400k.txt"
EOT = "<|endoftext|>"


def write(tmp_path: Path, text: str, name: str = "corpus.txt") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


def test_train_bpe_handout_example(tmp_path):
    # The handout's corpus with whitespace pre-tokenization: separating the words by a special
    # token makes every word exactly one pre-token (no leading space).
    words = ["low"] * 5 + ["lower"] * 2 + ["widest"] * 3 + ["newest"] * 6
    path = write(tmp_path, EOT.join(words))
    vocab, merges = run_train_bpe(path, 256 + 1 + 6, [EOT])
    assert merges == [
        (b"s", b"t"),
        (b"e", b"st"),
        (b"o", b"w"),
        (b"l", b"ow"),
        (b"w", b"est"),
        (b"n", b"e"),
    ]
    assert set(vocab.values()) >= {b"st", b"est", b"ow", b"low", b"west", b"ne", EOT.encode()}
    assert len(vocab) == 263


def assert_same_vocab(vocab: dict[int, bytes], expected: dict[int, bytes]) -> None:
    """Vocabularies compared as the handout compares them: the same set of byte strings under
    distinct ids; which id each token gets is your choice."""
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


def test_train_bpe_repeated_pairs_in_frequent_pretokens(tmp_path):
    # A pre-token holding the merged pair more than once: every occurrence counts, times the
    # pre-token's count, both for the pairs it gains ("ababab" -> (ab, ab) twice, 5 times over)
    # and for those it keeps ("abeeab" keeps (e, e), 6 times over).
    words = ["ababab"] * 5 + ["abeeab"] * 6 + ["cd"] * 7 + ["fg"] * 4
    text = EOT.join(words)
    vocab, merges = run_train_bpe(write(tmp_path, text), 257 + 6, [EOT])
    assert merges[:4] == [(b"a", b"b"), (b"ab", b"ab"), (b"c", b"d"), (b"e", b"e")]
    expected_vocab, expected_merges = naive_train_bpe(text, 257 + 6, [EOT])
    assert merges == expected_merges
    assert_same_vocab(vocab, expected_vocab)


def test_train_bpe_output_drives_the_tokenizer(tmp_path):
    """The trainer's (vocab, merges) are exactly what the tokenizer takes: text from the corpus
    round-trips, special tokens get their own ids, and the merges shorten the encoding."""
    text = CORPUS.read_bytes()[:20_000].decode("utf-8", errors="ignore")
    vocab, merges = run_train_bpe(write(tmp_path, text), 400, [EOT])
    tokenizer = get_tokenizer(vocab, merges, [EOT])
    sample = text[-3000:]
    ids = tokenizer.encode(sample)
    assert tokenizer.decode(ids) == sample
    eot_ids = {i for i, token in vocab.items() if token == EOT.encode()}
    assert sum(i in eot_ids for i in ids) == sample.count(EOT)
    assert len(ids) < 0.6 * len(sample.encode("utf-8"))


def test_train_bpe_speed():
    # The handout's coarse check (its reference takes about 0.4 s); the only timed test.
    start = time.perf_counter()
    vocab, _ = run_train_bpe(CORPUS, 500, [EOT])
    elapsed = time.perf_counter() - start
    assert len(vocab) == 500
    assert elapsed < 1.5, (
        f"train_bpe took {elapsed:.2f}s on {CORPUS.name} at vocab 500 (limit 1.5s)"
    )


def test_train_bpe_stops_when_nothing_is_left_to_merge(tmp_path):
    vocab, merges = run_train_bpe(write(tmp_path, "ab ab"), 1000, [])
    assert merges == [(b"a", b"b"), (b" ", b"ab")]
    assert len(vocab) == 258


def test_train_bpe_vocab_of_exactly_bytes_and_specials(tmp_path):
    vocab, merges = run_train_bpe(write(tmp_path, "aaaa"), 257, [EOT])
    assert merges == [] and len(vocab) == 257


# --- robustness (advice, not graded): bad input gets a clear error --------------------------


@pytest.mark.robustness
def test_train_bpe_vocab_layout(tmp_path):
    """Our layout (bytes 0-255, then the special tokens, then merges in order); the handout
    leaves the ids to you."""
    path = write(tmp_path, "the cat<|endoftext|> the hat<|pad|>")
    vocab, merges = run_train_bpe(path, 262, [EOT, "<|pad|>"])
    assert [vocab[i] for i in range(256)] == [bytes([i]) for i in range(256)]
    assert vocab[256] == EOT.encode() and vocab[257] == b"<|pad|>"
    assert [vocab[258 + i] for i in range(len(merges))] == [a + b for a, b in merges]
    assert sorted(vocab) == list(range(len(vocab)))


@pytest.mark.robustness
def test_train_bpe_missing_file_names_the_path(tmp_path):
    with raises_an_error(match="no-such-corpus.txt"):
        run_train_bpe(tmp_path / "no-such-corpus.txt", 300, [EOT])


@pytest.mark.robustness
def test_train_bpe_directory_is_not_a_corpus(tmp_path):
    with raises_an_error():
        run_train_bpe(tmp_path, 300, [EOT])


@pytest.mark.robustness
@pytest.mark.parametrize(
    ("vocab_size", "specials"), [(255, []), (256, [EOT]), (257, [EOT, "<|pad|>"]), (0, [])]
)
def test_train_bpe_vocab_too_small(tmp_path, vocab_size, specials):
    with raises_an_error():
        run_train_bpe(write(tmp_path, "some text"), vocab_size, specials)


@pytest.mark.robustness
@pytest.mark.parametrize("text", ["", EOT, EOT * 3])
def test_train_bpe_empty_corpus(tmp_path, text):
    with raises_an_error():
        run_train_bpe(write(tmp_path, text), 300, [EOT])


@pytest.mark.robustness
def test_train_bpe_invalid_utf8_raises(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes(b"hello w\xf6rld")
    with raises_an_error():
        run_train_bpe(path, 300, [EOT])


@pytest.mark.robustness
@pytest.mark.parametrize("specials", [[""], [EOT, EOT]], ids=["empty", "duplicate"])
def test_train_bpe_bad_special_tokens(tmp_path, specials):
    with raises_an_error():
        run_train_bpe(write(tmp_path, "text"), 300, specials)
