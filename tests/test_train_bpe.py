"""BPE training beyond the graded cases: worked examples, training to exhaustion (a pair whose
every occurrence was absorbed by another merge is never merged later, worked out by hand), speed,
bad input."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import regex

from . import lazy_adapters
from .adapters import get_tokenizer, run_train_bpe
from .cpu_limit import case_cpu_limit
from .expect import raises_an_error
from .hints import diagnosis_lines
from .localize import diagnosed_if_raised, graded_case_located
from .localize.stages import raises
from .localize.tokenizers import train_bpe_raised
from .measure import (
    HANDOUT_STEPS,
    HANDOUT_WORDS,
    PRETOKEN_PATTERN,
    exhaustion_line,
    handout_merge_line,
    merge_order_line,
    merge_sequence_line,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CORPUS = FIXTURES / "corpora" / "stories-400k.txt"
EOT = "<|endoftext|>"


def write(tmp_path: Path, text: str, name: str = "corpus.txt") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


def handout_merge_counts(merges: object) -> str:
    """The handout's pair counts at the first merge that differs, as a diagnosis line."""
    line = handout_merge_line(merges)
    return diagnosis_lines([line])


def merges_diagnosis(
    merges: object, expected: list[tuple[bytes, bytes]], counts: list[int] | None = None
) -> str:
    """Whether each merge joins tokens that exist, and where the merges leave the expected ones
    (with ``counts``, each expected merge's count worked by hand: whether it was a tie there),
    or whether they are too few or too many."""
    try:
        pairs = [(bytes(a), bytes(b)) for a, b in merges]  # type: ignore[union-attr]
    except Exception:  # noqa: BLE001  (not a list of byte pairs: the assertion says so)
        return ""
    agree = len(pairs) != len(expected) and pairs[: len(expected)] == expected[: len(pairs)]
    line = (
        merge_sequence_line(pairs)
        or merge_order_line(pairs, expected, counts)
        or (exhaustion_line(len(pairs), len(expected)) if agree else "")
    )
    return diagnosis_lines([line])


@graded_case_located("train_bpe")
def test_train_bpe_handout_example(tmp_path):
    # The handout's corpus with whitespace pre-tokenization: separating the words by a special
    # token makes every word exactly one pre-token (no leading space).
    path = write(tmp_path, EOT.join(HANDOUT_WORDS))
    with case_cpu_limit("train_bpe on the handout's example"):
        vocab, merges = run_train_bpe(path, 256 + 1 + 6, [EOT])
    expected = [(a.encode(), b.encode()) for (a, b), _ in HANDOUT_STEPS]
    assert merges == expected, f"merges {merges}{handout_merge_counts(merges)}"
    assert set(vocab.values()) >= {b"st", b"est", b"ow", b"low", b"west", b"ne", EOT.encode()}
    assert len(vocab) == 263


def test_train_bpe_repeated_pairs_in_frequent_pretokens(tmp_path):
    # A pre-token holding the merged pair more than once: every occurrence counts, times the
    # pre-token's count, both for the pairs it gains ("ababab" -> (ab, ab) twice, 5 times over)
    # and for those it keeps ("abeeab" keeps (e, e), 6 times over).
    words = ["ababab"] * 5 + ["abeeab"] * 6 + ["cd"] * 7 + ["fg"] * 4
    text = EOT.join(words)
    vocab, merges = run_train_bpe(write(tmp_path, text), 257 + 6, [EOT])
    # Then "abeeab" is [ab, ee, ab]: (ab, ee) and (ee, ab) tie at 6 and the greater pair of bytes,
    # (ee, ab), wins; (ab, eeab) at 6 beats (abab, ab) at 5 and (f, g) at 4. Each merge's count
    # when made, worked the same way: (a, b) 5*3 + 6*2, (ab, ab) 5*2, (c, d) 7, then the 6s.
    counts = [27, 10, 7, 6, 6, 6]
    expected = [
        (b"a", b"b"),
        (b"ab", b"ab"),
        (b"c", b"d"),
        (b"e", b"e"),
        (b"ee", b"ab"),
        (b"ab", b"eeab"),
    ]
    assert merges == expected, f"merges {merges}{merges_diagnosis(merges, expected, counts)}"
    assert len(vocab) == 263


