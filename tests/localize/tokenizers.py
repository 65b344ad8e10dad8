"""BPE training and the tokenizer: the first small step that raises, and the first word of a
case's texts that raises alone."""

from __future__ import annotations

import itertools
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import regex

from tests.cases.core import Bundle
from tests.cases.shipped import END_OF_TEXT
from tests.cases.tokenizers import build_tokenizer
from tests.localize.stages import raises

SINGLE_BYTES = {i: bytes([i]) for i in range(256)}
# How many of a case's words are encoded one by one to find one that raises.
WORDS_TRIED = 5000


def tokenizer_probes(adapters: ModuleType) -> list[tuple[str, Callable[[], object]]]:
    """Small calls, each using one more part of a tokenizer than the one before."""

    def build(merges: list, specials: list[str] | None = None):
        vocab = SINGLE_BYTES | {256 + k: a + b for k, (a, b) in enumerate(merges)}
        if specials is None:
            return adapters.get_tokenizer(vocab, merges)
        return adapters.get_tokenizer(vocab, merges, specials)

    return [
        ("building from the 256 single bytes", lambda: build([])),
        ("encoding 'hi there' without merges", lambda: build([]).encode("hi there")),
        ("decoding the ids of 'hi'", lambda: build([]).decode([104, 105])),
        (
            "applying the merge (b'h', b'i') to 'hi hi'",
            lambda: build([(b"h", b"i")]).encode("hi hi"),
        ),
        (
            "encoding 'a<|endoftext|>b' with that special token",
            lambda: build([], ["<|endoftext|>"]).encode("a<|endoftext|>b"),
        ),
        (
            "running encode_iterable on ['hi ', 'there']",
            lambda: list(build([]).encode_iterable(["hi ", "there"])),
        ),
    ]


def first_raising_step(steps: list[tuple[str, Callable[[], object]]], who: str) -> list[str]:
    """The first step that raises after the ones before it ran (silent when the first raises
    too, or none does: nothing located)."""
    ran = []
    for doing, call in steps:
        try:
            call()
        except Exception as error:  # noqa: BLE001  (student code: any exception)
            if not ran:
                return []
            return [
                f"{who} ran {', '.join(ran)}; it raised {type(error).__name__} on the next "
                f"step, {doing}: the error is in that step"
            ]
        ran.append(doing)
    return []


def tokenizer_raised(adapters: ModuleType, inputs: Bundle, expected: Bundle) -> list[str]:
    """The tokenizer raised: located by small probes on a 256-byte vocab, or, when they all
    run, by the first word of the case's texts that raises alone, with and without merges."""
    lines = first_raising_step(tokenizer_probes(adapters), "on a 256-byte vocab your tokenizer")
    if lines or "texts" not in inputs or raises(tokenizer_probes(adapters)[0][1], tries=1):
        return lines
    return raising_word(adapters, inputs)


def raising_word(adapters: ModuleType, inputs: Bundle) -> list[str]:
    """The first whitespace-led word of the case's texts whose encoding raises alone, and
    whether it still raises without the merges."""
    tokenizer = build_tokenizer(adapters, inputs)
    words = (w for text in inputs["texts"].values() for w in regex.findall(r"\s*\S+", text))
    word = next(
        (
            w
            for w in itertools.islice(words, WORDS_TRIED)
            if raises(lambda w=w: tokenizer.encode(w), 1)
        ),
        None,
    )
    if word is None:
        return []
    bare = build_tokenizer(adapters, inputs | {"merges": []})
    stage = (
        "runs without the merges: the error is in applying the merges to it"
        if not raises(lambda: bare.encode(word), tries=1)
        else "raises without the merges too"
    )
    return [f"your encode raises on the word {word!r} alone, and {stage}"]


def train_bpe_probes(adapters: ModuleType, scratch: Path) -> list[tuple[str, Callable[[], object]]]:
    """Small trainings, each using one more part of a trainer than the one before."""

    def train(text: str, vocab_size: int, specials: list[str]) -> Callable[[], object]:
        def run() -> object:
            path = scratch / "corpus.txt"
            path.write_bytes(text.encode("utf-8"))
            return adapters.run_train_bpe(os.fspath(path), vocab_size, specials)

        return run

    return [
        ("training with no merge (vocab_size=256) on 'ab ab'", train("ab ab", 256, [])),
        ("making one merge in 'ab' (the pair alone in its pre-token)", train("ab", 257, [])),
        (
            "making one merge in 'ab ab xaby' (a pair with neighbours on either side)",
            train("ab ab xaby", 257, []),
        ),
        ("making two merges in 'ab ab xaby'", train("ab ab xaby", 258, [])),
        ("merging a pair that occurs twice in one pre-token ('abab')", train("abab", 257, [])),
        (
            "training with a special token, on 'ab<|endoftext|>ab'",
            train("ab<|endoftext|>ab", 258, [END_OF_TEXT]),
        ),
        ("training until nothing is left to merge (vocab_size=1000)", train("abc abc", 1000, [])),
    ]


def train_bpe_raised(adapters: ModuleType, inputs: Bundle, expected: Bundle) -> list[str]:
    """Training raised: the first small training that raises after the ones before it ran."""
    with tempfile.TemporaryDirectory() as scratch:
        return first_raising_step(train_bpe_probes(adapters, Path(scratch)), "your train_bpe")
