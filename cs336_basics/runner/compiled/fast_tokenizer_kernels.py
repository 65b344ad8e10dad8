"""The compiled parts of :class:`~cs336_basics.runner.compiled.fast_tokenizer.FastTokenizer` (numba).

All work on UTF-8 bytes in numpy arrays:

* :func:`find_words` cuts text into words at spaces that follow a non-whitespace character
  (where a pre-token always ends);
* :class:`WordTable` maps a word's bytes to its token ids: an open-addressing hash table over
  byte arenas, looked up and filled by :func:`look_up_words` and assembled by :func:`gather_ids`;
* :func:`merge_pretokens` applies the BPE merges to many pre-tokens at once, exactly as
  ``Tokenizer._encode_pretoken`` does, with the merge ranks in an open-addressing table.
"""

from __future__ import annotations

import numba
import numpy as np

from cs336_basics.tokenizer import NO_MERGE

# Marks an empty slot of a hash table.
EMPTY = -1
# 2^64 / golden ratio (0x9E3779B97F4A7C15) as a signed 64-bit integer, so products wrap in int64.
_GOLDEN = 0x9E3779B97F4A7C15 - (1 << 64)
# FNV-1a, 64-bit: offset basis and prime, as signed 64-bit integers.
_FNV_OFFSET = 0xCBF29CE484222325 - (1 << 64)
_FNV_PRIME = 0x100000001B3


@numba.njit(cache=True, inline="always")
def _slot(key, mask):
    # Fibonacci hashing: the high bits of key * 2^64 / golden ratio spread consecutive keys.
    return ((key * _GOLDEN) >> 40) & mask


# --- merging pre-tokens ------------------------------------------------------------------------