def test_train_bpe_ties_compare_the_pair_not_its_bytes_joined(tmp_path):
    # Pre-tokens "abc" x2, "az" x2, "ab": (a, b) 3 merges first. Then (ab, c) and (a, z) tie at
    # 2, and the greater pair, compared as (first token, second token), is (ab, c): b"ab" > b"a".
    # Joined into one byte string they would order the other way: b"az" > b"abc".
    text = EOT.join(["abc", "abc", "az", "az", "ab"])
    vocab, merges = run_train_bpe(write(tmp_path, text), 256 + 1 + 3, [EOT])
    expected = [(b"a", b"b"), (b"ab", b"c"), (b"a", b"z")]
    assert merges == expected, f"merges {merges}{merges_diagnosis(merges, expected, [3, 2, 2])}"


def test_train_bpe_ties_with_the_same_first_token_compare_the_second(tmp_path):
    # Pre-tokens "ab" x2 and "ac" x2: (a, b) and (a, c) tie at 2 and share their first token, so
    # the second decides: b"c" > b"b", (a, c) first. A key built from the first token alone ties.
    text = EOT.join(["ab", "ab", "ac", "ac"])
    vocab, merges = run_train_bpe(write(tmp_path, text), 256 + 1 + 2, [EOT])
    expected = [(b"a", b"c"), (b"a", b"b")]
    assert merges == expected, f"merges {merges}{merges_diagnosis(merges, expected, [2, 2])}"


# Ties whose first tokens are both merged tokens: all their bytes decide, not one part of them.
# "abz" x2, "acb" x2, "ab" x3, "ac" x2: (a, b) 5 and (a, c) 4 merge first; then (ab, z) and
# (ac, b) tie at 2, and b"ac" > b"ab" (their last bytes decide; their first ones agree). With
# "cba" x2 and "cb" x2 instead, (c, b) 4 merges second, and (cb, a) beats (ab, z): b"cb" > b"ab"
# (their first bytes decide; their last ones agree). And two pairs a merge has just made, with
# the same first token: "abc" x2, "abd" x2, "ab" x3 makes ab, then (ab, d) beats (ab, c).
MERGED_TOKEN_TIES = {
    "last_bytes_decide": (
        ["abz"] * 2 + ["acb"] * 2 + ["ab"] * 3 + ["ac"] * 2,
        [(b"a", b"b"), (b"a", b"c"), (b"ac", b"b"), (b"ab", b"z")],
        [5, 4, 2, 2],
    ),
    "first_bytes_decide": (
        ["abz"] * 2 + ["cba"] * 2 + ["ab"] * 3 + ["cb"] * 2,
        [(b"a", b"b"), (b"c", b"b"), (b"cb", b"a"), (b"ab", b"z")],
        [5, 4, 2, 2],
    ),
    "new_pairs_second_tokens_decide": (
        ["abc"] * 2 + ["abd"] * 2 + ["ab"] * 3,
        [(b"a", b"b"), (b"ab", b"d"), (b"ab", b"c")],
        [7, 2, 2],
    ),
}


@pytest.mark.parametrize(
    ("words", "expected", "counts"), MERGED_TOKEN_TIES.values(), ids=MERGED_TOKEN_TIES
)
def test_train_bpe_ties_between_merged_tokens_compare_all_their_bytes(
    tmp_path, words, expected, counts
):
    vocab_size = 256 + 1 + len(expected)
    vocab, merges = run_train_bpe(write(tmp_path, EOT.join(words)), vocab_size, [EOT])
    diagnosis = merges_diagnosis(merges, expected, counts)
    assert merges == expected, f"merges {merges}{diagnosis}"


@graded_case_located("train_bpe")
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


# A trainer may take this many times as long as the plain-Python pass below. Measured here: the
# reference about 0.4x, a trainer that recounts every pair after each merge (upstream's "toy
# implementation", which its 1.5 s limit fails) about 15x.
SPEED_RATIO_LIMIT = 6.0


def seconds(run) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def count_pretokens(path: Path) -> None:
    """What every trainer does first, in plain Python: read the corpus, split it on the special
    token and count its pre-tokens as tuples of bytes."""
    counts: dict[tuple[int, ...], int] = {}
    for chunk in path.read_text(encoding="utf-8").split(EOT):
        for match in regex.finditer(PRETOKEN_PATTERN, chunk):
            key = tuple(match.group().encode("utf-8"))
            counts[key] = counts.get(key, 0) + 1


