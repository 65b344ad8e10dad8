"""The reference tokenizer with its merges compiled: same ids, about twice the speed on new text.

:class:`~cs336_basics.tokenizer.Tokenizer` caches the ids of every whitespace-led word, so
text it has seen costs one dictionary lookup per word; what stays slow is a word it has not
seen, whose pre-tokens are merged one Python step at a time. Natural text keeps bringing new
words (10 MB of English prose holds about 150,000 distinct ones), so that is where its time goes.

:class:`FastTokenizer` keeps the reference's pre-tokenization, cache and output, and changes how
the new words of a call are encoded: all of them at once. They are pre-tokenized with one regex
pass over their concatenation, and the merges of every pre-token run in one call of a kernel
compiled by numba: the same algorithm as ``Tokenizer._encode_pretoken`` (the leftmost pair of
lowest rank merges first), with the ranks in an open-addressing hash table.

It installs with the project's lock (numba is a development dependency) and does not ship in the
student handout. The tests check that its ids equal the reference's and tiktoken's; the readable
``Tokenizer`` remains the definition.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from itertools import chain

import numba
import numpy as np

from cs336_basics.pretokenization import (
    WHITESPACE,
    pretokenize,
    split_on_special_tokens,
)
from cs336_basics.tokenizer import NO_MERGE, Tokenizer

# Text is encoded in groups of pieces of about this many characters: enough that the per-group
# overhead is small, few enough that the group's words stay in the processor's caches.
_GROUP_CHARACTERS = 1 << 18
# encode_iterable reads at least this many characters before encoding.
_STREAM_CHARACTERS = 1 << 16
# Fewer new texts than this are merged in Python: a kernel call has a fixed cost of tens of µs.
_SMALL_BATCH = 32
# Marks an empty slot of the hash table (real keys are non-negative).
_EMPTY = -1
# 2^64 / golden ratio (0x9E3779B97F4A7C15) as a signed 64-bit integer, so products wrap in int64.
_GOLDEN = 0x9E3779B97F4A7C15 - (1 << 64)


class FastTokenizer(Tokenizer):
    """A :class:`~cs336_basics.tokenizer.Tokenizer` whose new words are merged by compiled code."""

    def __init__(
        self,
        vocab: dict[int, bytes],
        merges: list[tuple[bytes, bytes]],
        special_tokens: list[str] | None = None,
    ) -> None:
        super().__init__(vocab, merges, special_tokens)
        # A pair (left, right) is the key left * width + right.
        self._width = max(self.vocab) + 1
        pairs = np.array(list(self.merge_ranks), dtype=np.int64).reshape(-1, 2)
        keys = pairs[:, 0] * self._width + pairs[:, 1]
        ranks = np.fromiter(self.merge_ranks.values(), dtype=np.int64, count=len(keys))
        self._table_keys, self._table_ranks = _hash_table(keys, ranks)
        self._merged_ids = np.array(self.merged_ids, dtype=np.int64)
        self._byte_id_array = np.array(self.byte_ids, dtype=np.int64)
        # One int object per id, shared by every cached list (as the reference's are): fresh ints
        # from tolist() would scatter millions of objects that encoding then has to touch.
        self._id_objects = list(range(self._width))
        # Load (or compile) the kernel now rather than in the first call of ``encode``.
        self._merge_texts([2], [" a"])

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``: exactly ``Tokenizer.encode(text)``."""
        with _garbage_collection_paused():
            return self._encode(text)

    def encode_iterable(self, iterable: Iterable[str]) -> Iterator[int]:
        """``Tokenizer.encode_iterable``, with small chunks (a file's lines) read together into
        pieces of at least ``_STREAM_CHARACTERS``: encoding has a fixed cost per call."""
        return super().encode_iterable(_coalesced(iterable, _STREAM_CHARACTERS))

    def _new_cache(self) -> None:
        # Plain dictionaries: a missing key raises KeyError instead of being encoded alone.
        self._cache: dict[str, list[int]] = {}  # word -> ids of " " + word
        self._leading: dict[str, list[int]] = {}  # a piece's text before its first space -> ids

    def _encode(self, text: str) -> list[int]:
        ids: list[int] = []
        group: list[str | int] = []  # ordinary pieces and special token ids, encoded together
        size = 0
        for piece, is_special in split_on_special_tokens(text, self._special_regex):
            group.append(self.special_ids[piece] if is_special else piece)
            size += len(piece)
            if size >= _GROUP_CHARACTERS:
                self._encode_group(group, ids)
                group, size = [], 0
        self._encode_group(group, ids)
        return ids

    def _encode_group(self, group: list[str | int], ids: list[int]) -> None:
        """Append the ids of ``group`` (ordinary pieces and special token ids) to ``ids``."""
        splits = [item if isinstance(item, int) else _split_on_spaces(item) for item in group]
        length = len(ids)
        try:  # the common case once the text's vocabulary is known: every word is cached
            self._append_ids(splits, ids)
        except KeyError:
            del ids[length:]
            self._learn([split for split in splits if not isinstance(split, int)])
            self._append_ids(splits, ids)

    def _append_ids(self, splits: list[tuple[str, list[str]] | int], ids: list[int]) -> None:
        word_ids, leading = self._cache.__getitem__, self._leading
        for split in splits:
            if isinstance(split, int):
                ids.append(split)
                continue
            first, words = split
            if first:
                ids.extend(leading[first])
            ids.extend(chain.from_iterable(map(word_ids, words)))

    def _learn(self, splits: list[tuple[str, list[str]]]) -> None:
        """Cache the ids of every word and leading text of ``splits`` not cached yet."""
        words = set(chain.from_iterable(words for _, words in splits))
        if len(self._cache) + len(words) > self.CACHE_SIZE:
            self._new_cache()  # it may exceed its size until the next group empties it
        words = words.difference(self._cache)  # (difference_update would walk the whole cache)
        firsts = list({first for first, _ in splits if first}.difference(self._leading))
        # " " + word, for a word ending in non-whitespace, ends where a pre-token ends: such
        # texts are pre-tokenized joined together, in one pass (the ASCII ones with the faster
        # pattern). The others (a piece's last word, a piece's leading text) are pre-tokenized
        # alone.
        ascii_words, other_words, last_words = [], [], []
        for word in words:
            if word and word[-1] not in _WHITESPACE:
                (ascii_words if word.isascii() else other_words).append(word)
            else:
                last_words.append(word)
        for joined in (ascii_words, other_words):
            self._cache.update(zip(joined, self._encode_joined(joined), strict=True))
        spaced = [" " + word for word in last_words]
        self._cache.update(zip(last_words, self._encode_alone(spaced), strict=True))
        self._leading.update(zip(firsts, self._encode_alone(firsts), strict=True))

    def _encode_joined(self, words: list[str]) -> list[list[int]]:
        """The ids of " " + word for each of ``words`` (each ending in non-whitespace)."""
        if len(words) < _SMALL_BATCH:
            return self._encode_each([" " + word for word in words])
        pretokens = pretokenize(" " + " ".join(words)) if words else []
        return self._merge_texts([len(word) + 1 for word in words], pretokens)

    def _encode_alone(self, texts: list[str]) -> list[list[int]]:
        """The ids of each of ``texts`` (non-empty)."""
        if len(texts) < _SMALL_BATCH:
            return self._encode_each(texts)
        pretokens = list(chain.from_iterable(map(pretokenize, texts)))
        return self._merge_texts(list(map(len, texts)), pretokens)

    def _encode_each(self, texts: list[str]) -> list[list[int]]:
        """The ids of each of ``texts`` by the reference's Python merge loop: for a few texts,
        cheaper than the kernel call and the array work around it."""
        merge = self._encode_pretoken
        return [list(chain.from_iterable(map(merge, pretokenize(text)))) for text in texts]

    def _merge_texts(self, text_lengths: list[int], pretokens: list[str]) -> list[list[int]]:
        """The ids of consecutive texts of ``text_lengths`` characters (none empty), given the
        pre-tokens of their concatenation."""
        lengths = np.array(list(map(len, pretokens)), dtype=np.int64)
        joined = "".join(pretokens)
        byte_lengths = lengths if joined.isascii() else list(map(len, map(str.encode, pretokens)))
        starts = np.zeros(len(pretokens) + 1, dtype=np.int64)
        np.cumsum(byte_lengths, out=starts[1:])
        ids = self._byte_id_array[np.frombuffer(joined.encode(), dtype=np.uint8)]
        ends = _merge_pretokens(
            ids, starts, self._table_keys, self._table_ranks, self._merged_ids, self._width
        )
        # Each text ends where one of its pre-tokens ends: find which, by character offsets.
        pretoken_ends = np.cumsum(lengths)
        text_ends = np.cumsum(np.array(text_lengths, dtype=np.int64))
        id_ends = ends[np.searchsorted(pretoken_ends, text_ends)].tolist()
        flat = list(
            map(self._id_objects.__getitem__, ids[: id_ends[-1]].tolist() if id_ends else [])
        )
        return list(map(flat.__getitem__, map(slice, [0, *id_ends], id_ends)))


