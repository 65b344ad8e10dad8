"""Printing generated text token by token, whole characters only.

A byte-level BPE token is a run of bytes, not of characters: one character of UTF-8 (an accented
letter, a CJK character, an emoji) may be split across two or more tokens. ``TextStream`` feeds
each token's bytes to an incremental UTF-8 decoder, which returns the characters completed so
far and keeps the bytes of a character still incomplete until the rest arrive; ``close`` decodes
what is left. Malformed bytes become U+FFFD, so the printed text equals the tokenizer's
``decode`` of all the ids at once.
"""

from __future__ import annotations

import codecs
import sys
from typing import TextIO


class TextStream:
    """Writes the text of token ids to ``out`` as they come, flushing after each token that
    completes a character (``vocab`` maps an id to its bytes, as ``Tokenizer.vocab`` does)."""

    def __init__(self, vocab: dict[int, bytes], out: TextIO | None = None) -> None:
        self.vocab = vocab
        self.out = sys.stdout if out is None else out
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def write(self, token_id: int) -> None:
        self._emit(self.decoder.decode(self.vocab[token_id]))

    def close(self) -> None:
        """Decode the bytes still held (an incomplete last character becomes U+FFFD)."""
        self._emit(self.decoder.decode(b"", final=True))

    def _emit(self, text: str) -> None:
        if text:
            self.out.write(text)
            self.out.flush()
