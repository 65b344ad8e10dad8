"""Tokenizer properties, checked against references that share no code with yours.

- ``encode`` applies equal-rank merges inside a pre-token leftmost first (``"ooo"`` is
  ``[oo, o]``);
- ``encode_iterable`` equals ``encode`` for *every* way of cutting a stream into one, two or
  three pieces, and for every fixed chunk size, on texts with overlapping special tokens
  (``<|endoftext|>`` and ``<|endoftext|><|endoftext|>``; ``<|y|>`` inside ``<|x|><|y|>``) and
  special tokens holding a space or a newline — exhaustive, so a chunk boundary inside or
  between specials is always tried;
- ``decode`` of any byte-level ids is those bytes decoded as UTF-8 with U+FFFD replacement, and
  ``decode(encode(text)) == text`` for any text.

Hypothesis runs a quick profile by default; ``make test-thorough`` runs many more examples.
"""

from __future__ import annotations

import itertools
from functools import cache

from hypothesis import example, given
from hypothesis import strategies as st

from .adapters import get_tokenizer
from .cases.shipped import Shipped

SHIPPED = Shipped()
EOT = "<|endoftext|>"
DOUBLE_EOT = EOT + EOT
# Characters whose doubled pair is a merge of the fixture tokenizer ("p p", "o o", ...), plus
# spaces, newlines and punctuation whose runs form their own pre-tokens.
RUN_CHARACTERS = "oplbfe .!\n'"


@cache
def tokenizer(*special_tokens: str):
    vocab, merges = SHIPPED.vocab_and_merges
    return get_tokenizer(vocab, merges, list(special_tokens))


runs = st.lists(
    st.tuples(st.sampled_from(RUN_CHARACTERS), st.integers(1, 7)).map(lambda r: r[0] * r[1])
    | st.sampled_from([" look", " hoop", "ll", "poop", "é", "日本", "🙂", EOT, "\r\n"]),
    max_size=12,
).map("".join)


def every_split(text: str, pieces: int) -> list[list[str]]:
    """All ways of cutting ``text`` into ``pieces`` chunks (empty chunks included)."""
    splits = []
    for cuts in itertools.combinations_with_replacement(range(len(text) + 1), pieces - 1):
        bounds = [0, *cuts, len(text)]
        splits.append([text[a:b] for a, b in itertools.pairwise(bounds)])
    return splits


# Special-token sets where a shorter special is a prefix of a longer one that extends far past
# it, one sits inside another at a non-zero offset ("<|y|>" in "<|x|><|y|>"), or a special
# holds a space or a newline (where an ordinary text could otherwise be cut).
SPECIAL_SETS = [
    (EOT,),
    (EOT, DOUBLE_EOT),
    ("<s>", "<s>" + EOT),
    ("<| sep |>", EOT),
    ("<|y|>", "<|x|><|y|>", "<|s\nt|>"),
]
STREAMS = [
    f"a{EOT}{EOT}b{EOT}c{EOT}{EOT}{EOT}",
    f"{EOT}<|endoftext|{EOT}x {EOT}\n\n",
    "hello  world!\n\n  ooo lll",
    f"<s>{EOT}<s> <s>a{EOT}<s>",
    "x<| sep |>y <| sep |>\n<| sep |<| sep |>",
    "a<|x|><|y|> <|y|><|x|>\n<|x|><|y|><|s\nt|>b <|s\n<|s\nt|>",
]


def check_every_cut(text: str, special_tokens: tuple[str, ...], pieces: int) -> None:
    chosen = tokenizer(*special_tokens)
    expected = chosen.encode(text)
    for chunks in every_split(text, pieces):
        got = list(chosen.encode_iterable(iter(chunks)))
        assert got == expected, (
            f"encode_iterable({chunks!r}) = {got}, but encode of the joined text = {expected}"
            "\nhint: at a chunk boundary keep the undecided tail (a partial pre-token, or text "
            "that may still grow into a longer special token) for the next chunk"
        )


