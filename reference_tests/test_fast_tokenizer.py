"""``FastTokenizer`` (compiled merges, words learned in batches) gives exactly the reference's ids.

Its shortcuts are cutting text at spaces (wrong where whitespace precedes a space), joining new
words to pre-tokenize them in one pass (wrong at a word that ends in whitespace), packing every
pre-token's merges into one array (wrong at an off-by-one), and caches that fill up. The inputs
below aim at each; the references are the readable ``Tokenizer`` and tiktoken built from the
same merges.
"""

from __future__ import annotations

import itertools
import os
import pickle
import random
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.english import generate_english
from course.cases.truths.tokenizers import tiktoken_of
from cs336_basics.pretokenization import WHITESPACE, gpt2_pretokenizer
from cs336_basics.runner.compiled.fast_tokenizer import FastTokenizer
from cs336_basics.runner.compiled.fast_tokenizer_kernels import (
    HEAP_ABOVE,
    WordTable,
    ascii_pretoken_starts,
    ends_in_whitespace,
    find_words,
)
from cs336_basics.runner.encode_file import encode_file
from cs336_basics.tokenizer import Tokenizer
from cs336_basics.tokenizer_files import load_merges, load_vocab
from tests.conftest import FIXTURES

EOT = "<|endoftext|>"
SPECIALS = [EOT, "<|pad|>"]
# Whitespace of every kind next to spaces (two spaces, indented lines, no-break and ideographic
# spaces, \x85), \x1c (whitespace to str.isspace, a symbol to the pattern), letters, digits,
# contractions, punctuation and non-ASCII text.
ALPHABET = list("  \t\n\r\x0b\x0c\x1c\x85\xa0\u2003\u3000abet'sdl.,!-19éß日😀")


@pytest.fixture(scope="module")
def vocab_and_merges() -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """The fixture tokenizer, plus merges of whitespace: without them, cutting a pre-token of
    whitespace in two would give the same ids and go unnoticed."""
    directory = FIXTURES / "tokenizer"
    vocab, merges = load_vocab(directory / "vocab.json"), load_merges(directory / "merges.txt")
    whitespace = [b" ", b"\n", b"\t", b"\r", b"\n ", b"  ", b" \n"]
    for left in whitespace:
        for right in whitespace[:4]:
            if left + right not in vocab.values():
                merges.append((left, right))
                vocab[len(vocab)] = left + right
    return vocab, merges


@pytest.fixture(scope="module")
def fast(vocab_and_merges) -> FastTokenizer:
    return FastTokenizer(*vocab_and_merges, SPECIALS)


@pytest.fixture(scope="module")
def reference(vocab_and_merges) -> Tokenizer:
    return Tokenizer(*vocab_and_merges, SPECIALS)


def byte_vocab_with(merges: list[tuple[bytes, bytes]]) -> dict[int, bytes]:
    """The 256 bytes, then one token per merge (a merge that makes a token twice adds it once)."""
    vocab = {i: bytes([i]) for i in range(256)}
    for left, right in merges:
        if left + right not in vocab.values():
            vocab[len(vocab)] = left + right
    return vocab


@pytest.fixture(params=["kernel", "python"])
def merges_by(request, monkeypatch) -> str:
    """Small batches of new words are merged in Python, larger ones by the kernel: run both."""
    import cs336_basics.runner.compiled.fast_tokenizer as module

    if request.param == "kernel":
        monkeypatch.setattr(module, "_SMALL_BATCH", 0)
    return request.param


def test_english_with_many_new_words_matches_tiktoken(vocab_and_merges, fast) -> None:
    text = generate_english(300_000, seed=7)  # a long tail of unseen words, some non-ASCII
    expected = tiktoken_of(vocab_and_merges[0], SPECIALS).encode(text, allowed_special="all")
    fast._new_cache()
    assert fast.encode(text) == expected  # learning every word
    assert fast.encode(text) == expected  # every word cached


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(pieces=st.lists(st.sampled_from([*ALPHABET, *SPECIALS, "abab", "the "]), max_size=80))
def test_any_text_matches_the_reference(fast, reference, merges_by, pieces: list[str]) -> None:
    text = "".join(pieces)
    expected = reference.encode(text)
    fast._new_cache()
    assert fast.encode(text) == expected
    assert fast.encode(text) == expected


