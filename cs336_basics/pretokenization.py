"""Pre-tokenization: cutting text into the pieces BPE works inside.

BPE never merges across a pre-token boundary. Text is first split on the special tokens (so
no merge crosses ``<|endoftext|>`` and special tokens are never broken apart), then each
ordinary segment is cut with GPT-2's regular expression into words with their leading space,
runs of digits, runs of punctuation, contractions and whitespace.

Large files are pre-tokenized in pieces. A piece may only end at a *safe boundary*: a
position where pre-tokenizing the two sides separately gives exactly the pre-tokens of the
whole. Two kinds of position are safe:

* the start of a special-token occurrence (text is split there anyway);
* a space or newline whose preceding character is printable ASCII: no GPT-2 pre-token
  contains a non-space character followed by whitespace, and the regex never looks back,
  so a match ends there and the next one starts there whatever surrounds it.

Either kind is rejected when it lies strictly inside a special-token occurrence.

Inside one ordinary segment the second rule holds more generally: wherever whitespace follows
a non-whitespace character, a pre-token ends. So a segment can also be cut into *words*, each a
run of whitespace followed by a run of non-whitespace (``" happy."``, ``"\n\nOne"``), and the
pre-tokens of the segment are those of its words, in order. Words recur even more than
pre-tokens, which makes them good keys for an encoding cache.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterator, Sequence

import regex

# The pattern GPT-2 uses (also tiktoken's ``r50k_base``): contractions, optional space +
# letters, optional space + digits, optional space + other symbols, whitespace not followed by
# a non-space (so the last space attaches to the next word), and any other whitespace.
GPT2_PRETOKENIZER_PATTERN = (
    r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
)
GPT2_PRETOKENIZER = regex.compile(GPT2_PRETOKENIZER_PATTERN)

# Words: whitespace, then non-whitespace (or trailing whitespace). For ASCII text the standard
# library's ``re`` with ASCII classes finds the same words faster (``\s`` is [\t\n\v\f\r ] in both).
_WORDS = regex.compile(r"\s*\S+|\s+")
_ASCII_WORDS = re.compile(r"\s*\S+|\s+", re.ASCII)

# A printable ASCII character followed by a space or newline: the safe boundary sits between.
_SAFE_WHITESPACE = regex.compile(r"(?<=[!-~])[ \n]")
_SAFE_WHITESPACE_BYTES = regex.compile(rb"(?<=[!-~])[ \n]")


def check_special_tokens(special_tokens: Sequence[str] | None) -> list[str]:
    """Return ``special_tokens`` as a list, refusing empty, non-string and duplicate tokens."""
    tokens = list(special_tokens or [])
    for token in tokens:
        if not isinstance(token, str):
            raise TypeError(f"special tokens must be strings, got {token!r}")
        if token == "":
            raise ValueError("special tokens must be non-empty strings, got ''")
    duplicates = sorted({token for token in tokens if tokens.count(token) > 1})
    if duplicates:
        raise ValueError(f"duplicate special tokens: {duplicates}")
    return tokens


def special_token_regex(special_tokens: Sequence[str]) -> regex.Pattern | None:
    """A regex matching any special token, longest first (so ``<|a|><|b|>`` beats ``<|a|>``)."""
    if not special_tokens:
        return None
    ordered = sorted(special_tokens, key=len, reverse=True)
    return regex.compile("|".join(regex.escape(token) for token in ordered))


def split_on_special_tokens(
    text: str, special_regex: regex.Pattern | None
) -> Iterator[tuple[str, bool]]:
    """Yield ``(piece, is_special)`` in order; ordinary pieces are never empty."""
    if special_regex is None:
        if text:
            yield text, False
        return
    start = 0
    for match in special_regex.finditer(text):
        if match.start() > start:
            yield text[start : match.start()], False
        yield match.group(), True
        start = match.end()
    if start < len(text):
        yield text[start:], False


def split_words(text: str) -> list[str]:
    """Cut ``text`` (no special tokens in it) before every whitespace run that follows a
    non-whitespace character; pre-tokenizing the words one by one gives the pre-tokens of ``text``."""
    return (_ASCII_WORDS if text.isascii() else _WORDS).findall(text)


def count_pretokens(text: str, special_tokens: Sequence[str] = ()) -> Counter[bytes]:
    """Count the UTF-8 encoded pre-tokens of ``text``; special tokens are dropped, not counted."""
    # BEGIN SOLUTION
    special_regex = special_token_regex(special_tokens)
    counts: Counter[str] = Counter()
    for piece, is_special in split_on_special_tokens(text, special_regex):
        if not is_special:
            counts.update(GPT2_PRETOKENIZER.findall(piece))
    return Counter({word.encode("utf-8"): n for word, n in counts.items()})
    # END SOLUTION


def last_safe_boundary(
    text: str, start: int, stop: int, special_regex: regex.Pattern | None
) -> int:
    """The largest safe boundary ``p`` with ``start < p <= stop`` in ``text``, or ``-1``.

    Special tokens are looked for in ``text`` itself, so every special token that could contain a
    position up to ``stop`` must lie entirely inside ``text``. Ends of special tokens count as
    safe too (they are where the next ordinary segment starts).
    """
    best = -1
    spans = [] if special_regex is None else [m.span() for m in special_regex.finditer(text)]
    for s, e in spans:
        if start < s <= stop:
            best = max(best, s)
        if start < e <= stop:
            best = max(best, e)
    window_start = max(start, best)
    for match in reversed(list(_SAFE_WHITESPACE.finditer(text, window_start, stop + 1))):
        p = match.start()
        if p > start and not any(s < p < e for s, e in spans):
            return max(best, p)
    return best


def read_text_range(path: str | os.PathLike, start: int, end: int) -> str:
    """Bytes ``[start, end)`` of a UTF-8 file as text; a bad byte is reported by file offset."""
    with open(path, "rb") as file:
        file.seek(start)
        data = file.read(end - start)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(
            f"{str(path)!r} is not valid UTF-8: bad byte at offset {start + error.start}"
        ) from None


def find_chunk_boundaries(
    path: str | os.PathLike, num_chunks: int, special_tokens: Sequence[str] = ()
) -> list[int]:
    """Byte offsets ``[0, ..., file_size]`` cutting the file into about ``num_chunks`` pieces.

    Each inner offset is the first safe boundary at or after an evenly spaced target, so the
    pieces can be pre-tokenized independently and the counts added up. Fewer pieces come back
    when the file has few safe boundaries (a file with none is a single piece).
    """
    file_size = os.path.getsize(path)
    specials = [token.encode("utf-8") for token in special_tokens]
    boundaries = [0]
    with open(path, "rb") as file:
        for i in range(1, max(1, num_chunks)):
            target = max(file_size * i // num_chunks, boundaries[-1] + 1)
            boundary = _next_safe_offset(file, target, file_size, specials)
            if boundary >= file_size:
                break
            boundaries.append(boundary)
    boundaries.append(file_size)
    return boundaries


def _next_safe_offset(file, offset: int, file_size: int, specials: list[bytes]) -> int:
    """The first safe boundary at or after byte ``offset``, or ``file_size`` if there is none."""
    longest = max((len(token) for token in specials), default=1)
    window = 1 << 16
    while offset < file_size:
        # Read ``longest`` bytes of context on each side so straddling special tokens are seen.
        context_start = max(0, offset - longest)
        file.seek(context_start)
        data = file.read(offset - context_start + window + longest)
        lo, hi = offset - context_start, min(len(data), offset - context_start + window)
        spans = []
        for token in specials:
            found = data.find(token)
            while found != -1:
                spans.append((found, found + len(token)))
                found = data.find(token, found + 1)
        candidates = [s for s, _ in spans if lo <= s < hi]
        candidates += [m.start() for m in _SAFE_WHITESPACE_BYTES.finditer(data, lo, hi)]
        for candidate in sorted(candidates):
            if not any(s < candidate < e for s, e in spans):
                return context_start + candidate
        offset += window
    return file_size
