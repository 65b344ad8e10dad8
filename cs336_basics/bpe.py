"""Training a byte-level BPE tokenizer.

The vocabulary starts as the 256 single bytes plus the special tokens. Training repeatedly
merges the most frequent adjacent pair of tokens inside pre-tokens into a new token, until the
vocabulary has ``vocab_size`` entries. Ties go to the lexicographically greater pair of
``bytes``, so the result is fully determined by the corpus.

Ids: ``0..255`` are the single bytes (id ``b`` is ``bytes([b])``), then the special tokens in
the order given, then one id per merge in the order the merges were made.
"""

from __future__ import annotations

import gc
import heapq
import os
import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from cs336_basics.chunking import find_chunk_boundaries
from cs336_basics.pretokenization import check_special_tokens
from cs336_basics.pretokenize_helper import count_shares
from cs336_basics.progress import progress_bar

# Each process reads its share of the file in chunks of about this size: it holds one chunk's
# text at a time (as bytes and as str), beside the counts, so its memory does not grow with the file.
CHUNK_BYTES = 1024 * 1024
# Unless told how many processes to use, files smaller than this are pre-tokenized in this one:
# starting a helper process would take longer than the work.
MIN_PARALLEL_BYTES = 4 * 1024 * 1024


def train_bpe(
    input_path: str | os.PathLike,
    vocab_size: int,
    special_tokens: Sequence[str] = (),
    *,
    num_workers: int | None = None,
    progress: bool = False,
    timings: dict[str, float] | None = None,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Train byte-level BPE on the UTF-8 text file ``input_path``.

    Args:
        input_path: the training corpus (UTF-8 text).
        vocab_size: the size of the final vocabulary, including the 256 bytes and the special
            tokens. Training stops early if no pair is left to merge.
        special_tokens: strings never split or merged across (e.g. ``"<|endoftext|>"``);
            each gets its own id and is not counted as text.
        num_workers: pre-tokenization processes (default: as many as suit the file's size and
            the machine).
        progress: show a progress bar for each phase.
        timings: if given, filled with seconds per phase (``pretokenize``, ``merge``, ``total``).

    Returns:
        ``(vocab, merges)``: ``vocab`` maps id to token bytes; ``merges`` lists the merged pairs
        in the order they were made.
    """
    # BEGIN SOLUTION
    special_tokens = check_special_tokens(special_tokens)
    minimum = 256 + len(special_tokens)
    if not isinstance(vocab_size, int) or vocab_size < minimum:
        raise ValueError(
            f"vocab_size must be an integer of at least {minimum} (256 bytes + "
            f"{len(special_tokens)} special tokens), got {vocab_size!r}"
        )
    started = time.perf_counter()
    word_counts = pretokenize_file(
        input_path, special_tokens, num_workers=num_workers, progress=progress
    )
    if not word_counts:
        raise ValueError(f"{os.fspath(input_path)!r} contains no text to train on (empty corpus)")
    pretokenized = time.perf_counter()
    vocab: dict[int, bytes] = {i: bytes([i]) for i in range(256)}
    for token in special_tokens:
        vocab[len(vocab)] = token.encode("utf-8")
    merges = merge_pairs(word_counts, vocab, vocab_size - len(vocab), progress=progress)
    if timings is not None:
        finished = time.perf_counter()
        timings.update(
            pretokenize=pretokenized - started,
            merge=finished - pretokenized,
            total=finished - started,
        )
    return vocab, merges
    # END SOLUTION


def pretokenize_file(
    input_path: str | os.PathLike,
    special_tokens: Sequence[str],
    *,
    num_workers: int | None = None,
    progress: bool = False,
) -> Counter[bytes]:
    """Count the pre-tokens of a whole file, in ``num_workers`` processes (this one and helpers,
    see :mod:`cs336_basics.pretokenize_helper`), each counting a share of the file's chunks."""
    path = os.fspath(input_path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"training corpus not found (or not a file): {path!r}")
    if not os.access(path, os.R_OK):
        raise PermissionError(f"training corpus is not readable: {path!r}")
    file_size = os.path.getsize(path)
    if num_workers is None:
        num_workers = (os.cpu_count() or 1) if file_size >= MIN_PARALLEL_BYTES else 1
    boundaries = find_chunk_boundaries(path, -(-file_size // CHUNK_BYTES), special_tokens)
    chunks = list(zip(boundaries, boundaries[1:], strict=False))
    # One run of consecutive chunks per process, of about equal size.
    n = max(1, min(num_workers, len(chunks)))
    shares = [chunks[len(chunks) * i // n : len(chunks) * (i + 1) // n] for i in range(n)]
    bar = progress_bar(
        total=file_size, unit="B", unit_scale=True, desc="pre-tokenizing", disable=not progress
    )
    with bar:
        return count_shares(path, shares, tuple(special_tokens), bar.update)


# Ends every descending key; it sorts after every character chr(255 - b) a key is made of.
_KEY_END = chr(256)


def _descending_key(token: bytes) -> str:
    """A string that sorts in the reverse order of ``token``: byte ``b`` becomes chr(255 - b), and
    ``_KEY_END`` puts a prefix after its extensions (b"a" < b"ab", so its key must be greater)."""
    return "".join(chr(255 - b) for b in token) + _KEY_END


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause Python's cycle collector. Merging allocates millions of small lists and tuples, none
    in a reference cycle, and the collector would scan all of them again and again."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def merge_pairs(
    word_counts: Counter[bytes], vocab: dict[int, bytes], num_merges: int, *, progress: bool = False
) -> list[tuple[bytes, bytes]]:
    """Make up to ``num_merges`` merges over the pre-token table, adding each new token to ``vocab``.

    The most frequent adjacent pair (ties: the greater pair of bytes) is merged each step.
    ``word_counts`` is emptied once read: merging needs the memory more.

    How training is fast, in two phases:

    1. **Pre-tokenization** (see :mod:`cs336_basics.pretokenization`) turns the corpus into a
       table of distinct pre-tokens and their counts. The file is cut at safe boundaries into
       chunks; this process and helper processes (:mod:`cs336_basics.pretokenize_helper`) each
       open the file and count a share of the chunks, reading one at a time, so a multi-GB file
       never passes through one process's memory. Counts are independent of how the file was
       cut, so every number of processes gives the same result.
    2. **Merging** works on the distinct pre-tokens only (a few thousand to a few hundred
       thousand), keeping the count of every adjacent pair and, for each pair, the pre-tokens it
       occurs in. A merge rewrites only the pre-tokens containing the pair and updates the counts
       of the pairs that changed (for one occurrence, just the pairs on either side of it, once for
       all the pre-tokens sharing that neighbour); a heap with lazy deletion yields the next best
       pair. A pre-token is held as a string with one character per token, so finding and replacing
       a pair is the standard library's string search (vocabularies of up to 1,114,112 tokens, the
       number of Unicode code points).
    """
    # BEGIN SOLUTION
    # Pre-tokens as strings with one character per token, chr(token id): the standard library's
    # string search and replace (in C) then find and merge pairs. A pair is a 2-character string.
    words = [word.decode("latin-1") for word in sorted(word_counts)]  # byte b is chr(b)
    counts = [word_counts[word.encode("latin-1")] for word in words]
    # The table is not needed any more; its memory is (16 MB of a 186 MB peak at 100 MB of
    # English-like text, vocab 32,000).
    word_counts.clear()
    # Each pair's count, and the pre-tokens it occurs in: each listed once (a run like "aaaa..."
    # would otherwise be searched once per occurrence) and, lazily, some it has left.
    pair_counts: dict[str, int] = {}
    pair_words: defaultdict[str, list[int]] = defaultdict(list)
    for index, word in enumerate(words):
        pairs = _pairs(word)
        for pair in pairs:
            pair_counts[pair] = pair_counts.get(pair, 0) + counts[index]
        for pair in dict.fromkeys(pairs):
            pair_words[pair].append(index)

    # heapq pops the smallest entry, so an entry is (-count, descending key of the pair, pair):
    # the most frequent pair first, and among equal counts the greatest pair of bytes. A pair's
    # key is its two tokens' keys joined, which compares like the tuple of their bytes, reversed.
    keys = {chr(token_id): _descending_key(token) for token_id, token in vocab.items()}
    heap = [(-count, keys[pair[0]] + keys[pair[1]], pair) for pair, count in pair_counts.items()]
    heapq.heapify(heap)
    # Lazy heap: every pair has one entry, whose count is >= its true count (a pair's count only
    # rises in the merge that makes its newer token, which pushes its entry). A popped entry whose
    # count is stale is pushed back with the true count; a fresh one is the best pair.
    merges: list[tuple[bytes, bytes]] = []
    bar = progress_bar(total=num_merges, unit="merge", desc="merging", disable=not progress)
    with bar, _gc_paused():
        while len(merges) < num_merges and heap:
            negative_count, key, pair = heapq.heappop(heap)
            true_count = pair_counts.get(pair, 0)
            if true_count != -negative_count:
                if true_count > 0:
                    heapq.heappush(heap, (-true_count, key, pair))
                continue
            new_token = chr(len(vocab))
            merges.append((vocab[ord(pair[0])], vocab[ord(pair[1])]))
            vocab[len(vocab)] = merges[-1][0] + merges[-1][1]
            keys[new_token] = keys[pair[0]][:-1] + keys[pair[1]]
            bar.update()
            new_pairs = _merge_words(words, counts, pair_counts, pair_words, pair, new_token)
            for new_pair, count in new_pairs.items():
                heapq.heappush(heap, (-count, keys[new_pair[0]] + keys[new_pair[1]], new_pair))
    return merges
    # END SOLUTION


def _pairs(word: str) -> list[str]:
    """The adjacent pairs of tokens in ``word``, in order, as 2-character strings."""
    return [word[i : i + 2] for i in range(len(word) - 1)]


def _total_count(counts: list[int], indices: list[int]) -> int:
    """The summed count of the pre-tokens at ``indices``."""
    return sum(map(counts.__getitem__, indices))


def _lower(
    pair_counts: dict[str, int], pair_words: dict[str, list[int]], pair: str, count: int
) -> None:
    """Take ``count`` off the count of ``pair``; a pair left in no pre-token is forgotten (it can
    never come back: the only pairs that appear are those holding the newest token)."""
    left = pair_counts[pair] - count
    if left:
        pair_counts[pair] = left
    else:
        del pair_counts[pair]
        pair_words.pop(pair, None)


def _merge_words(
    words: list[str],
    counts: list[int],
    pair_counts: dict[str, int],
    pair_words: defaultdict[str, list[int]],
    pair: str,
    new_token: str,
) -> dict[str, int]:
    """In every pre-token holding ``pair``, replace each non-overlapping occurrence, left to
    right, by ``new_token``; update ``pair_counts`` and ``pair_words`` to match.

    Returns the counts of the new pairs, those holding ``new_token`` (all other counts can only
    have fallen). Pairs that disappear are removed.
    """
    # BEGIN SOLUTION
    # One occurrence (the common case): (x, a, b, y) -> (x, new, y) turns (x, a) into (x, new)
    # and (b, y) into (new, y). Pre-tokens are grouped by x and by y to move counts per group.
    before: defaultdict[str, list[int]] = defaultdict(list)
    after: defaultdict[str, list[int]] = defaultdict(list)
    several: list[tuple[int, str]] = []  # pre-tokens with more than one occurrence, as they were
    for index in pair_words.pop(pair):
        word = words[index]
        i = word.find(pair)
        if i < 0:
            continue  # ``pair_words`` may list pre-tokens the pair has left
        merged = words[index] = word.replace(pair, new_token)
        if len(merged) < len(word) - 1:
            several.append((index, word))
            continue
        if i > 0:
            before[word[i - 1]].append(index)
        if i + 2 < len(word):
            after[word[i + 2]].append(index)
    new_counts: dict[str, int] = {}
    for x, indices in before.items():
        count = _total_count(counts, indices)
        _lower(pair_counts, pair_words, x + pair[0], count)
        new_counts[x + new_token] = count
        pair_words[x + new_token] = indices
    for y, indices in after.items():
        count = _total_count(counts, indices)
        _lower(pair_counts, pair_words, pair[1] + y, count)
        new_counts[new_token + y] = count
        pair_words[new_token + y] = indices
    for index, word in several:  # the pairs of the merged word, less those of the word before
        count = counts[index]
        change = Counter(_pairs(words[index]))
        change.subtract(_pairs(word))
        for changed, times in change.items():
            if new_token in changed:
                new_counts[changed] = new_counts.get(changed, 0) + times * count
                pair_words[changed].append(index)
            else:  # merging only takes pairs of older tokens away (times <= 0)
                _lower(pair_counts, pair_words, changed, -times * count)
    pair_counts.pop(pair, None)  # every occurrence was merged
    pair_counts.update(new_counts)
    return new_counts
    # END SOLUTION
