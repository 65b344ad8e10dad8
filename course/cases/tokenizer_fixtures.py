"""Tokenizer fixtures: a small generated story corpus and a BPE tokenizer trained on it.

``write_tokenizer_fixtures(fixtures_dir)`` writes

* ``corpora/stories-400k.txt``: about 400 kB of generated stories (seed 0); the corpus of the
  coarse BPE speed check and the worker-count invariance test;
* ``tokenizer/vocab.json``, ``tokenizer/merges.txt``, ``tokenizer/special_tokens.json``: a
  1,000-token BPE tokenizer trained on that corpus plus the hand-written ``samples/`` (so it
  has merges inside multi-byte characters too).

The hand-written ``samples/*.txt`` are source files, not generated. Running this twice gives
byte-identical files. Before writing, the trained tokenizer is cross-checked: a tiktoken
``Encoding`` built from the same vocab and merges must give the same ids on every sample.

Run directly with ``uv run python -m course.cases.tokenizer_fixtures``.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from course.paths import FIXTURES
from cs336_basics.bpe import train_bpe
from cs336_basics.runner.stories import END_OF_TEXT, SEPARATOR, generate_stories
from cs336_basics.tokenizer import Tokenizer
from cs336_basics.tokenizer_files import save_merges, save_vocab

CORPUS_NAME = "stories-400k.txt"
CORPUS_BYTES = 400_000
CORPUS_SEED = 0
TOKENIZER_VOCAB_SIZE = 1000
SPECIAL_TOKENS = [END_OF_TEXT]


def sample_texts(fixtures_dir: str | os.PathLike) -> dict[str, str]:
    """The hand-written samples, by file name (read as bytes so ``\\r\\n`` survives)."""
    samples = Path(fixtures_dir) / "samples"
    return {path.name: path.read_bytes().decode("utf-8") for path in sorted(samples.glob("*.txt"))}


def write_tokenizer_fixtures(fixtures_dir: str | os.PathLike) -> None:
    fixtures = Path(fixtures_dir)
    corpus = generate_stories(CORPUS_BYTES, seed=CORPUS_SEED)
    _write_text(fixtures / "corpora" / CORPUS_NAME, corpus)

    samples = sample_texts(fixtures)
    training_text = SEPARATOR.join([corpus, *samples.values()])
    with tempfile.TemporaryDirectory() as scratch:
        training_path = Path(scratch) / "train.txt"
        _write_text(training_path, training_text)
        vocab, merges = train_bpe(
            training_path, TOKENIZER_VOCAB_SIZE, SPECIAL_TOKENS, num_workers=1
        )
    _check_against_tiktoken(Tokenizer(vocab, merges, SPECIAL_TOKENS), samples)

    directory = fixtures / "tokenizer"
    directory.mkdir(parents=True, exist_ok=True)
    save_vocab(vocab, directory / "vocab.json")
    save_merges(merges, directory / "merges.txt")
    _write_text(directory / "special_tokens.json", json.dumps(SPECIAL_TOKENS) + "\n")


def tiktoken_encoding(tokenizer: Tokenizer):
    """A tiktoken ``Encoding`` with the same vocab, merges (as ranks) and special tokens."""
    import tiktoken

    from cs336_basics.pretokenization import GPT2_PRETOKENIZER_PATTERN

    specials = {s.encode("utf-8") for s in tokenizer.special_tokens}
    return tiktoken.Encoding(
        name="cs336-fixture",
        pat_str=GPT2_PRETOKENIZER_PATTERN,
        mergeable_ranks={token: i for i, token in tokenizer.vocab.items() if token not in specials},
        special_tokens=dict(tokenizer.special_ids),
    )


def _check_against_tiktoken(tokenizer: Tokenizer, samples: dict[str, str]) -> None:
    reference = tiktoken_encoding(tokenizer)
    for name, text in samples.items():
        ours, theirs = tokenizer.encode(text), reference.encode(text, allowed_special="all")
        if ours != theirs:
            raise AssertionError(f"tokenizer fixture disagrees with tiktoken on samples/{name}")


def _write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_bytes(text.encode("utf-8"))
    os.replace(temp, path)


if __name__ == "__main__":
    write_tokenizer_fixtures(FIXTURES)
