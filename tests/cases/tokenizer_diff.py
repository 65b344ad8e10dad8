"""Where a tokenizer's output first differs from the expected one (``diagnosis:`` lines of the
public tokenizer cases): the first differing id with the bytes around it, the tokens each side
made of them and the merge that makes the expected token; the first differing character of a
decoded text."""

from __future__ import annotations


def token_spans(ids: list[int], vocab: dict[int, bytes]) -> list[tuple[int, int]]:
    """The byte range each id covers in the concatenated bytes."""
    spans, at = [], 0
    for i in ids:
        length = len(vocab.get(i, b""))
        spans.append((at, at + length))
        at += length
    return spans


def encode_difference(
    got: list, want: list[int], vocab: dict[int, bytes], merges: list[tuple[bytes, bytes]]
) -> str:
    """Where your ids first differ from the expected ones: the bytes around it, the tokens each
    side made of them, and the merge that makes the expected token (its rank)."""
    if not isinstance(got, list) or not all(isinstance(i, int) and i in vocab for i in got):
        return ""
    first = next((k for k, (a, b) in enumerate(zip(got, want, strict=False)) if a != b), None)
    if first is None:
        return ""
    mine, theirs = token_spans(got, vocab), token_spans(want, vocab)
    if mine[first][0] != theirs[first][0]:
        return ""
    start = theirs[first][0]
    end = max(mine[first][1], theirs[first][1])
    text = b"".join(vocab[i] for i in want)
    yours = [vocab[i] for i, (a, _) in zip(got, mine, strict=True) if start <= a < end]
    expected = [vocab[i] for i, (a, _) in zip(want, theirs, strict=True) if start <= a < end]
    line = (
        f"the first differing id is token {first}, at byte {start} of the text "
        f"(...{text[max(0, start - 12) : start]!r} | {text[start:end]!r} | "
        f"{text[end : end + 12]!r}...): you made {yours} of these bytes, expected {expected}"
    )
    rank = {a + b: (k, (a, b)) for k, (a, b) in reversed(list(enumerate(merges)))}
    target = vocab[want[first]]
    if len(vocab[got[first]]) < len(target) and target in rank:
        k, pair = rank[target]
        line += f"; {target!r} is merge #{k} {pair}, which yours did not apply here"
    elif len(vocab[got[first]]) > len(target) and vocab[got[first]] in rank:
        k, pair = rank[vocab[got[first]]]
        line += f"; yours applied merge #{k} {pair}, which the expected encoding does not here"
    return line


def text_difference(got: object, want: str, label: str) -> str:
    """Where a decoded text first differs from the expected one."""
    if not isinstance(got, str) or got == want:
        return ""
    first = next(
        (k for k, (a, b) in enumerate(zip(got, want, strict=False)) if a != b),
        min(len(got), len(want)),
    )
    return (
        f"{label} first differs at character {first}: got {got[first : first + 12]!r}, "
        f"expected {want[first : first + 12]!r} (after {want[max(0, first - 12) : first]!r})"
    )


# GPT-2's pre-tokenization pattern (the handout's).
PRETOKEN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def word_counts(text: str, special_tokens: list[str]) -> dict[tuple[bytes, ...], int]:
    import regex

    pieces = [text]
    if special_tokens:
        split = "|".join(regex.escape(t) for t in sorted(special_tokens, key=len, reverse=True))
        pieces = regex.split(split, text)
    counts: dict[tuple[bytes, ...], int] = {}
    for piece in pieces:
        for match in regex.finditer(PRETOKEN, piece):
            word = tuple(bytes([b]) for b in match.group().encode("utf-8"))
            counts[word] = counts.get(word, 0) + 1
    return counts


def merged(word: tuple[bytes, ...], pair: tuple[bytes, bytes]) -> tuple[bytes, ...]:
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            out.append(word[i] + word[i + 1])
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def merge_difference(
    text: str, special_tokens: list[str], got: list, want: list[tuple[bytes, bytes]]
) -> str:
    """At the first merge that differs: how often each side's pair occurs after the merges
    before it (the expected ones, applied to the corpus's pre-tokens)."""
    first = next((k for k, (a, b) in enumerate(zip(got, want, strict=False)) if a != b), None)
    if first is None:
        return ""
    counts = word_counts(text, special_tokens)
    for pair in want[:first]:
        counts = {merged(w, pair): c for w, c in counts.items()}
    pairs: dict[tuple[bytes, bytes], int] = {}
    for word, count in counts.items():
        for pair in zip(word, word[1:], strict=False):
            pairs[pair] = pairs.get(pair, 0) + count
    yours, expected = tuple(got[first]), want[first]
    mine, theirs = pairs.get(yours, 0), pairs.get(expected, 0)
    line = (
        f"merge {first} is the first that differs: after the {first} merges before it, your "
        f"pair {yours} occurs {mine} times, the expected {expected} {theirs} times"
    )
    if mine == theirs:
        return line + ": a tie, which goes to the lexicographically greater pair of bytes"
    if mine < theirs:
        return (
            line
            + ": the most frequent pair must win (are your pair counts updated after each merge?)"
        )
    return (
        line
        + ": your counts differ from the corpus's (special tokens split off first, GPT-2 pre-tokens, each occurrence counted)"
    )
