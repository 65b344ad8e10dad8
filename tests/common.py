"""Helpers with the names the course's own test suite gives them, so code written against it runs
here too: ``FIXTURES_PATH`` (this suite's fixtures folder) and ``gpt2_bytes_to_unicode``."""

from __future__ import annotations

from functools import cache
from pathlib import Path

FIXTURES_PATH = Path(__file__).resolve().parent.parent / "fixtures"


@cache
def gpt2_bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte-to-character table: how ``vocab.json`` and ``merges.txt`` spell bytes.

    Printable bytes stand for themselves; the other 68 (controls, space, a few Latin-1 ones) are
    moved, in byte order, to the characters from U+0100 on, so every token prints visibly.
    """
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    keep += range(ord("®"), ord("ÿ") + 1)
    kept = set(keep)
    moved = [b for b in range(256) if b not in kept]
    table = {b: chr(b) for b in keep}
    table |= {b: chr(256 + i) for i, b in enumerate(moved)}
    return dict(sorted(table.items()))
