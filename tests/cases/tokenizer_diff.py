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


def differing_bytes(
    got: list[int], want: list[int], vocab: dict[int, bytes], first: int
) -> tuple[int, int, str, list[bytes], list[bytes]]:
    """Where ids ``got`` and ``want`` first differ (id ``first``, starting at the same byte): the
    byte range the two tokens there cover, the text around it, and the tokens each side made of
    those bytes."""
    mine, theirs = token_spans(got, vocab), token_spans(want, vocab)
    start, end = theirs[first][0], max(mine[first][1], theirs[first][1])
    text = b"".join(vocab[i] for i in want)
    window = (
        f"(...{text[max(0, start - 12) : start]!r} | {text[start:end]!r} | "
        f"{text[end : end + 12]!r}...)"
    )
    yours = [vocab[i] for i, (a, _) in zip(got, mine, strict=True) if start <= a < end]
    expected = [vocab[i] for i, (a, _) in zip(want, theirs, strict=True) if start <= a < end]
    return start, end, window, yours, expected


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
    start, end, window, yours, expected = differing_bytes(got, want, vocab, first)
    line = (
        f"the first differing id is token {first}, at byte {start} of the text "
        f"{window}: you made {yours} of these bytes, expected {expected}"
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


def first_difference(got: str | bytes, want: str | bytes) -> int:
    """The first index where two texts (or byte strings) differ; the shorter's length when one
    is a prefix of the other."""
    return next(
        (k for k, (a, b) in enumerate(zip(got, want, strict=False)) if a != b),
        min(len(got), len(want)),
    )


def text_difference(got: object, want: str, label: str) -> str:
    """Where a decoded text first differs from the expected one."""
    if not isinstance(got, str) or got == want:
        return ""
    first = first_difference(got, want)
    return (
        f"{label} first differs at character {first}: got {got[first : first + 12]!r}, "
        f"expected {want[first : first + 12]!r} (after {want[max(0, first - 12) : first]!r})"
    )


def bytes_difference(got: object, text: bytes, vocab: dict[int, bytes]) -> str:
    """Whether your ids spell the text: ids outside the vocab, or where their bytes first leave
    the text's (bytes lost or repeated, not only cut differently)."""
    if not isinstance(got, list):
        return ""
    unknown = [i for i in got if not isinstance(i, int) or i not in vocab]
    if unknown:
        return f"{len(unknown)} of your ids are not in the vocab, e.g. {unknown[0]!r}"
    spelled = b"".join(vocab[i] for i in got)
    if spelled == text:
        return ""
    first = first_difference(spelled, text)
    return (
        f"your ids spell {len(spelled)} bytes, the text has {len(text)}: they first differ at "
        f"byte {first} (yours {spelled[first : first + 12]!r}, the text's "
        f"{text[first : first + 12]!r}, after {text[max(0, first - 12) : first]!r})"
    )


def decode_difference(got: object, ids: list[int], vocab: dict[int, bytes]) -> str:
    """A decoded text against the property decode must have: the ids' bytes joined, then decoded
    once with U+FFFD for malformed UTF-8 (and whether yours decodes each id on its own)."""
    data = b"".join(vocab[i] for i in ids)
    want = data.decode("utf-8", errors="replace")
    if not isinstance(got, str) or got == want:
        return ""
    line = (
        f"decode({ids}) gave {got!r}; the ids' bytes {data!r}, joined and decoded once with "
        f"errors='replace', give {want!r}"
    )
    one_by_one = "".join(vocab[i].decode("utf-8", errors="replace") for i in ids)
    if got == one_by_one:
        line += ": yours equals decoding each id's bytes on its own"
    return line


def chunk_ends(chunks: list[str]) -> list[int]:
    """The byte offsets, in the joined text, where one chunk ends and the next begins."""
    ends, at = [], 0
    for chunk in chunks[:-1]:
        at += len(chunk.encode("utf-8"))
        ends.append(at)
    return ends


def stream_difference(
    chunks: list[str], got: object, want: list[int], vocab: dict[int, bytes]
) -> str:
    """Where encode_iterable's ids (``got``) first differ from encode's ids of the joined chunks
    (``want``): the bytes they differ on, the tokens each made of them, and whether a chunk ends
    inside those bytes. ``""`` when they agree or an id is not in ``vocab``."""
    if not isinstance(got, list) or not all(isinstance(i, int) and i in vocab for i in got):
        return ""
    first = next((k for k, (a, b) in enumerate(zip(got, want, strict=False)) if a != b), None)
    text = b"".join(vocab[i] for i in want)
    if first is None:
        if len(got) >= len(want):
            return ""
        start = token_spans(want, vocab)[len(got)][0]
        return (
            f"encode_iterable stops after {len(got)} ids where encode gives {len(want)}: the text "
            f"from byte {start} on ({text[start : start + 24]!r}...) was never encoded: what is "
            "left when the chunks run out must still be encoded"
        )
    start, end, window, yours, expected = differing_bytes(got, want, vocab, first)
    line = (
        f"encode_iterable and encode first differ at id {first}, byte {start} of the text "
        f"{window}: yours streamed {yours}, encode gives {expected}"
    )
    inside = [at for at in chunk_ends(chunks) if start < at < end]
    if inside:
        line += (
            f"; a chunk ends at byte {inside[0]}, inside those bytes: text that may still grow "
            "(an unfinished pre-token or special token) must wait for the next chunk, not be "
            "encoded where the chunk ends"
        )
    return line