EDGE_TEXTS = [
    "",
    " ",
    "   ",
    "  leading and trailing  ",
    "x  y   z    w",
    "line\n  indented\n\tand tabbed \n",
    "a\n \nb\n \nc\n \nd\n",  # words that start and end with whitespace
    "no\u3000 break\xa0 here\x85 there",
    EOT,
    f"{EOT}{EOT} a{EOT}  {EOT}b ",
    "a" * 3000 + " " + "ab" * 1000,  # pre-tokens longer than the kernel's first buffer
    "日本語のテキスト 😀😀 ok",
]


@pytest.mark.parametrize("text", EDGE_TEXTS)
def test_edge_texts_match_the_reference(fast, reference, merges_by, text: str) -> None:
    fast._new_cache()
    assert fast.encode(text) == reference.encode(text)


@pytest.mark.parametrize("group_characters", [1, 3, 8])
def test_long_pieces_are_cut_only_where_a_pretoken_ends(
    fast, reference, monkeypatch, group_characters: int
) -> None:
    # Pieces longer than a group are cut into parts before a space that follows non-whitespace;
    # cut anywhere else (inside a run of whitespace, after a space), the ids would change.
    import cs336_basics.runner.compiled.fast_tokenizer as module

    monkeypatch.setattr(module, "_GROUP_CHARACTERS", group_characters)
    rng = random.Random(group_characters)
    texts = EDGE_TEXTS + ["".join(rng.choices([*ALPHABET, "the ", "  "], k=300)) for _ in range(20)]
    for text in texts:
        fast._new_cache()
        assert fast.encode(text) == reference.encode(text), repr(text)


def test_cached_words_are_reused_in_other_orders(fast, reference, merges_by) -> None:
    # Words learned together must each get exactly their own ids: reusing them in another order
    # (and after other words) shows ids that leaked from one word into its neighbour.
    words = ["a", "\nb\n", "\nc\n", "\nd\n", "e.\t", "f", "\u3000g", "h\xa0"]
    fast._new_cache()
    for seed in range(4):
        random.Random(seed).shuffle(words)
        text = " ".join(words)
        assert fast.encode(text) == reference.encode(text), repr(text)
    # Pieces whose last word starts and ends with whitespace: learned together, such words
    # would run into each other (and in any order, some two of them meet).
    text = EOT.join(f"x \n{letter}\n" for letter in "bcdefg")
    assert fast.encode(text) == reference.encode(text)


def test_words_ending_in_whitespace_are_pretokenized_alone(merges_by) -> None:
    # A document's last word can end in whitespace (" a\u3000"). Joined before pre-tokenizing
    # with the next new word, " \né0" (a space, then more whitespace), "\u3000 " would be one
    # pre-token instead of two; the ids show it where a merge joins the two, as here for every
    # whitespace character of the pattern and a space.
    pattern = re.compile(f"[{WHITESPACE}]")
    characters = list(filter(pattern.fullmatch, map(chr, range(0x3001))))
    merges = []
    for character in characters:
        encoded = character.encode("utf-8")
        for end in range(2, len(encoded) + 1):
            merges.append((encoded[: end - 1], encoded[end - 1 : end]))
        merges.append((encoded, b" "))
    merges = list(dict.fromkeys(merges))
    vocab = byte_vocab_with(merges)
    documents = []
    for i, character in enumerate(characters):
        letter = "b" if character.isascii() else "é"  # learned in the same class as " a" + it
        documents += [f"x a{character}", f" \n{letter}{i}"]
    text = EOT.join(documents)
    fast = FastTokenizer(vocab, merges, [EOT])
    assert fast.encode(text) == Tokenizer(vocab, merges, [EOT]).encode(text)


