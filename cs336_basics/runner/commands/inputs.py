"""Checks of the files a command reads and writes, done before any slow import or long work.

Each failure raises a ``cs336_basics.errors`` type whose message names the path and what to do,
so the CLI reports it as one line.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

from cs336_basics.errors import CS336Error, InputError, MissingInputError, OutputExistsError


def require_file(path: str | os.PathLike, what: str) -> Path:
    """``path`` as a ``Path`` if it is an existing regular file, else a one-line error."""
    path = Path(path)
    if path.is_dir():
        raise MissingInputError(f"{what} {path} is a directory; give a file")
    if not path.is_file():
        raise MissingInputError(f"{what} {path} not found")
    if not os.access(path, os.R_OK):
        raise MissingInputError(f"{what} {path} is not readable (check its permissions)")
    return path


def refuse_existing(paths: list[Path], flag: str = "--force") -> None:
    """Raise unless none of ``paths`` exists: outputs are never replaced without ``flag``."""
    existing = [str(p) for p in paths if p.exists()]
    if existing:
        raise OutputExistsError(
            f"{', '.join(existing)} already exists; pass {flag} to replace it, or choose "
            "another output"
        )


@contextlib.contextmanager
def reading(what: str) -> Iterator[None]:
    """Report the library's ``ValueError``/``OSError`` about an input as a one-line error."""
    try:
        yield
    except CS336Error:
        raise
    except FileNotFoundError as error:
        raise MissingInputError(f"{what}: {error}") from error
    except (ValueError, TypeError) as error:
        message = f"{what}: {error}"
        if isinstance(error, UnicodeDecodeError) or "UTF-8" in str(error):
            message += "; cs336 reads UTF-8 text: convert the file first (e.g. iconv -t UTF-8)"
        raise InputError(message) from error


def tokenizer_files(directory: str | os.PathLike) -> tuple[Path, Path]:
    """The ``vocab.json`` and ``merges.txt`` of a tokenizer directory, checked to exist."""
    directory = Path(directory)
    if not directory.is_dir():
        kind = "is a file" if directory.exists() else "not found"
        raise MissingInputError(
            f"tokenizer directory {directory} {kind}; give the folder cs336 train-bpe wrote "
            "(with vocab.json and merges.txt)"
        )
    files = directory / "vocab.json", directory / "merges.txt"
    for path in files:
        if not path.is_file():
            raise MissingInputError(
                f"tokenizer directory {directory} has no {path.name}; it needs vocab.json and "
                "merges.txt (cs336 train-bpe writes both)"
            )
    return files


def load_tokenizer_dir(directory: str | os.PathLike, special_tokens: list[str] | None = None):
    """A ``Tokenizer`` from a ``cs336 train-bpe`` output directory.

    Special tokens: ``special_tokens`` if given, else the directory's ``special_tokens.json``,
    else ``<|endoftext|>``.
    """
    from cs336_basics.tokenizer import Tokenizer

    vocab_path, merges_path = tokenizer_files(directory)
    saved = Path(directory) / "special_tokens.json"
    with reading(f"tokenizer {directory}"):
        if special_tokens is None and saved.is_file():
            special_tokens = json.loads(saved.read_text(encoding="utf-8"))
        if special_tokens is None:
            special_tokens = ["<|endoftext|>"]
        return Tokenizer.from_files(vocab_path, merges_path, special_tokens)