def test_train_bpe_speed():
    # Not a wall-clock limit (machines and their load differ): the trainer against a plain-Python
    # pass over the same corpus timed in the same run, each the best of two runs.
    def train() -> None:
        assert len(run_train_bpe(CORPUS, 500, [EOT])[0]) == 500

    baseline = min(seconds(lambda: count_pretokens(CORPUS)) for _ in range(2))
    elapsed = seconds(train)
    if elapsed > SPEED_RATIO_LIMIT * baseline:  # a second try, in case the machine was busy
        elapsed = min(elapsed, seconds(train))
    ratio = elapsed / baseline
    assert ratio <= SPEED_RATIO_LIMIT, (
        f"train_bpe took {elapsed:.2f}s on {CORPUS.name} at vocab 500: {ratio:.1f} times the "
        f"{baseline:.2f}s this machine takes to read that corpus and count its pre-tokens in plain "
        f"Python (limit {SPEED_RATIO_LIMIT:g}x, so {ratio / SPEED_RATIO_LIMIT:.1f}x too slow; a "
        "trainer that recounts every pair after each merge takes about 15x): count pre-tokens "
        "once, and after each merge update only the counts of pairs in pre-tokens that changed"
    )


def test_train_bpe_stops_when_nothing_is_left_to_merge(tmp_path):
    vocab, merges = run_train_bpe(write(tmp_path, "ab ab"), 1000, [])
    expected = [(b"a", b"b"), (b" ", b"ab")]
    assert merges == expected, f"merges {merges}{merges_diagnosis(merges, expected, [2, 1])}"
    assert len(vocab) == 258


def refused_only_at_the_smallest_size(path: Path) -> list[str]:
    """Does the trainer raise at vocab_size=257 with one special token, and run at 258?"""
    if not raises(lambda: run_train_bpe(path, 257, [EOT]), tries=1):
        return []
    if raises(lambda: run_train_bpe(path, 258, [EOT]), tries=1):
        return []  # it raises there too: nothing located
    return [
        "your train_bpe raised at vocab_size=257 with 1 special token (the 256 bytes and the "
        "special token, no merge) but runs at 258: the smallest valid vocab_size is 256 + the "
        "number of special tokens"
    ]


def test_train_bpe_vocab_of_exactly_bytes_and_specials(tmp_path):
    path = write(tmp_path, "aaaa")
    with diagnosed_if_raised(lambda: refused_only_at_the_smallest_size(path)):
        vocab, merges = run_train_bpe(path, 257, [EOT])
    assert merges == [] and len(vocab) == 257


# --- robustness (advice, not graded): bad input gets a clear error --------------------------


# --- BPE training until nothing is left ---------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected, counts",
    [
        # Pre-tokens "abc", " abc". Counts (a,b) 2, (b,c) 2, (' ',a) 1. The tie goes to the
        # greater pair (b,c); "a bc" then leaves no (a,b) at all, so (a,b) and (' ',a) never
        # come back once a+bc and ' '+abc are merged.
        ("abc abc", [(b"b", b"c"), (b"a", b"bc"), (b" ", b"abc")], [2, 2, 1]),
        # Pre-tokens "xab", " xa" x2, " ab". (x,a) 3 merges first and takes one (a,b), which
        # drops from 2 to 1 but must still be merged: after ' '+xa (2) the count-1 pairs go
        # greatest first: (xa,b), (a,b), then (' ',ab).
        (
            "xab xa xa ab",
            [(b"x", b"a"), (b" ", b"xa"), (b"xa", b"b"), (b"a", b"b"), (b" ", b"ab")],
            [3, 2, 1, 1, 1],
        ),
    ],
)
def test_train_bpe_to_exhaustion_tracks_changing_counts(tmp_path, text, expected, counts) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(text, encoding="utf-8")
    with diagnosed_if_raised(lambda: train_bpe_raised(lazy_adapters, {}, {})):
        vocab, merges = run_train_bpe(corpus, 1000, [])
    assert merges == expected, f"merges on {text!r}: {merges}, expected {expected}\nhint: " + (
        merge_order_line(merges, expected, counts) or exhaustion_line(len(merges), len(expected))
    )
    tokens = set(vocab.values())
    missing = [b for b in range(256) if bytes([b]) not in tokens]
    assert len(vocab) == 256 + len(expected), f"vocab of {len(vocab)} tokens" + (
        f"\nhint: the vocab holds the 256 single bytes; yours lacks {len(missing)} of them "
        f"(e.g. {bytes([missing[0]])!r}), beside the {len(expected)} merged tokens"
        if missing
        else ""
    )


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
        pytest.fail(
            f"train_bpe accepted vocab_size={vocab_size} with {len(specials)} special token(s)\n"
            f"hint: the vocab must hold the 256 bytes and every special token, so vocab_size "
            f"must be at least {256 + len(specials)}; yours returned a vocab for "
            f"vocab_size={vocab_size} instead of raising"
        )


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