def test_groups_and_full_caches_give_the_same_ids(vocab_and_merges, reference, monkeypatch) -> None:
    # Small groups and a cache that overflows within a group, across groups and between calls.
    import cs336_basics.runner.compiled.fast_tokenizer as module

    monkeypatch.setattr(module, "_GROUP_CHARACTERS", 500)
    tiny = type("TinyCacheFastTokenizer", (FastTokenizer,), {"CACHE_SIZE": 50})(
        *vocab_and_merges, SPECIALS
    )
    rng = random.Random(0)
    text = EOT.join(generate_english(20_000, seed=rng.randrange(100)) for _ in range(3))
    expected = reference.encode(text)
    assert tiny.encode(text) == expected
    assert tiny.encode(text) == expected
    # Emptied when full: it holds about one group's words, not the text's.
    assert len(tiny._cache) < len(set(text.split(" "))) / 4
    assert tiny.encode(text[:5000]) == expected[: len(reference.encode(text[:5000]))]


def test_known_words_are_found_not_learned_again(fast, reference) -> None:
    # Each distinct word is one entry of the table, found again in any order (the table is
    # rehashed several times while the first text is learned): a lookup that misses a known word
    # still gives the right ids, so only the table's size shows it.
    text = generate_english(60_000, seed=13).replace(EOT, " ")
    words = sorted(set(text.split()))
    rng = random.Random(13)
    fast._new_cache()
    for order in range(3):
        text = "".join(f" {word}" for word in words)
        assert fast.encode(text) == reference.encode(text)
        assert len(fast._cache) == len(words) > 2000, order
        rng.shuffle(words)


def test_tables_that_start_small_grow_without_losing_words(
    vocab_and_merges, reference, monkeypatch
) -> None:
    # Tables (of words and of pre-tokens) with room for 2 entries and 8 bytes and ids, fed groups
    # of about 60 words: their entry arrays, hash slots and both arenas grow many times, each time
    # by what is already used plus what the group may add.
    import cs336_basics.runner.compiled.fast_tokenizer as module

    monkeypatch.setattr(module, "_GROUP_CHARACTERS", 300)

    class SmallTables(FastTokenizer):
        def _new_cache(self) -> None:
            self._cache = WordTable(entries=2, arena=8)
            self._pretoken_cache = WordTable(entries=2, arena=8)

    tokenizer = SmallTables(*vocab_and_merges, SPECIALS)
    text = generate_english(40_000, seed=17)
    expected = reference.encode(text)
    assert tokenizer.encode(text) == expected
    words, pretokens = len(tokenizer._cache), len(tokenizer._pretoken_cache)
    assert tokenizer.encode(text) == expected
    assert len(tokenizer._cache) == words > 1000
    assert len(tokenizer._pretoken_cache) == pretokens > 500


@pytest.mark.parametrize("id_objects", [True, False], ids=["made-ahead", "tolist"])
def test_ids_are_python_ints_either_way(vocab_and_merges, reference, monkeypatch, id_objects):
    # The list of ids is built from ints made ahead, or (for a vocabulary of huge ids) by
    # ``tolist``: the same plain ints both ways, never numpy scalars.
    import cs336_basics.runner.compiled.fast_tokenizer as module

    if not id_objects:
        monkeypatch.setattr(module, "_MOST_ID_OBJECTS", 0)
    fast = FastTokenizer(*vocab_and_merges, SPECIALS)
    assert (fast._id_objects is None) != id_objects
    text = generate_english(20_000, seed=3)
    ids = fast.encode(text)
    assert ids == reference.encode(text)
    assert {type(i) for i in ids} == {int}


def fnv1a_64(data: bytes) -> int:
    value = 0xCBF29CE484222325
    for byte in data:
        value = ((value ^ byte) * 0x100000001B3) % (1 << 64)
    return value