def pair_table(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """An open-addressing table (linear probing) of distinct int64 ``keys -> values``, at most
    half full."""
    size = 1 << max(4, (2 * len(keys)).bit_length())
    return _fill_pair_table(keys, values, size)


@numba.njit(cache=True)
def _fill_pair_table(keys, values, size):
    table_keys = np.full(size, EMPTY, dtype=np.int64)
    table_values = np.zeros(size, dtype=np.int64)
    mask = size - 1
    for i in range(len(keys)):
        slot = _slot(keys[i], mask)
        while table_keys[slot] != EMPTY:
            slot = (slot + 1) & mask
        table_keys[slot] = keys[i]
        table_values[slot] = values[i]
    return table_keys, table_values


@numba.njit(cache=True, inline="always")
def _rank(table_keys, table_ranks, key):
    mask = len(table_keys) - 1
    slot = _slot(key, mask)
    while table_keys[slot] != key:
        if table_keys[slot] == EMPTY:
            return NO_MERGE
        slot = (slot + 1) & mask
    return table_ranks[slot]


@numba.njit(cache=True)
def merge_pretokens(ids, starts, table_keys, table_ranks, merged_ids, width):
    """Merge each pre-token ``ids[starts[i]:starts[i + 1]]`` (byte ids) as the reference does,
    packing the results to the front of ``ids``; return where each pre-token's ids now end.

    A pair (left, right) has the key ``left * width + right`` in the rank table.
    """
    ends = np.empty(len(starts) - 1, dtype=np.int64)
    longest = 1
    for p in range(len(starts) - 1):
        longest = max(longest, starts[p + 1] - starts[p])
    ranks = np.empty(longest, dtype=np.int64)
    # n - 1 pairs at first, then each merge pops one entry and pushes at most two: < 2n entries.
    heap = np.empty(2 * longest, dtype=np.int64)
    following = np.empty(longest, dtype=np.int64)
    preceding = np.empty(longest, dtype=np.int64)
    out = 0
    for p in range(len(starts) - 1):
        start, n = starts[p], starts[p + 1] - starts[p]
        for i in range(start, start + n):  # pack: out <= start, and pre-tokens only shrink
            ids[out + i - start] = ids[i]
        word = ids[out : out + n]
        tables = (table_keys, table_ranks, merged_ids, width)
        if n > HEAP_ABOVE:
            n = _merge_with_heap(word, heap, following, preceding, tables)
        else:
            n = _merge_with_scans(word, ranks, tables)
        out += n
        ends[p] = out
    return ends


# Pre-tokens longer than this are merged with a heap (n log n); shorter ones by scanning their
# pairs for the lowest rank at each merge (n^2, but faster for the short words of natural text).
HEAP_ABOVE = 48


@numba.njit(cache=True, inline="always")
def _pair_rank(tables, left, right):
    table_keys, table_ranks, _, width = tables
    return _rank(table_keys, table_ranks, left * width + right)


@numba.njit(cache=True)
def _merge_with_scans(word, ranks, tables):
    """Merge ``word`` in place; return its new length. ``ranks[i]``: the rank of the pair
    (word[i], word[i + 1])."""
    merged_ids = tables[2]
    n = len(word)
    for i in range(n - 1):
        ranks[i] = _pair_rank(tables, word[i], word[i + 1])
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
            ranks[at - 1] = _pair_rank(tables, word[at - 1], word[at])
        if at < n - 1:
            ranks[at] = _pair_rank(tables, word[at], word[at + 1])
    return n


@numba.njit(cache=True)
def _merge_with_heap(word, heap, following, preceding, tables):
    """Merge ``word`` in place, as ``_merge_with_scans`` does; return its new length.

    Tokens form a linked list over their first positions (``following``, ``preceding``; a merged
    token keeps its left part's position, so positions stay in text order). The heap holds
    ``rank << 32 | position`` of every pair when it forms: the smallest is the leftmost pair of
    lowest rank. An entry whose pair has since changed is skipped when popped.
    """
    merged_ids = tables[2]
    n = len(word)
    size = 0
    for i in range(n):
        following[i], preceding[i] = i + 1, i - 1
        if i + 1 < n:
            size = _push_pair(heap, size, tables, word, i, i + 1)
    while size > 0:
        top = heap[0]
        size = _pop(heap, size)
        rank, i = top >> 32, top & 0xFFFFFFFF
        j = following[i]
        if preceding[i] == _REMOVED or j >= n or _pair_rank(tables, word[i], word[j]) != rank:
            continue  # the pair has changed since this entry was pushed
        word[i] = merged_ids[rank]
        k = following[j]
        following[i], preceding[j] = k, _REMOVED
        if k < n:
            preceding[k] = i
            size = _push_pair(heap, size, tables, word, i, k)
        if preceding[i] >= 0:
            size = _push_pair(heap, size, tables, word, preceding[i], i)
    length, i = 0, 0
    while i < n:
        word[length] = word[i]
        length, i = length + 1, following[i]
    return length


# ``preceding`` of a token merged into the one before it.
_REMOVED = -2


@numba.njit(cache=True, inline="always")
def _push_pair(heap, size, tables, word, i, j):
    """Push the pair at positions ``i``, ``j`` if a merge joins it; the heap's new size."""
    rank = _pair_rank(tables, word[i], word[j])
    if rank == NO_MERGE:
        return size
    heap[size] = rank << 32 | i
    child = size
    while child > 0 and heap[(child - 1) // 2] > heap[child]:  # sift up
        parent = (child - 1) // 2
        heap[parent], heap[child] = heap[child], heap[parent]
        child = parent
    return size + 1


@numba.njit(cache=True, inline="always")
def _pop(heap, size):
    """Remove the smallest entry, ``heap[0]``; the heap's new size."""
    size -= 1
    heap[0] = heap[size]
    parent = 0
    while True:  # sift down
        child = 2 * parent + 1
        if child >= size:
            break
        if child + 1 < size and heap[child + 1] < heap[child]:
            child += 1
        if heap[parent] <= heap[child]:
            break
        heap[parent], heap[child] = heap[child], heap[parent]
        parent = child
    return size


# --- cutting text into words --------------------------------------------------------------------


@numba.njit(cache=True, inline="always")
def ends_in_whitespace(data, start, end):
    """Whether the UTF-8 text ``data[start:end]`` ends with a character of the GPT-2 pattern's
    whitespace class (Unicode White_Space): ASCII \\t \\n \\v \\f \\r and space, U+0085, U+00A0,
    U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000."""
    if end <= start:
        return False
    last = data[end - 1]
    if last == 0x20 or 0x09 <= last <= 0x0D:
        return True
    if last < 0x80:
        return False
    if end - start >= 2 and data[end - 2] == 0xC2:  # a lead byte: the character is C2 xx
        return last == 0x85 or last == 0xA0
    if end - start < 3:
        return False
    lead, middle = data[end - 3], data[end - 2]
    if lead == 0xE1:
        return middle == 0x9A and last == 0x80
    if lead == 0xE2 and middle == 0x80:
        return last <= 0x8A or last == 0xA8 or last == 0xA9 or last == 0xAF
    if lead == 0xE2 and middle == 0x81:
        return last == 0x9F
    return lead == 0xE3 and middle == 0x80 and last == 0x80


@numba.njit(cache=True, inline="always")
def _is_ascii_space(byte):
    return byte == 0x20 or 0x09 <= byte <= 0x0D


@numba.njit(cache=True)
def find_words(data, piece_ends):
    """Where the words of each piece end: a piece ``data[piece_ends[i - 1]:piece_ends[i]]`` is
    cut at its end and before every ASCII whitespace character that either follows a
    non-whitespace character or is the last of a run of ASCII whitespace followed by an ASCII
    non-whitespace character. A pre-token ends at each cut, whatever the text around it:
    no pre-token holds non-whitespace followed by whitespace, and the pattern's ``\\s+(?!\\S)``
    leaves the last whitespace character of a run for what follows. So a word is a whitespace
    run on its own, or one whitespace character (if any) and what follows up to the next
    whitespace: ``" dignity,"``, ``"\\n   "`` then ``" the"``, rather than ``"\\n    the"`` for each
    indentation and word (GCIDE's lines)."""
    ends = np.empty(len(data) + len(piece_ends), dtype=np.int64)
    count = 0
    start = 0
    for end in piece_ends:
        for i in range(start + 1, end):
            if not _is_ascii_space(data[i]):
                continue
            # After whitespace, a cut needs the run to end here: the next byte is ASCII
            # non-whitespace (a multi-byte character might be whitespace, so no cut before it).
            if not ends_in_whitespace(data, start, i) or (
                i + 1 < end and data[i + 1] < 0x80 and not _is_ascii_space(data[i + 1])
            ):
                ends[count] = i
                count += 1
        if end > start:
            ends[count] = end
            count += 1
        start = end
    return ends[:count]


# How a new word is pre-tokenized (see ``word_kinds``).
ASCII, JOINED, ALONE = 0, 1, 2


@numba.njit(cache=True)
def word_kinds(word_bytes, word_starts, word_lengths, entries):
    """How each word ``entries[i]`` of a ``WordTable`` is pre-tokenized: ``ASCII`` words (all
    bytes ASCII) by compiled code, one by one; the others by the pattern, joined to others
    (``JOINED``) if led by whitespace and ending in non-whitespace (then they start and end where
    a pre-token does, whatever their neighbours), else ``ALONE`` (a piece's first or last word,
    a run of whitespace)."""
    kinds = np.empty(len(entries), dtype=np.int64)
    for i in range(len(entries)):
        start = word_starts[entries[i]]
        end = start + word_lengths[entries[i]]
        kinds[i] = ASCII
        for j in range(start, end):
            if word_bytes[j] >= 0x80:
                kinds[i] = JOINED
                break
        if kinds[i] == JOINED and (
            not _is_ascii_space(word_bytes[start]) or ends_in_whitespace(word_bytes, start, end)
        ):
            kinds[i] = ALONE
    return kinds


@numba.njit(cache=True)
def joined_words(word_bytes, word_starts, word_lengths, entries):
    """The bytes of the words ``entries`` of a ``WordTable``, one after the other."""
    total = 0
    for entry in entries:
        total += word_lengths[entry]
    out = np.empty(total, dtype=np.uint8)
    at = 0
    for entry in entries:
        start, length = word_starts[entry], word_lengths[entry]
        out[at : at + length] = word_bytes[start : start + length]
        at += length
    return out


# --- GPT-2's pre-tokenizer on ASCII text -------------------------------------------------------

# Classes of ASCII bytes in the pattern: \p{L} is [A-Za-z], \p{N} [0-9], \s [\t\n\v\f\r ].
_LETTER, _DIGIT, _SPACE, _OTHER = 0, 1, 2, 3


@numba.njit(cache=True, inline="always")
def _ascii_class(byte):
    if 0x61 <= byte <= 0x7A or 0x41 <= byte <= 0x5A:
        return _LETTER
    if 0x30 <= byte <= 0x39:
        return _DIGIT
    if byte == 0x20 or 0x09 <= byte <= 0x0D:
        return _SPACE
    return _OTHER


def ascii_pretoken_starts(data: np.ndarray) -> np.ndarray:
    """Where the pre-tokens of the ASCII text ``data`` start, then ``len(data)``: the matches of
    ``GPT2_PRETOKENIZER_PATTERN``, whose alternatives are tried in order at each start."""
    starts = ascii_word_pretoken_starts(data, np.array([len(data)], dtype=np.int64))
    return np.append(starts, len(data))


@numba.njit(cache=True)
def ascii_word_pretoken_starts(data, word_ends):
    """Where the pre-tokens of the ASCII words ``data[word_ends[w - 1]:word_ends[w]]``, each
    pre-tokenized alone, start (as offsets into ``data``)."""
    starts = np.empty(len(data), dtype=np.int64)
    count = 0
    i = 0
    for n in word_ends:
        while i < n:
            starts[count] = i
            count += 1
            i = _ascii_pretoken_end(data, i, n)
    return starts[:count]


@numba.njit(cache=True, inline="always")
def _ascii_pretoken_end(data, i, n):
    """Where the pre-token starting at ``data[i]`` ends."""
    if data[i] == 0x27 and i + 1 < n:  # '(?:[sdmt]|ll|ve|re)
        after = data[i + 1]
        if after == 0x73 or after == 0x64 or after == 0x6D or after == 0x74:
            return i + 2
        if i + 2 < n:
            pair = (after, data[i + 2])
            if pair == (0x6C, 0x6C) or pair == (0x76, 0x65) or pair == (0x72, 0x65):
                return i + 3
    kind = _ascii_class(data[i])
    if data[i] == 0x20 and i + 1 < n and _ascii_class(data[i + 1]) != _SPACE:
        i += 1  # " ?" before letters, digits or other symbols
        kind = _ascii_class(data[i])
    j = i + 1
    while j < n and _ascii_class(data[j]) == kind:
        j += 1
    if kind != _SPACE or j == n or j - i == 1:
        return j  # \p{L}+, \p{N}+, [^\s\p{L}\p{N}]+; or \s+ at the end, or a single \s
    return j - 1  # \s+(?!\S): the last whitespace character goes with what follows


# --- the table of known words ------------------------------------------------------------------


class WordTable:
    """Words (UTF-8 bytes) and their token ids, in arrays the compiled functions share.

    Entry ``e`` is the word ``word_bytes[word_starts[e]:][:word_lengths[e]]`` with the ids
    ``ids[id_starts[e]:][:id_lengths[e]]`` (``id_lengths[e] == -1``: not learned yet). ``slots``
    is the hash table: entry numbers with part of their word's hash (see ``_HASH_BITS``), or
    ``EMPTY``.
    """

    def __init__(self, entries: int = 1 << 9, arena: int = 1 << 16) -> None:
        """Room for ``entries`` words (a power of two) and ``arena`` bytes and ids at first; the
        arrays grow as needed."""
        self.slots = np.full(2 * entries, EMPTY, dtype=np.int64)
        self.hashes = np.empty(entries, dtype=np.int64)
        self.word_starts = np.empty(entries, dtype=np.int64)
        self.word_lengths = np.empty(entries, dtype=np.int64)
        self.id_starts = np.empty(entries, dtype=np.int64)
        self.id_lengths = np.empty(entries, dtype=np.int64)
        self.word_bytes = np.empty(arena, dtype=np.uint8)
        self.ids = np.empty(arena, dtype=np.int64)
        self.entries = 0
        self.bytes_used = 0
        self.ids_used = 0

    def __len__(self) -> int:
        return self.entries

    def look_up(self, data: np.ndarray, word_ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The entry of each word of ``data`` (the words end at ``word_ends``), and the entries
        added for words not in the table (their ids are still to be stored)."""
        self._reserve(len(word_ends), len(data), 0)
        counts = np.array([self.entries, self.bytes_used], dtype=np.int64)
        found = look_up_words(
            data, word_ends, self.slots, self.hashes, self.word_starts, self.word_lengths,
            self.word_bytes, counts,
        )  # fmt: skip
        self.entries, self.bytes_used = counts.tolist()
        return found

    def store_ids(self, entries: np.ndarray, ids: np.ndarray, id_ends: np.ndarray) -> None:
        """Give entry ``entries[i]`` the ids ``ids[id_ends[i - 1]:id_ends[i]]``."""
        self._reserve(0, 0, len(ids))
        id_starts = np.concatenate(([0], id_ends[:-1]))
        self.id_starts[entries] = self.ids_used + id_starts
        self.id_lengths[entries] = id_ends - id_starts
        self.ids[self.ids_used : self.ids_used + len(ids)] = ids
        self.ids_used += len(ids)

    def gather(self, entries: np.ndarray) -> np.ndarray:
        """The ids of ``entries``, one after the other."""
        return gather_ids(entries, self.id_starts, self.id_lengths, self.ids)

    def _reserve(self, entries: int, num_bytes: int, num_ids: int) -> None:
        """Make room for ``entries`` more words of ``num_bytes`` bytes and ``num_ids`` more ids."""
        needed = self.entries + entries
        if needed > len(self.hashes):
            size = 1 << needed.bit_length()
            for name in ("hashes", "word_starts", "word_lengths", "id_starts", "id_lengths"):
                setattr(self, name, _grown(getattr(self, name), size))
        if 2 * needed > len(self.slots):
            self.slots = _rehash(self.hashes[: self.entries], 1 << (2 * needed).bit_length())
        self.word_bytes = _grown(self.word_bytes, self.bytes_used + num_bytes)
        self.ids = _grown(self.ids, self.ids_used + num_ids)


def _grown(array: np.ndarray, size: int) -> np.ndarray:
    """``array``, copied into a larger one (doubling) if it has fewer than ``size`` elements."""
    if size <= len(array):
        return array
    bigger = np.empty(max(size, 2 * len(array)), dtype=array.dtype)
    bigger[: len(array)] = array
    return bigger


@numba.njit(cache=True)
def _rehash(hashes, size):
    slots = np.full(size, EMPTY, dtype=np.int64)
    mask = size - 1
    for entry in range(len(hashes)):
        slot = _slot(hashes[entry], mask)
        while slots[slot] != EMPTY:
            slot = (slot + 1) & mask
        slots[slot] = (hashes[entry] & _HASH_BITS) | entry
    return slots


# A slot holds an entry number in its low 32 bits and the high 32 bits of the word's hash above
# them, so a probe that meets another word mostly tells so without reading that word's arrays.
# (No slot is EMPTY, -1: entry numbers stay far below 2^32 - 1.)
_HASH_BITS = -(1 << 32)
_ENTRY_BITS = (1 << 32) - 1


@numba.njit(cache=True, inline="always")
def _fnv1a(data, start, end):
    value = _FNV_OFFSET
    for i in range(start, end):
        value = (value ^ data[i]) * _FNV_PRIME
    return value


@numba.njit(cache=True, inline="always")
def _same_bytes(a, a_start, b, b_start, length):
    for i in range(length):  # noqa: SIM110 (numba compiles the loop, not a generator)
        if a[a_start + i] != b[b_start + i]:
            return False
    return True


@numba.njit(cache=True)
def look_up_words(data, word_ends, slots, hashes, word_starts, word_lengths, word_bytes, counts):
    """The entry of each word of ``data`` (ending at ``word_ends``); a word not in the table is
    added as a new entry (its bytes copied, ids to be learned). ``counts`` holds the number of
    entries and of word bytes used, updated in place. Returns the entries, and the new ones."""
    mask = len(slots) - 1
    entries = np.empty(len(word_ends), dtype=np.int64)
    first_new = counts[0]
    start = 0
    for w in range(len(word_ends)):
        end = word_ends[w]
        length = end - start
        key = _fnv1a(data, start, end)
        slot = _slot(key, mask)
        while True:
            packed = slots[slot]
            if packed == EMPTY:
                entry = counts[0]
                counts[0] += 1
                slots[slot] = (key & _HASH_BITS) | entry
                hashes[entry] = key
                word_starts[entry] = counts[1]
                word_lengths[entry] = length
                word_bytes[counts[1] : counts[1] + length] = data[start:end]
                counts[1] += length
                break
            entry = packed & _ENTRY_BITS
            if (
                (packed ^ key) & _HASH_BITS == 0
                and word_lengths[entry] == length
                and _same_bytes(word_bytes, word_starts[entry], data, start, length)
            ):
                break
            slot = (slot + 1) & mask
        entries[w] = entry
        start = end
    return entries, np.arange(first_new, counts[0])


@numba.njit(cache=True)
def gather_ids(entries, id_starts, id_lengths, ids):
    """The ids of the words ``entries``, one after the other."""
    total = 0
    for entry in entries:
        total += id_lengths[entry]
    out = np.empty(total, dtype=np.int64)
    at = 0
    for entry in entries:
        start = id_starts[entry]
        for i in range(start, start + id_lengths[entry]):  # a loop: most words have 1 or 2 ids
            out[at] = ids[i]
            at += 1
    return out
