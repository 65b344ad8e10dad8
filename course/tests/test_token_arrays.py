"""Token-array checks: the chunked min/max pass finds ids anywhere, re-reads a changed file,
and the errors name the file and the fix."""

from __future__ import annotations

import os

import numpy as np
import pytest

from cs336_basics import token_arrays
from cs336_basics.errors import InputError, MissingInputError


def test_id_range_scans_every_chunk_and_notices_a_rewritten_file(tmp_path, monkeypatch):
    monkeypatch.setattr(token_arrays, "_SCAN_CHUNK", 7)
    tokens = np.arange(100, dtype=np.int32) % 50
    tokens[93] = 4000  # in the last, partial chunk
    tokens[41] = -3
    np.save(tmp_path / "t.npy", tokens)
    assert token_arrays.id_range(tmp_path / "t.npy") == (-3, 4000)
    tokens[93] = 7
    np.save(tmp_path / "t.npy", tokens)
    stat = os.stat(tmp_path / "t.npy")  # same size: make sure the mtime moves
    os.utime(tmp_path / "t.npy", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert token_arrays.id_range(tmp_path / "t.npy") == (-3, 49)


def test_check_token_array_names_the_problem(tmp_path):
    np.save(tmp_path / "ok.npy", np.arange(20, dtype=np.uint16))
    tokens = token_arrays.load_tokens(tmp_path / "ok.npy")
    token_arrays.check_token_array(tokens, tmp_path / "ok.npy", vocab_size=20, context_length=19)
    with pytest.raises(InputError, match=r"token id 19, outside the model's vocabulary of 19"):
        token_arrays.check_token_array(tokens, tmp_path / "ok.npy", vocab_size=19, context_length=4)
    with pytest.raises(InputError, match=r"holds 20 tokens.*context_length=20 needs at least 21"):
        token_arrays.check_token_array(
            tokens, tmp_path / "ok.npy", vocab_size=20, context_length=20
        )
    np.save(tmp_path / "neg.npy", np.array([0, 1, -1, 2], dtype=np.int64))
    negative = token_arrays.load_tokens(tmp_path / "neg.npy")
    with pytest.raises(InputError, match="token id -1"):
        token_arrays.check_token_array(
            negative, tmp_path / "neg.npy", vocab_size=10, context_length=2
        )
    with pytest.raises(MissingInputError, match="is a directory"):
        token_arrays.load_tokens(tmp_path)