def test_words_with_the_same_hash_keep_their_own_ids(fast, reference, merges_by) -> None:
    # Two words of the same length and the same 64-bit FNV-1a hash (found by a cycle search over
    # 17-byte words): the table must compare their bytes, not trust the hash.
    first, second = " lfmnfinhopegiiif", " kiamecmmbgkknpgd"
    assert fnv1a_64(first.encode()) == fnv1a_64(second.encode()) and len(first) == len(second)
    fast._new_cache()
    for text in ["x" + first, "x" + second, "x" + second + first, "x" + first + second]:
        assert fast.encode(text) == reference.encode(text), text
    assert len(fast._cache) == 3  # "x" and the two words


def test_the_word_table_never_holds_more_than_its_size(vocab_and_merges, reference, monkeypatch):
    # Groups of about 100 words, a table of 400: it is emptied before a group that would not fit,
    # so it never holds more than 400 words, yet it is not emptied at every group.
    import cs336_basics.runner.compiled.fast_tokenizer as module

    monkeypatch.setattr(module, "_GROUP_CHARACTERS", 500)

    class Recording(FastTokenizer):
        CACHE_SIZE = 400
        sizes: list[int] = []

        def _encode_group(self, group, ids) -> None:
            super()._encode_group(group, ids)
            self.sizes.append(len(self._cache))

    tokenizer = Recording(*vocab_and_merges, SPECIALS)
    tokenizer.sizes = []  # not the warm-up's
    text = generate_english(30_000, seed=11)
    assert tokenizer.encode(text) == reference.encode(text)
    sizes = tokenizer.sizes
    assert max(sizes) <= 400
    assert any(after < before for before, after in zip(sizes, sizes[1:], strict=False))
    assert max(sizes) > 250


def test_pair_keys_of_the_largest_id_do_not_collide(merges_by) -> None:
    # The rank table keys a pair (left, right) as left * width + right, so width must exceed every
    # id: with width = the largest id, (32, 257) would share the key of (33, 0), the first merge.
    # Here id 0 is a byte and the largest id a merged token, as in GPT-2's vocabulary.
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"!\x00", 257: b"??"}
    merges = [(b"!", b"\x00"), (b"?", b"?")]
    fast, reference = FastTokenizer(vocab, merges), Tokenizer(vocab, merges)
    assert reference.encode(" ??") == [32, 257]
    assert fast.encode(" ??") == [32, 257]


def test_merges_out_of_rank_order_match_the_reference(merges_by) -> None:
    # A merge list tiktoken could not express: "bc" is ranked before the "ab" it competes with,
    # a pair repeats (its first rank counts) and a token is made by two different merges.
    merges = [(b"b", b"c"), (b"a", b"b"), (b"a", b"bc"), (b"ab", b"c"), (b"b", b"c"), (b" ", b"a")]
    vocab = byte_vocab_with(merges)
    texts = ["abc", " abc abcabc", "ababab bcbc", " a ab abc"]
    fast, reference = FastTokenizer(vocab, merges), Tokenizer(vocab, merges)
    assert [fast.encode(t) for t in texts] == [reference.encode(t) for t in texts]


