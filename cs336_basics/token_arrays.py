"""Token arrays on disk: memory-mapped loading and the checks that make bad data fail at once.

A training array is a 1-D ``.npy`` of unsigned integer ids (``cs336 encode`` writes
``uint16``, or ``uint32`` for vocabularies over 65,536) or a raw binary of ``dtype`` values.
``check_token_array`` verifies, before any training step, what would otherwise fail late or
silently: the rank and dtype, that every id is a valid row of the model's embedding (one
vectorised pass over the memory map, with a progress bar for big files, remembered per file
so a second check of the same file is free), and that the array holds a full window.
This module does not import torch.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import numpy as np

from cs336_basics.errors import InputError, MissingInputError

# Ids per slice of the vectorised min/max pass: bounded memory, few Python iterations.
_SCAN_CHUNK = 1 << 24
# Arrays at least this long get a progress bar while their ids are checked.
_PROGRESS_FROM = 1 << 26


def load_tokens(path: str | os.PathLike, dtype: str | np.dtype = "uint16") -> np.ndarray:
    """Memory-map a 1-D array of token ids without reading it into RAM.

    ``.npy`` files carry their own dtype and shape; any other file is read as raw ``dtype``
    values (``uint16`` fits vocabularies up to 65,536).
    """
    path = Path(path)
    if not path.is_file():
        kind = "is a directory" if path.is_dir() else "not found"
        raise MissingInputError(f"token file {path} {kind}; make one with cs336 encode")
    if path.suffix == ".npy":
        try:
            tokens = np.load(path, mmap_mode="r", allow_pickle=False)
        except (ValueError, OSError, EOFError) as error:
            raise InputError(
                f"{path} is not a readable .npy token array (truncated or not a .npy file: "
                f"{error}); re-create it with cs336 encode"
            ) from error
    else:
        item_size = np.dtype(dtype).itemsize
        if path.stat().st_size % item_size != 0:
            raise InputError(
                f"{path} holds {path.stat().st_size} bytes, not a whole number of {dtype} tokens; "
                "is --data-dtype right?"
            )
        tokens = np.memmap(path, dtype=dtype, mode="r")
    if tokens.ndim != 1 or not np.issubdtype(tokens.dtype, np.integer):
        raise InputError(
            f"{path} must hold a 1-D integer array of token ids; got shape {tokens.shape}, "
            f"dtype {tokens.dtype} (cs336 encode writes the right format)"
        )
    return tokens


def check_token_array(
    tokens: np.ndarray, path: str | os.PathLike, vocab_size: int, context_length: int
) -> None:
    """Raise ``InputError`` unless every id is in ``[0, vocab_size)`` and a window fits."""
    if len(tokens) <= context_length:
        raise InputError(
            f"{path} holds {len(tokens):,} tokens, but a training window of context_length="
            f"{context_length} needs at least {context_length + 1}; use more data or a smaller "
            "--context-length"
        )
    low, high = id_range(path, dtype=tokens.dtype)
    if low < 0 or high >= vocab_size:
        bad = low if low < 0 else high
        raise InputError(
            f"{path} holds token id {bad}, outside the model's vocabulary of {vocab_size} "
            "(ids 0..vocab_size-1); was it encoded with another tokenizer? Re-encode it, or set "
            "the model's --vocab-size to the tokenizer's"
        )


def id_range(path: str | os.PathLike, dtype: str | np.dtype = "uint16") -> tuple[int, int]:
    """The smallest and largest id in a token file (one pass; cached per file version)."""
    stat = os.stat(path)
    return _id_range(os.path.realpath(path), stat.st_size, stat.st_mtime_ns, np.dtype(dtype).str)


@functools.lru_cache(maxsize=16)
def _id_range(real_path: str, size: int, mtime_ns: int, dtype: str) -> tuple[int, int]:
    from cs336_basics.progress import progress_bar

    tokens = load_tokens(real_path, dtype)
    low, high = 0, 0
    with progress_bar(
        total=len(tokens),
        unit="tok",
        unit_scale=True,
        desc=f"checking {Path(real_path).name}",
        disable=len(tokens) < _PROGRESS_FROM,
        leave=False,
    ) as bar:
        for start in range(0, len(tokens), _SCAN_CHUNK):
            chunk = tokens[start : start + _SCAN_CHUNK]
            high = max(high, int(np.max(chunk)))
            if np.issubdtype(chunk.dtype, np.signedinteger):
                low = min(low, int(np.min(chunk)))
            bar.update(len(chunk))
    return low, high


def load_checked_tokens(
    path: str | os.PathLike, dtype: str | np.dtype, vocab_size: int, context_length: int
) -> np.ndarray:
    """``load_tokens`` followed by ``check_token_array``: a training array that will work."""
    tokens = load_tokens(path, dtype)
    check_token_array(tokens, path, vocab_size, context_length)
    return tokens
