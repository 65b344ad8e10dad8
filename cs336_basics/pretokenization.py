"""Pre-tokenization: cutting text into the pieces BPE works inside.

BPE never merges across a pre-token boundary. Text is first split on the special tokens (so
no merge crosses ``<|endoftext|>`` and special tokens are never broken apart), then each
ordinary segment is cut with GPT-2's regular expression into words with their leading space,
runs of digits, runs of punctuation, contractions and whitespace.

Large files are pre-tokenized in pieces (cut by :mod:`cs336_basics.chunking`), and
``Tokenizer.encode_iterable`` encodes a stream piece by piece. A piece may only end at a *safe boundary*: a
position where pre-tokenizing the two sides separately gives exactly the pre-tokens of the
whole. Two kinds of position are safe:

* the start of a special-token occurrence (text is split there anyway);
* a space or newline whose preceding character is printable ASCII: no GPT-2 pre-token
  contains a non-space character followed by whitespace, and the regex never looks back,
  so a match ends there and the next one starts there whatever surrounds it.

Either kind is rejected when it lies strictly inside a special-token occurrence.

Inside one ordinary segment the second rule holds more generally: wherever whitespace follows
a non-whitespace character, a pre-token ends, and so it does before the last character of a
run of whitespace that non-whitespace follows (the pattern's ``\\s+(?!\\S)`` leaves that character
to the next pre-token). So a segment can also be cut into *words*, each one whitespace
character or none followed by a run of non-whitespace (``" happy."``, ``"\nOne"``), or a run of
whitespace (``"\n   "`` before ``" the"`` in an indented line), and the pre-tokens of the
segment are those of its words, in order. Words recur even more than pre-tokens, which makes
them good keys for an encoding cache.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Sequence
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import regex

# Re-exported: the file-cutting helpers used to live here.

# The pattern GPT-2 uses (also tiktoken's ``r50k_base``): contractions, optional space +
# letters, optional space + digits, optional space + other symbols, whitespace not followed by
# a non-space (so the last space attaches to the next word), and any other whitespace.
GPT2_PRETOKENIZER_PATTERN = (
    r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
)
# The same pattern for ASCII text, where \p{L} is [A-Za-z], \p{N} is [0-9] and \s is [\t\n\v\f\r ]:
# the standard library's ``re`` runs it about twice as fast as ``regex`` runs the general one.
_GPT2_ASCII = re.compile(
    r"""'(?:[sdmt]|ll|ve|re)| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+""", re.ASCII
)

# Unicode's White_Space characters: exactly what ``\s`` matches in the GPT-2 pattern (``regex``).
# Spelled out so the standard library's faster ``re`` can cut words with the same notion of
# whitespace (its own ``\s`` also takes \x1c-\x1f, which the pattern treats as symbols).
WHITESPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
# Words: one whitespace character or none, then non-whitespace; or whitespace that no
# non-whitespace follows (a run before a word leaves its last character to it, as ``\s+(?!\S)``).
_WORDS = re.compile(f"[{WHITESPACE}]?[^{WHITESPACE}]+|[{WHITESPACE}]+(?![^{WHITESPACE}])")

# A printable ASCII character followed by a space or newline: the safe boundary sits between.
_SAFE_WHITESPACE = re.compile(r"(?<=[!-~])[ \n]")
# A run of characters that are not ASCII.
_NOT_ASCII = re.compile(r"[^\x00-\x7f]+")


@cache
def gpt2_pretokenizer() -> regex.Pattern:
    """GPT-2's pattern compiled by the ``regex`` module, which knows ``\\p{L}`` and ``\\p{N}``.

    Imported on first use: ``regex`` takes about 11 MB in each process that imports it, and
    pre-tokenizing ASCII text (``_GPT2_ASCII``) never needs it.
    """
    import regex

    return regex.compile(GPT2_PRETOKENIZER_PATTERN)


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


def special_token_regex(special_tokens: Sequence[str]) -> re.Pattern | None:
    """A regex matching any special token, longest first (so ``<|a|><|b|>`` beats ``<|a|>``)."""
    if not special_tokens:
        return None
    ordered = sorted(special_tokens, key=len, reverse=True)
    return re.compile("|".join(re.escape(token) for token in ordered))


def split_on_special_tokens(
    text: str, special_regex: re.Pattern | None
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
    non-whitespace character and before the last character of a whitespace run that
    non-whitespace follows; pre-tokenizing the words one by one gives the pre-tokens of ``text``."""
    return _WORDS.findall(text)


def pretokenize(text: str) -> list[str]:
    """The GPT-2 pre-tokens of ``text`` (which holds no special tokens), in order."""
    return _GPT2_ASCII.findall(text) if text.isascii() else _pretokenize_mixed(text)


def _pretokenize_mixed(text: str) -> list[str]:
    """The GPT-2 pre-tokens of ``text``, which is not all ASCII: only the pieces between safe
    boundaries that hold non-ASCII characters need ``regex``'s general pattern, which is about
    half as fast as ``re`` on the ASCII pattern (text in English is mostly ASCII even so)."""
    general = gpt2_pretokenizer()
    pretokens: list[str] = []
    done = 0  # the pre-tokens of text[:done] are in ``pretokens``; ``done`` is a safe boundary
    for run in _NOT_ASCII.finditer(text):
        if run.start() < done:
            continue  # inside the last general piece
        start = _safe_boundary_before(text, done, run.start())
        after = _SAFE_WHITESPACE.search(text, run.end())
        end = after.start() if after else len(text)
        pretokens += _GPT2_ASCII.findall(text, done, start)
        pretokens += general.findall(text, start, end)
        done = end
    pretokens += _GPT2_ASCII.findall(text, done)
    return pretokens


def _safe_boundary_before(text: str, start: int, stop: int) -> int:
    """The last safe boundary in ``text[start:stop]`` (a space or newline whose preceding
    character is printable ASCII), or ``start`` if there is none."""
    while (p := max(text.rfind(" ", start, stop), text.rfind("\n", start, stop))) > start:
        if "!" <= text[p - 1] <= "~":
            return p
        stop = p
    return start


def count_pretokens(text: str, special_tokens: Sequence[str] = ()) -> Counter[bytes]:
    """Count the UTF-8 encoded pre-tokens of ``text``; special tokens are dropped, not counted."""
    # No solution markers here: the trainer runs ``_count_pretoken_strings`` (marked), not this,
    # so the course's generated mutants belong there, where the tests can see them.
    counts: Counter[str] = Counter()
    _count_pretoken_strings(text, special_tokens, counts)
    return Counter({word.encode("utf-8"): n for word, n in counts.items()})


def _count_pretoken_strings(text: str, special_tokens: Sequence[str], counts: Counter[str]) -> None:
    """Add the pre-tokens of ``text`` to ``counts``, as strings: a file's chunks are counted
    into one table and encoded once at the end (a table per chunk, encoded and added up,
    took a fifth of the counting time)."""
    # BEGIN SOLUTION
    special_regex = special_token_regex(special_tokens)
    for piece, is_special in split_on_special_tokens(text, special_regex):
        if not is_special:
            counts.update(pretokenize(piece))
    # END SOLUTION


def last_safe_boundary(text: str, start: int, stop: int, special_regex: re.Pattern | None) -> int:
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
