"""The shipped fixtures the public cases read (``fixtures/``), loaded once and lazily."""

from __future__ import annotations

import json
from functools import cached_property
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file

from tests.common import FIXTURES_PATH, gpt2_bytes_to_unicode

FIXTURES = FIXTURES_PATH
END_OF_TEXT = "<|endoftext|>"


class Shipped:
    """The small reference model, the shared inputs, the tokenizer files and the samples."""

    def __init__(self, root: Path = FIXTURES) -> None:
        self.root = root

    @cached_property
    def config(self) -> dict:
        return json.loads((self.root / "model" / "config.json").read_text(encoding="utf-8"))

    @cached_property
    def state_dict(self) -> dict[str, torch.Tensor]:
        return load_file(self.root / "model" / "weights.safetensors")

    @cached_property
    def inputs(self) -> dict[str, torch.Tensor]:
        with np.load(self.root / "inputs.npz", allow_pickle=False) as data:
            return {name: torch.from_numpy(data[name].copy()) for name in data.files}

    def layer(self, index: int = 0) -> dict[str, torch.Tensor]:
        prefix = f"layers.{index}."
        return {
            k.removeprefix(prefix): v for k, v in self.state_dict.items() if k.startswith(prefix)
        }

    @cached_property
    def vocab_and_merges(self) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
        decode = {c: b for b, c in gpt2_bytes_to_unicode().items()}

        def to_bytes(text: str) -> bytes:
            return bytes(decode[c] for c in text)

        directory = self.root / "tokenizer"
        strings = json.loads((directory / "vocab.json").read_text(encoding="utf-8"))
        lines = (directory / "merges.txt").read_text(encoding="utf-8").split("\n")
        vocab = {i: to_bytes(s) for s, i in strings.items()}
        merges = [(to_bytes(a), to_bytes(b)) for a, b in (ln.split(" ") for ln in lines[1:] if ln)]
        return vocab, merges

    @cached_property
    def samples(self) -> dict[str, str]:
        """The hand-written samples by file name (read as bytes so ``\\r\\n`` survives)."""
        paths = sorted((self.root / "samples").glob("*.txt"))
        return {p.name: p.read_bytes().decode("utf-8") for p in paths}

    def corpus(self, characters: int) -> str:
        text = (self.root / "corpora" / "stories-400k.txt").read_bytes().decode("utf-8")
        return text[:characters]