def test_tokenizer_encode_iterable_every_single_and_double_cut() -> None:
    for special_tokens in SPECIAL_SETS:
        for text in STREAMS:
            check_every_cut(text, special_tokens, pieces=2)
            check_every_cut(text[:30], special_tokens, pieces=3)


def test_tokenizer_encode_iterable_every_chunk_size() -> None:
    for special_tokens in SPECIAL_SETS:
        chosen = tokenizer(*special_tokens)
        for text in STREAMS:
            expected = chosen.encode(text)
            for size in range(1, len(text) + 1):
                chunks = [text[i : i + size] for i in range(0, len(text), size)]
                got = list(chosen.encode_iterable(chunks))
                assert got == expected, f"encode_iterable in chunks of {size} chars: {chunks!r}"


def test_tokenizer_equal_rank_merges_apply_leftmost_first() -> None:
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"oo"}
    chosen = get_tokenizer(vocab, [(b"o", b"o")])
    o = ord("o")
    for text, expected in [("ooo", [256, o]), ("oooo", [256, 256]), ("ooooo", [256, 256, o])]:
        assert chosen.encode(text) == expected, (
            f"encode({text!r}) = {chosen.encode(text)}, expected {expected}"
            "\nhint: merge the lowest-rank pair at its leftmost occurrence first ('ooo' is [oo, o])"
        )


def test_tokenizer_longest_overlapping_special_wins() -> None:
    chosen = tokenizer(EOT, DOUBLE_EOT)
    ids = chosen.encode(f"{EOT}{EOT}{EOT}")
    pieces = [chosen.decode([i]) for i in ids]
    assert pieces == [DOUBLE_EOT, EOT], (
        f"'<|endoftext|>' x3 with both specials should be [{DOUBLE_EOT!r}, {EOT!r}], got {pieces}"
        "\nhint: match overlapping special tokens longest first"
    )


@given(text=st.text(max_size=60) | runs)
def test_tokenizer_encode_iterable_matches_encode_on_random_cuts(text: str) -> None:
    chosen = tokenizer(EOT, DOUBLE_EOT)
    expected = chosen.encode(text)
    step = 1 + len(text) % 5
    chunks = [text[i : i + step] for i in range(0, len(text), step)]
    assert list(chosen.encode_iterable(chunks)) == expected


@cache
def single_byte_ids() -> dict[int, int]:
    vocab, _ = SHIPPED.vocab_and_merges
    return {token[0]: i for i, token in vocab.items() if len(token) == 1}


@given(data=st.binary(max_size=64))
@example(data=b"\xe6\x97")  # a truncated three-byte character
@example(data=b"\xff\xfe")
def test_tokenizer_decode_arbitrary_bytes_replaces_malformed_utf8(data: bytes) -> None:
    ids = [single_byte_ids()[b] for b in data]
    expected = data.decode("utf-8", errors="replace")
    got = tokenizer(EOT).decode(ids)
    assert got == expected, (
        f"decode of the bytes {data!r} gave {got!r}, expected {expected!r}"
        "\nhint: join all the tokens' bytes first, then decode once with errors='replace'"
    )


@given(data=st.data())
def test_tokenizer_decode_any_ids_is_their_joined_bytes(data: st.DataObject) -> None:
    vocab, _ = SHIPPED.vocab_and_merges
    ids = data.draw(st.lists(st.sampled_from(sorted(vocab)), max_size=20))
    expected = b"".join(vocab[i] for i in ids).decode("utf-8", errors="replace")
    assert tokenizer(EOT).decode(ids) == expected


@given(text=st.text(max_size=80) | runs)
def test_tokenizer_round_trips_any_text(text: str) -> None:
    chosen = tokenizer(EOT, DOUBLE_EOT)
    assert chosen.decode(chosen.encode(text)) == text
