"""(Instructor tests of the reference's data helpers, not shipped.) A seeded generator makes
``get_batch`` reproducible; token files load as memmaps with clear errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cs336_basics.data import get_batch
from cs336_basics.token_arrays import load_tokens


def test_get_batch_seeded_generator_is_reproducible():
    dataset = np.arange(1000)
    a = get_batch(dataset, 8, 5, "cpu", generator=torch.Generator().manual_seed(3))
    b = get_batch(dataset, 8, 5, "cpu", generator=torch.Generator().manual_seed(3))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_load_tokens_from_npy_and_raw_files(tmp_path):
    tokens = np.arange(20, dtype=np.uint16)
    np.save(tmp_path / "t.npy", tokens)
    tokens.astype(np.int32).tofile(tmp_path / "t.bin")
    for dataset in (
        load_tokens(tmp_path / "t.npy"),
        load_tokens(tmp_path / "t.bin", dtype="int32"),
    ):
        x, y = get_batch(dataset, 3, 4, "cpu")
        assert torch.equal(y, x + 1) and int(x.max()) < 19
    assert isinstance(load_tokens(tmp_path / "t.npy"), np.memmap)
    assert load_tokens(tmp_path / "t.npy").tolist() == list(range(20))
    assert load_tokens(tmp_path / "t.bin", dtype="int32").tolist() == list(range(20))
    with pytest.raises(FileNotFoundError, match="missing.npy"):
        load_tokens(tmp_path / "missing.npy")
    np.save(tmp_path / "float.npy", np.zeros(4, dtype=np.float32))
    with pytest.raises(ValueError, match="integer"):
        load_tokens(tmp_path / "float.npy")
    (tmp_path / "odd.bin").write_bytes(b"\x00" * 5)
    with pytest.raises(ValueError, match="whole number"):
        load_tokens(tmp_path / "odd.bin", dtype="uint16")


def test_get_batch_messages_name_the_problem():
    with pytest.raises(ValueError, match="needs at least 3"):
        get_batch(np.array([5, 6]), 1, 2, "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="CUDA is not available"):
            get_batch(np.arange(50), 2, 4, "cuda:0")