def test_the_heap_holds_the_pairs_of_a_long_pretoken(merges_by) -> None:
    # In "abab...", each merge of (a, b) forms two pairs that merge later, (ab, ab) on its left and
    # (ab, a) on its right, while the (b, a) pairs it broke stay in the heap until their late rank
    # comes up: the heap holds about 1.5 entries per byte (past its buffer's end only the slow
    # bounds-checked run would notice).
    merges = [(b"a", b"b"), (b"ab", b"ab"), (b"b", b"a"), (b"ab", b"a")]
    vocab = byte_vocab_with(merges)
    text = " ".join("ab" * k for k in (HEAP_ABOVE // 2 + 1, 40, 64))
    fast, reference = FastTokenizer(vocab, merges), Tokenizer(vocab, merges)
    assert fast.encode(text) == reference.encode(text)


@pytest.mark.parametrize("seed", range(3))
def test_random_merges_of_long_pretokens_match_the_reference(seed: int) -> None:
    # Random merge lists over four letters (tokens of tokens, in random rank order) and random
    # letter runs up to 300 long, each one pre-token: every heap operation sees many ranks.
    rng = random.Random(seed)
    vocab = {i: bytes([i]) for i in range(256)}
    tokens, merges = [b"a", b"b", b"c", b"d"], []
    while len(merges) < 120:
        left, right = rng.choice(tokens), rng.choice(tokens)
        if left + right not in vocab.values() and len(left + right) <= 8:
            merges.append((left, right))
            vocab[len(vocab)] = left + right
            tokens.append(left + right)
    words = ["".join(rng.choices("abcd", k=rng.randrange(1, 300))) for _ in range(200)]
    text = " ".join(words)
    fast, reference = FastTokenizer(vocab, merges), Tokenizer(vocab, merges)
    assert fast.encode(text) == reference.encode(text)


def test_the_heap_pops_the_lowest_rank_first(merges_by) -> None:
    # (b, c) is pushed after (a, b) but has the lower rank: it must merge first, into "a" "bc".
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"bc", 257: b"ab"}
    merges = [(b"b", b"c"), (b"a", b"b")]
    text = "abc" + "d" * 2 * HEAP_ABOVE  # one pre-token, merged with the heap
    expected = [ord("a"), 256] + [ord("d")] * 2 * HEAP_ABOVE
    assert Tokenizer(vocab, merges).encode(text) == expected
    assert FastTokenizer(vocab, merges).encode(text) == expected


def test_pickles_and_encodes_files_like_the_reference(fast, reference, tmp_path) -> None:
    text = generate_english(60_000, seed=3)
    path = tmp_path / "text.txt"
    path.write_text(text, encoding="utf-8")
    encode_file(pickle.loads(pickle.dumps(fast)), path, tmp_path / "ids.npy", num_workers=2)
    assert np.load(tmp_path / "ids.npy").tolist() == reference.encode(text)


@pytest.mark.parametrize("stream_characters", [1, 10, 1 << 16])
def test_decode_and_encode_iterable_are_the_reference(
    fast, reference, monkeypatch, stream_characters: int
) -> None:
    import cs336_basics.runner.compiled.fast_tokenizer as module

    monkeypatch.setattr(module, "_STREAM_CHARACTERS", stream_characters)
    text = "Once upon a time,  there was\n a tokenizer." + EOT + " The end. " + EOT[:5]
    chunks = [text[i : i + 7] for i in range(0, len(text), 7)]
    assert list(fast.encode_iterable(chunks)) == reference.encode(text)
    assert list(fast.encode_iterable(iter([]))) == []
    assert fast.decode(fast.encode(text)) == text


def test_the_compiled_whitespace_test_is_the_patterns_whitespace() -> None:
    # Every character up to U+3000 and a few beyond, after a letter (so a lead byte of a longer
    # character is never mistaken for the start of the text).
    pattern = re.compile(f"[{WHITESPACE}]")
    for code in [*range(0x3001), 0x3001, 0xFEFF, 0x1F600, 0x10FFFF]:
        if 0xD800 <= code <= 0xDFFF:
            continue  # surrogates have no UTF-8 form
        data = np.frombuffer(("a" + chr(code)).encode("utf-8"), dtype=np.uint8)
        expected = bool(pattern.fullmatch(chr(code)))
        assert ends_in_whitespace(data, 0, len(data)) == expected, hex(code)
        assert ends_in_whitespace(data, 1, len(data)) == expected, hex(code)  # the character alone
        assert not ends_in_whitespace(data, 0, 1), hex(code)
        assert not ends_in_whitespace(data, len(data), len(data)), hex(code)  # nothing
        followed = np.frombuffer(("abc" + chr(code) + "z").encode("utf-8"), dtype=np.uint8)
        assert ends_in_whitespace(followed, 0, len(followed) - 1) == expected, hex(code)


@settings(max_examples=400, deadline=None)
@given(st.text(st.sampled_from(list("  \t\n\r\x0b\x0c\x1cabZ'sdmtlver09.,!-")), max_size=40))
def test_the_compiled_ascii_pretokenizer_is_the_pattern(text: str) -> None:
    # Contractions and near misses ('l, 'v, ''s), " ?" before each class, runs of whitespace
    # before a word or at the end, and \x1c (a symbol to the pattern): against the ``regex``
    # module's general pattern, not the ASCII copy the Python path uses.
    starts = ascii_pretoken_starts(np.frombuffer(text.encode("ascii"), dtype=np.uint8))
    pieces = [text[a:b] for a, b in zip(starts.tolist(), starts[1:].tolist(), strict=False)]
    assert pieces == gpt2_pretokenizer().findall(text)


@settings(max_examples=400, deadline=None)
@given(st.text(st.sampled_from([*ALPHABET, "\x08", "\x0e"]), max_size=40))
def test_words_are_cut_only_where_a_pretoken_ends(text: str) -> None:
    # Each word pre-tokenized alone gives the pre-tokens of the whole text (by the ``regex``
    # module's pattern): a cut inside a run of whitespace other than before its last character,
    # or before whitespace that follows whitespace and precedes more, would change them; so
    # would a cut before \x08 or \x0e (symbols, next to \t-\r) after a symbol.
    data = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    ends = find_words(data, np.array([len(data)], dtype=np.int64)).tolist()
    words = [data[a:b].tobytes().decode("utf-8") for a, b in itertools.pairwise([0, *ends])]
    pattern = gpt2_pretokenizer()
    assert [p for word in words for p in pattern.findall(word)] == pattern.findall(text)


def test_indented_lines_share_their_words(fast, reference, merges_by) -> None:
    # GCIDE's lines: a newline and an indentation, then a word. A word is cut before the
    # indentation's last space, so the table holds each indentation and each " word" once,
    # not each pair of them; and the ids are still the reference's.
    words = ["Webster]", "the", "(Zool.)", "1.", "--Bailey."]
    lines = [f"{word}\n{' ' * (1 + i % 7)}" for i, word in enumerate(words * 7)]
    text = "x " + "".join(lines) + "end"
    fast._new_cache()
    assert fast.encode(text) == reference.encode(text)
    # "x", "\n" + 0 to 6 spaces (the indentation but its last space), " " + each word, " end"
    # (cut only before a space after non-whitespace, each of the 35 lines is a word of its own).
    assert len(fast._cache) == 1 + 7 + len(words) + 1


@pytest.mark.parametrize("merges_by_heap", [False, True], ids=["scans", "heap"])
def test_long_and_short_pretokens_merge_like_the_reference(
    fast, reference, merges_by_heap: bool
) -> None:
    # Words of letters, each one pre-token, learned in one batch (so by the kernel): short ones
    # are merged by scanning, those longer than HEAP_ABOVE with the heap (equal-rank runs like
    # "aaaa" test its tie-breaking).
    rng = random.Random(5)
    lengths = range(HEAP_ABOVE + 1, 4 * HEAP_ABOVE) if merges_by_heap else range(1, HEAP_ABOVE + 1)
    texts = ["a" * n for n in lengths] + ["ab" * (n // 2) + "a" for n in lengths]
    texts += ["".join(rng.choices("aabbeehhinorstt", k=n)) for n in lengths for _ in range(3)]
    text = " ".join(texts)
    fast._new_cache()
    assert fast.encode(text) == reference.encode(text)


@pytest.mark.slow
def test_the_kernels_stay_in_bounds(tmp_path) -> None:
    # numba does not check indices: a kernel that reads or writes past an array's end may still
    # give the right ids. This file's other tests again, with bounds checks compiled in (in a
    # cache of their own: numba's cache does not tell the two builds apart).
    env = {**os.environ, "NUMBA_BOUNDSCHECK": "1", "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    here = Path(__file__)
    command = [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider"]
    result = subprocess.run(
        [*command, "-m", "not slow", here],
        cwd=here.parents[1],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
