"""The reference tokenizer with compiled word lookup and merges: the same ids, faster.

:class:`~cs336_basics.tokenizer.Tokenizer` caches the ids of every word, so
text it has seen costs a dictionary lookup per word, and a word it has not seen is merged one
Python step at a time. Both are per-word Python work, and natural text is mostly words: about
1.6 million per 10 MB of English prose, 150,000 of them distinct.

:class:`FastTokenizer` gives the same ids without per-word Python work on known words. Text is
split on special tokens (as the reference does), and the ordinary text of about 256K characters
at a time (a longer document is cut between two words) is handled as UTF-8 bytes by compiled
code (:mod:`cs336_basics.runner.compiled.fast_tokenizer_kernels`, numba): cut into words where a
pre-token always ends (before ASCII whitespace that follows non-whitespace, and before the last
character of a run of whitespace: the reference's words), each word looked up in a hash table of
known words, and the ids of the words gathered, then made a list of Python ints by copying
references to ints made ahead. The words not seen before are learned together: the ASCII ones
pre-tokenized one by one by a compiled copy of GPT-2's pattern, the others by the pattern itself
(in one pass over their concatenation where that is safe: a word led by whitespace and ending
in non-whitespace); their pre-tokens are looked up in a second table, and only the pre-tokens
not seen before are merged, by one call of a compiled kernel with the rule of
``Tokenizer._encode_pretoken`` (the leftmost pair of lowest rank merges first; long pre-tokens
through a heap). A few new words are merged by the reference's own Python loop.

numba is a development dependency (``uv sync`` installs it from the lock). This module is part
of the reference repository, not of the student handout. The tests check that its ids equal the
reference's and tiktoken's; the readable ``Tokenizer`` remains the definition.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator
from itertools import chain

import numpy as np

from cs336_basics.pretokenization import WHITESPACE, pretokenize, split_on_special_tokens
from cs336_basics.runner.compiled.fast_tokenizer_kernels import (
    ALONE,
    WordTable,
    ascii_word_pretoken_starts,
    find_words,
    joined_words,
    merge_pretokens,
    pair_table,
    word_kinds,
)
from cs336_basics.tokenizer import Tokenizer

# Text is encoded in groups of pieces of about this many characters: large enough that the
# per-group overhead is small, small enough to keep a group's arrays in the processor's caches.
_GROUP_CHARACTERS = 1 << 18
# encode_iterable reads at least this many characters before encoding.
_STREAM_CHARACTERS = 1 << 16
# Ids are made Python ints ahead (``_id_objects``) up to this width of the vocabulary.
_MOST_ID_OBJECTS = 1 << 22
# Fewer new words than this are merged in Python: a kernel call has a fixed cost of tens of µs.
_SMALL_BATCH = 32


class FastTokenizer(Tokenizer):
    """A :class:`~cs336_basics.tokenizer.Tokenizer` whose words are looked up and merged by
    compiled code. ``CACHE_SIZE`` bounds the number of words it keeps."""

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
        self._rank_keys, self._rank_values = pair_table(keys, ranks)
        self._merged_ids = np.array(self.merged_ids, dtype=np.int64)
        # Each id as a Python int made once: a list of ids is then built by copying references
        # (``take`` then ``tolist`` of an object array), about half the time of ``tolist`` on
        # int64, which makes a new int object per id. (Not for vocabularies of sparse, huge ids.)
        self._id_objects = (
            np.array(range(self._width), dtype=object) if self._width <= _MOST_ID_OBJECTS else None
        )
        self._byte_id_array = np.array(self.byte_ids, dtype=np.int64)
        # Load (or compile) the kernels now rather than in the first call of ``encode``.
        # The compiled path, with a word the pattern pre-tokenizes (compiling it takes 0.1 s, as
        # tiktoken's set-up compiles its own).
        self.encode(" ".join(f"warm{i}" for i in range(_SMALL_BATCH)) + " é")
        self.encode(" ".join(["warm"] * _SMALL_BATCH))  # and the Python one
        self._new_cache()

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``: exactly ``Tokenizer.encode(text)``."""
        ids: list[int] = []
        group: list[str | int] = []  # ordinary pieces and special token ids, encoded together
        size = 0
        for piece, is_special in split_on_special_tokens(text, self._special_regex):
            if is_special:
                group.append(self.special_ids[piece])
                continue
            for part in _cut(piece, _GROUP_CHARACTERS):
                group.append(part)
                size += len(part)
                if size >= _GROUP_CHARACTERS:
                    self._encode_group(group, ids)
                    group, size = [], 0
        self._encode_group(group, ids)
        return ids

    def encode_iterable(self, iterable: Iterable[str]) -> Iterator[int]:
        """``Tokenizer.encode_iterable``, with small chunks (a file's lines) read together into
        pieces of at least ``_STREAM_CHARACTERS``: encoding has a fixed cost per call."""
        return super().encode_iterable(_coalesced(iterable, _STREAM_CHARACTERS))

    def _new_cache(self) -> None:
        # The reference's pickling leaves ``_cache`` out and calls this to start a new one.
        self._cache = WordTable()
        self._pretoken_cache = WordTable()

    def _encode_group(self, group: list[str | int], ids: list[int]) -> None:
        """Append the ids of ``group`` (ordinary pieces and special token ids) to ``ids``."""
        encoded = [item.encode("utf-8") for item in group if isinstance(item, str)]
        if not encoded:
            ids.extend(group)
            return
        data = np.frombuffer(b"".join(encoded), dtype=np.uint8)
        piece_ends = np.cumsum(np.fromiter(map(len, encoded), np.int64, len(encoded)))
        word_ends = find_words(data, piece_ends)
        if self._cache.entries + len(word_ends) > self.CACHE_SIZE:
            self._new_cache()
        entries, new_entries = self._cache.look_up(data, word_ends)
        if len(new_entries):
            self._learn(new_entries)
        group_ids = self._as_list(self._cache.gather(entries))
        if len(encoded) == len(group):
            ids += group_ids
            return
        # Put the special tokens back between the pieces' ids.
        word_id_ends = np.cumsum(self._cache.id_lengths[entries])
        last_words = np.searchsorted(word_ends, piece_ends, side="right") - 1
        piece_id_ends = iter(word_id_ends[last_words].tolist())
        start = 0
        for item in group:
            if isinstance(item, int):
                ids.append(item)
            else:
                end = next(piece_id_ends)
                ids += group_ids[start:end]
                start = end

    def _as_list(self, ids: np.ndarray) -> list[int]:
        """``ids.tolist()``, faster."""
        if self._id_objects is None:
            return ids.tolist()
        return self._id_objects.take(ids).tolist()

    def _learn(self, new_entries: np.ndarray) -> None:
        """Store the ids of the table's ``new_entries`` (words not seen before)."""
        table = self._cache
        columns = table.word_bytes, table.word_starts, table.word_lengths
        # ASCII words are pre-tokenized by compiled code, each alone; the others by the pattern,
        # those that start and end where a pre-token does joined together, in one pass, the
        # rest alone. Their bytes are gathered in that order, to be decoded in slices.
        kinds = word_kinds(*columns, new_entries)
        entries = new_entries[np.argsort(kinds, kind="stable")]
        lengths = table.word_lengths[entries]
        blob = joined_words(*columns, entries).tobytes()
        bounds = np.concatenate(([0], np.cumsum(lengths))).tolist()
        ascii_count, joined_count, _ = np.bincount(kinds, minlength=ALONE + 1).tolist()
        joined = ascii_count + joined_count
        if len(entries) < _SMALL_BATCH:
            texts = [blob[a:b].decode("utf-8") for a, b in itertools.pairwise(bounds)]
            word_ids = [self._encode_each(text) for text in texts]
            ids = np.fromiter(chain.from_iterable(word_ids), np.int64)
            id_ends = np.cumsum([len(x) for x in word_ids], dtype=np.int64)
        else:
            data = np.frombuffer(blob, dtype=np.uint8)
            ascii_ends = np.array(bounds[1 : ascii_count + 1], dtype=np.int64)
            starts = [ascii_word_pretoken_starts(data[: bounds[ascii_count]], ascii_ends)]
            others = [(bounds[ascii_count], bounds[joined]), *itertools.pairwise(bounds[joined:])]
            for a, b in others:
                starts.append(a + _pretoken_starts(blob[a:b].decode("utf-8")))
            starts.append(np.array([len(blob)]))
            ids, id_ends = self._pretoken_ids(data, np.concatenate(starts), lengths)
        table.store_ids(entries, ids, id_ends)

    def _pretoken_ids(
        self, data: np.ndarray, starts: np.ndarray, word_lengths: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The ids of the consecutive words of ``data`` (of the given byte lengths) whose
        pre-tokens start at ``starts`` (then ``len(data)``): all ids, and where each word's ids
        end. New words mostly hold known pre-tokens (``"\\Ab`di*ca\"tion\\,"``), so pre-tokens
        have a table of their own and only those not seen before are merged."""
        if self._pretoken_cache.entries + len(starts) > self.CACHE_SIZE:
            self._pretoken_cache = WordTable()
        table = self._pretoken_cache
        entries, new_entries = table.look_up(data, starts[1:])
        if len(new_entries):
            new_bytes = joined_words(
                table.word_bytes, table.word_starts, table.word_lengths, new_entries
            )
            lengths = table.word_lengths[new_entries]
            new_starts = np.concatenate(([0], np.cumsum(lengths)))
            table.store_ids(new_entries, *self._merge_bytes(new_bytes, new_starts, lengths))
        pretoken_id_ends = np.cumsum(table.id_lengths[entries])
        # Each word ends where one of its pre-tokens ends: find which, by byte offsets.
        last_pretokens = np.searchsorted(starts[1:], np.cumsum(word_lengths))
        return table.gather(entries), pretoken_id_ends[last_pretokens]

    def _encode_each(self, text: str) -> list[int]:
        """The ids of ``text`` by the reference's Python merge loop."""
        return list(chain.from_iterable(map(self._encode_pretoken, pretokenize(text))))

    def _merge_bytes(
        self, data: np.ndarray, starts: np.ndarray, text_byte_lengths: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The ids of the consecutive texts of ``data`` (UTF-8, of the given byte lengths, none
        empty) whose pre-tokens start at ``starts`` (then ``len(data)``): all ids, and where
        each text's ids end."""
        ids = self._byte_id_array[data]
        ends = merge_pretokens(
            ids, starts, self._rank_keys, self._rank_values, self._merged_ids, self._width
        )
        # Each text ends where one of its pre-tokens ends: find which, by byte offsets.
        id_ends = ends[np.searchsorted(starts[1:], np.cumsum(text_byte_lengths))]
        return ids[: id_ends[-1] if len(id_ends) else 0].copy(), id_ends


def _pretoken_starts(text: str) -> np.ndarray:
    """Where the pre-tokens of ``text`` start, as offsets into its UTF-8 bytes."""
    pretokens = pretokenize(text)
    lengths = np.fromiter(map(len, map(str.encode, pretokens)), np.int64, len(pretokens))
    return np.cumsum(lengths) - lengths


def _cut(piece: str, size: int) -> Iterator[str]:
    """``piece`` in parts of about ``size`` characters (or more), each cut before a space that
    follows a non-whitespace character, where a pre-token always ends: the parts' ids, one after
    the other, are the piece's. A group thus never holds more than about ``_GROUP_CHARACTERS``
    characters of text, however long a document."""
    start = 0
    while len(piece) - start > size:
        cut = _WORD_START.search(piece, start + size)
        if cut is None:
            break
        yield piece[start : cut.start()]
        start = cut.start()
    yield piece[start:]


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


# A space after a non-whitespace character: the first character of a word (see ``find_words``).
_WORD_START = re.compile(f"(?<=[^{WHITESPACE}]) ")
