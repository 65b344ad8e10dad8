"""A byte-level BPE tokenizer: text to token ids and back.

Encoding mirrors training: split on special tokens (longest match first), cut each ordinary
piece into GPT-2 pre-tokens, then inside each pre-token start from its UTF-8 bytes and keep
applying the earliest-learned merge that applies, until none does.

Decoding concatenates the tokens' bytes and decodes them as UTF-8, replacing malformed
sequences (e.g. a prefix of a multi-byte character) with U+FFFD.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from itertools import chain, pairwise

from cs336_basics.pretokenization import (
    check_special_tokens,
    last_safe_boundary,
    pretokenize,
    special_token_regex,
    split_on_special_tokens,
    split_words,
)

# The rank of a pair of tokens that no merge joins: later than every real merge.
NO_MERGE = 1 << 62


class Tokenizer:
    """Encodes text with a BPE ``vocab`` (id -> bytes) and its ordered ``merges``.

    Special tokens missing from ``vocab`` are appended with new ids. Every merge must join two
    tokens of the vocabulary into a third.
    """

    # The cache of word ids is emptied when it grows past this many entries.
    CACHE_SIZE = 1 << 18

    def __init__(
        self,
        vocab: dict[int, bytes],
        merges: list[tuple[bytes, bytes]],
        special_tokens: list[str] | None = None,
    ) -> None:
        # BEGIN SOLUTION
        self.vocab: dict[int, bytes] = dict(vocab)
        self.merges: list[tuple[bytes, bytes]] = list(merges)
        self.special_tokens: list[str] = check_special_tokens(special_tokens)
        self.token_ids: dict[bytes, int] = {}
        for token_id, token in self.vocab.items():
            if not isinstance(token_id, int) or not isinstance(token, bytes):
                raise TypeError(f"vocab must map int ids to bytes, got {token_id!r}: {token!r}")
            self.token_ids.setdefault(token, token_id)
        for special in self.special_tokens:
            encoded = special.encode("utf-8")
            if encoded not in self.token_ids:
                new_id = max(self.vocab, default=-1) + 1
                self.vocab[new_id] = encoded
                self.token_ids[encoded] = new_id
        self.special_ids: dict[str, int] = {
            s: self.token_ids[s.encode("utf-8")] for s in self.special_tokens
        }
        missing = [bytes([b]) for b in range(256) if bytes([b]) not in self.token_ids]
        if missing:
            raise ValueError(
                f"vocab lacks single-byte tokens {missing[:8]}; byte-level BPE needs all 256"
            )
        self.byte_ids: list[int] = [self.token_ids[bytes([b])] for b in range(256)]

        # (left id, right id) -> rank: the lower the rank, the earlier the merge applies.
        self.merge_ranks: dict[tuple[int, int], int] = {}
        self.merged_ids: list[int] = []  # rank -> id of the token the merge makes
        for rank, (left, right) in enumerate(self.merges):
            try:
                pair = (self.token_ids[left], self.token_ids[right])
                merged = self.token_ids[left + right]
            except KeyError:
                raise ValueError(
                    f"merge {rank} ({left!r}, {right!r}) uses or makes a token not in the vocab"
                ) from None
            self.merge_ranks.setdefault(pair, rank)
            self.merged_ids.append(merged)

        self._special_regex = special_token_regex(self.special_tokens)
        self._longest_special = max((len(s) for s in self.special_tokens), default=0)
        self._new_cache()
        # END SOLUTION

    def _new_cache(self) -> None:
        # Words' ids, and pre-tokens' merged ids: a word not seen before mostly holds pre-tokens
        # seen before, and each cache is emptied when full without emptying the other.
        self._cache = _Cache(self._encode_word, self.CACHE_SIZE)
        self._pretoken_cache = _Cache(self._encode_pretoken, self.CACHE_SIZE)

    def __getstate__(self) -> dict:
        # The caches refer back to this object; start empty ones on unpickling instead.
        caches = ("_cache", "_pretoken_cache")
        return {key: value for key, value in self.__dict__.items() if key not in caches}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._new_cache()

    @classmethod
    def from_files(
        cls,
        vocab_filepath: str | os.PathLike,
        merges_filepath: str | os.PathLike,
        special_tokens: list[str] | None = None,
    ) -> Tokenizer:
        """Load a GPT-2-format ``vocab.json`` and ``merges.txt`` (ours or another tool's)."""
        from cs336_basics.tokenizer_files import load_merges, load_vocab

        return cls(load_vocab(vocab_filepath), load_merges(merges_filepath), special_tokens)

    def save(self, vocab_filepath: str | os.PathLike, merges_filepath: str | os.PathLike) -> None:
        """Write ``vocab.json`` and ``merges.txt`` in the GPT-2 format (atomically)."""
        from cs336_basics.tokenizer_files import save_merges, save_vocab

        save_vocab(self.vocab, vocab_filepath)
        save_merges(self.merges, merges_filepath)

    def __len__(self) -> int:
        return len(self.vocab)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``."""
        # BEGIN SOLUTION
        ids: list[int] = []
        word_ids = self._cache.__getitem__  # computes and stores the ids of a new word
        for piece, is_special in split_on_special_tokens(text, self._special_regex):
            if is_special:
                ids.append(self.special_ids[piece])
            else:
                ids.extend(chain.from_iterable(map(word_ids, split_words(piece))))
        return ids
        # END SOLUTION

    def _encode_word(self, word: str) -> list[int]:
        """The ids of one word: those of its pre-tokens, in order, each merged only once."""
        # BEGIN SOLUTION
        pretokens = pretokenize(word)
        return list(chain.from_iterable(map(self._pretoken_cache.__getitem__, pretokens)))
        # END SOLUTION

    def _encode_pretoken(self, pretoken: str) -> list[int]:
        """Apply the merges, earliest-learned first, to the bytes of one pre-token."""
        # BEGIN SOLUTION
        ids = [self.byte_ids[b] for b in pretoken.encode("utf-8")]
        rank_of = self.merge_ranks.get
        # ranks[i] is the rank of the merge joining ids[i] and ids[i + 1] (NO_MERGE if none).
        ranks = [rank_of(pair, NO_MERGE) for pair in pairwise(ids)]
        while ranks:
            best = min(ranks)
            if best == NO_MERGE:
                break
            # The leftmost pair of that rank. Merging it now and any later one in the next rounds
            # is the same as merging all non-overlapping occurrences left to right.
            i = ranks.index(best)
            ids[i : i + 2] = [self.merged_ids[best]]
            # Only the pairs around the new token change: re-rank them, drop the merged pair.
            del ranks[i]
            if i > 0:
                ranks[i - 1] = rank_of((ids[i - 1], ids[i]), NO_MERGE)
            if i < len(ranks):
                ranks[i] = rank_of((ids[i], ids[i + 1]), NO_MERGE)
        return ids
        # END SOLUTION

    def encode_iterable(self, iterable: Iterable[str]) -> Iterator[int]:
        """Lazily yield the ids of the concatenation of ``iterable``, typically an open file
        (its lines): exactly ``encode("".join(iterable))``, with memory bounded by the longest
        line rather than the file's size. (Graded on a file handle and on a list of lines; the
        advice tests also cut text anywhere, even inside a word.)
        """
        # BEGIN SOLUTION
        # Only the current chunk and an undecided tail are held: text is encoded up to the last
        # safe boundary, whose tokens cannot depend on what comes next (see
        # cs336_basics.pretokenization). A tail without any safe boundary (one enormous
        # pre-token) is kept until one appears.
        buffer = ""
        # Positions up to ``len(buffer) - lookahead`` are settled: a special token starting
        # there is wholly inside the buffer, and the character after them is known.
        lookahead = max(1, self._longest_special)
        searched = 0
        for chunk in iterable:
            buffer += chunk
            stop = len(buffer) - lookahead
            if stop <= searched:
                continue
            cut = last_safe_boundary(buffer, searched, stop, self._special_regex)
            if cut <= 0:
                # Nothing safe yet; next time only look past what has been searched.
                searched = stop
                continue
            yield from self.encode(buffer[:cut])
            buffer = buffer[cut:]
            searched = 0
        yield from self.encode(buffer)
        # END SOLUTION

    def decode(self, ids: Iterable[int]) -> str:
        """The text of ``ids``; malformed UTF-8 becomes U+FFFD. Unknown ids raise ``ValueError``."""
        # BEGIN SOLUTION
        vocab = self.vocab
        ids = list(ids)
        try:
            data = b"".join([vocab[i] for i in ids])
        except (KeyError, TypeError):
            bad = next(i for i in ids if i not in vocab)
            raise ValueError(f"unknown token id {bad!r} (vocab has {len(vocab)} tokens)") from None
        return data.decode("utf-8", errors="replace")
        # END SOLUTION


class _Cache(dict):
    """Maps a string to its ids, computing a missing entry with ``function``; emptied when full.

    Text recurs a lot, so the tokenizer caches ids per word (``" happy."``, cut as in
    :func:`~cs336_basics.pretokenization.split_words`). A new word is cut into pre-tokens, and
    each pre-token is looked up in a second cache, so a pre-token is merged only the first time
    it is seen. The common case is one dictionary lookup per word.

    Lookups of known strings stay inside the dictionary's C code (``map(cache.__getitem__, ...)``
    calls no Python function), which is what makes warm encoding fast.
    """

    def __init__(self, function: Callable[[str], list[int]], max_size: int) -> None:
        super().__init__()
        self.function = function
        self.max_size = max_size

    def __missing__(self, key: str) -> list[int]:
        if len(self) >= self.max_size:
            self.clear()
        value = self[key] = self.function(key)
        return value
