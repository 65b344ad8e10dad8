"""The BPE tokenizer: encode, encode_iterable, decode."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

import regex as re

from cs336_basics.train_bpe import PAT
from tests.common import gpt2_bytes_to_unicode


class Tokenizer:
    def __init__(self, vocab, merges, special_tokens=None):
        self.vocab = dict(vocab)
        self.merges = list(merges)
        self.special_tokens = sorted(special_tokens or [], key=len, reverse=True)
        for tok in self.special_tokens:
            if tok.encode("utf-8") not in self.vocab.values():
                self.vocab[len(self.vocab)] = tok.encode("utf-8")
        self.byte_to_id = {b: i for i, b in self.vocab.items()}
        self.ranks = {pair: r for r, pair in enumerate(self.merges)}
        self.cache: dict[str, list[int]] = {}

    @classmethod
    def from_files(cls, vocab_filepath, merges_filepath, special_tokens=None):
        byte_decoder = {c: b for b, c in gpt2_bytes_to_unicode().items()}

        def to_bytes(s):
            return bytes(byte_decoder[c] for c in s)

        with open(vocab_filepath, encoding="utf-8") as f:
            vocab = {i: to_bytes(s) for s, i in json.load(f).items()}
        merges = []
        with open(merges_filepath, encoding="utf-8") as f:
            for line in f:
                parts = line.rstrip("\n").split(" ")
                if len(parts) == 2 and not line.startswith("#"):
                    merges.append((to_bytes(parts[0]), to_bytes(parts[1])))
        return cls(vocab, merges, special_tokens)

    def _bpe(self, pretoken: str) -> list[int]:
        if pretoken in self.cache:
            return self.cache[pretoken]
        parts = [bytes([b]) for b in pretoken.encode("utf-8")]
        while len(parts) > 1:
            pairs = [
                (self.ranks.get(p, float("inf")), i)
                for i, p in enumerate(zip(parts, parts[1:], strict=False))
            ]
            rank, _ = min(pairs)
            if rank == float("inf"):
                break
            first, second = self.merges[rank]
            merged, i = [], 0
            while i < len(parts):
                if i + 1 < len(parts) and parts[i] == first and parts[i + 1] == second:
                    merged.append(first + second)
                    i += 2
                else:
                    merged.append(parts[i])
                    i += 1
            parts = merged
        ids = [self.byte_to_id[p] for p in parts]
        self.cache[pretoken] = ids
        return ids

    def _split_special(self, text: str) -> list[str]:
        if not self.special_tokens:
            return [text]
        pattern = "(" + "|".join(re.escape(t) for t in self.special_tokens) + ")"
        return re.split(pattern, text)

    def encode(self, text: str) -> list[int]:
        ids = []
        for piece in self._split_special(text):
            if piece in self.special_tokens:
                ids.append(self.byte_to_id[piece.encode("utf-8")])
            else:
                for m in re.finditer(PAT, piece):
                    ids.extend(self._bpe(m.group()))
        return ids

    def _settled(self, text: str) -> int:
        """How much of ``text`` encodes the same whatever comes after it."""
        keep = len(text)
        # a special token may have been cut: hold back any ending that starts one
        for tok in self.special_tokens:
            for k in range(1, len(tok)):
                if text.endswith(tok[:k]):
                    keep = min(keep, len(text) - k)
        head = text[:keep]
        start = 0
        if self.special_tokens:
            pattern = "|".join(re.escape(t) for t in self.special_tokens)
            for m in re.finditer(pattern, head):
                start = m.end()
        # the last pre-token of the ordinary text may still grow, and the one before it may
        # still join it ("'" + "ll" is the contraction "'ll")
        matches = list(re.finditer(PAT, head[start:]))
        return start + matches[-2].start() if len(matches) >= 2 else start

    def encode_iterable(self, iterable: Iterable[str]) -> Iterator[int]:
        pending = ""
        for chunk in iterable:
            pending += chunk
            cut = self._settled(pending)
            if cut > 0:
                yield from self.encode(pending[:cut])
                pending = pending[cut:]
        yield from self.encode(pending)

    def decode(self, ids: list[int]) -> str:
        return b"".join(self.vocab[i] for i in ids).decode("utf-8", errors="replace")