def _coalesced(chunks: Iterable[str], size: int) -> Iterator[str]:
    """The concatenation of ``chunks``, as strings of at least ``size`` characters (but the last)."""
    buffer: list[str] = []
    length = 0
    for chunk in chunks:
        buffer.append(chunk)
        length += len(chunk)
        if length >= size:
            yield "".join(buffer)
            buffer, length = [], 0
    if buffer:
        yield "".join(buffer)


def _split_on_spaces(piece: str) -> tuple[str, list[str]]:
    """Cut ``piece`` into its text before the first space and words each led by a space
    (returned without it), so that the pre-tokens of ``piece`` are those of the parts.

    Cutting before a space is safe where a non-whitespace character precedes it; where
    whitespace does (two spaces, an indented line), the words around are kept together.
    """
    first, *words = piece.split(" ")
    if not _SPACE_AFTER_WHITESPACE.search(piece):
        return first, words
    kept: list[str] = []
    for word in words:
        before = kept[-1] if kept else first
        if before and before[-1] not in _WHITESPACE:
            kept.append(word)
        elif kept:
            kept[-1] += " " + word
        else:
            first += " " + word
    return first, kept


@contextmanager
def _garbage_collection_paused() -> Iterator[None]:
    """Pause the cycle collector: encoding makes no cycles, but allocates hundreds of thousands
    of lists, which would otherwise trigger full collections over the whole (large) cache."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _whitespace_characters() -> frozenset[str]:
    """The characters of the ``WHITESPACE`` class (``\\u2000-\\u200a`` is a range there)."""
    whitespace = re.compile(f"[{WHITESPACE}]")
    return frozenset(filter(whitespace.fullmatch, map(chr, range(0x3001))))


_WHITESPACE = _whitespace_characters()
_SPACE_AFTER_WHITESPACE = re.compile(f"[{WHITESPACE}] ")


def _hash_table(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """An open-addressing table (linear probing) of ``keys -> values``, at most half full."""
    size = 1 << max(4, (2 * len(keys)).bit_length())
    return _fill_table(keys, values, size)


@numba.njit(cache=True, inline="always")
def _slot(key: int, mask: int) -> int:
    # Fibonacci hashing: the high bits of key * 2^64 / golden ratio spread consecutive keys.
    return ((key * _GOLDEN) >> 40) & mask


@numba.njit(cache=True)
def _fill_table(keys, values, size):
    table_keys = np.full(size, _EMPTY, dtype=np.int64)
    table_values = np.zeros(size, dtype=np.int64)
    mask = size - 1
    for i in range(len(keys)):
        slot = _slot(keys[i], mask)
        while table_keys[slot] != _EMPTY:
            slot = (slot + 1) & mask
        table_keys[slot] = keys[i]
        table_values[slot] = values[i]
    return table_keys, table_values


@numba.njit(cache=True, inline="always")
def _lookup(table_keys, table_values, key):
    mask = len(table_keys) - 1
    slot = _slot(key, mask)
    while table_keys[slot] != key:
        if table_keys[slot] == _EMPTY:
            return NO_MERGE
        slot = (slot + 1) & mask
    return table_values[slot]


@numba.njit(cache=True)
def _merge_pretokens(ids, starts, table_keys, table_ranks, merged_ids, width):
    """Merge each pre-token ``ids[starts[i]:starts[i + 1]]`` (byte ids) as the reference does,
    packing the results to the front of ``ids``; return where each pre-token's ids now end."""
    ends = np.empty(len(starts) - 1, dtype=np.int64)
    longest = 1
    for p in range(len(starts) - 1):
        longest = max(longest, starts[p + 1] - starts[p])
    ranks = np.empty(longest, dtype=np.int64)  # ranks[i]: rank of the pair (ids[i], ids[i + 1])
    out = 0
    for p in range(len(starts) - 1):
        start, n = starts[p], starts[p + 1] - starts[p]
        for i in range(start, start + n):  # pack: out <= start, and pre-tokens only shrink
            ids[out + i - start] = ids[i]
        word = ids[out : out + n]
        for i in range(n - 1):
            ranks[i] = _lookup(table_keys, table_ranks, word[i] * width + word[i + 1])
        while n > 1:
            at = 0
            for i in range(1, n - 1):  # the leftmost pair of lowest rank
                if ranks[i] < ranks[at]:
                    at = i
            if ranks[at] == NO_MERGE:
                break
            word[at] = merged_ids[ranks[at]]
            n -= 1
            for i in range(at + 1, n):  # close the gap left by word[at + 1]
                word[i] = word[i + 1]
                ranks[i - 1] = ranks[i]
            if at > 0:
                ranks[at - 1] = _lookup(table_keys, table_ranks, word[at - 1] * width + word[at])
            if at < n - 1:
                ranks[at] = _lookup(table_keys, table_ranks, word[at] * width + word[at + 1])
        out += n
        ends[p] = out
    return ends
