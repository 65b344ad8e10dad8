"""get_batch covers every valid window start and nothing else; token files load as memmaps."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch

from .adapters import run_get_batch


def test_get_batch_shapes_targets_and_every_start():
    torch.manual_seed(0)  # get_batch draws from the global generator; fixed, so the test is too
    dataset = np.arange(100)
    batch_size, context_length = 32, 7
    starts = Counter()
    for _ in range(100):
        x, y = run_get_batch(dataset, batch_size, context_length, "cpu")
        assert x.shape == y.shape == (batch_size, context_length)
        assert x.dtype == torch.long and x.device.type == "cpu"
        # The dataset is arange, so windows are consecutive and each target is its input + 1.
        assert torch.equal(y, x + 1), (
            "hint: targets are the inputs shifted by one position (y[i] = data[start + i + 1])"
        )
        assert torch.equal(x - x[:, :1], torch.arange(context_length).expand_as(x))
        starts.update(x[:, 0].tolist())
    valid = set(range(len(dataset) - context_length))  # last start 92: inputs 92..98, target 99
    missing = sorted(valid - set(starts))
    assert not missing, f"window starts {missing} were never sampled" + (
        "\nhint: the last valid start is len(dataset) - context_length - 1, and randint's upper "
        "bound is exclusive: draw from randint(0, len(dataset) - context_length)"
        if missing == [max(valid)]
        else ""
    )
    assert set(starts) == valid, f"invalid window starts {sorted(set(starts) - valid)}"
    expected = 100 * batch_size / len(valid)  # 3200 draws over 93 starts, about 34 each
    assert all(abs(count - expected) < 5 * expected**0.5 for count in starts.values())


def test_get_batch_from_memmap(tmp_path):
    path = tmp_path / "tokens.bin"
    tokens = np.random.default_rng(0).integers(0, 60000, size=1000).astype(np.uint16)
    tokens.tofile(path)
    dataset = np.memmap(path, dtype=np.uint16, mode="r")
    x, y = run_get_batch(dataset, 4, 16, "cpu")
    for row_x, row_y in zip(x.tolist(), y.tolist(), strict=False):
        start = next(i for i in range(len(tokens) - 16) if tokens[i : i + 16].tolist() == row_x)
        assert tokens[start + 1 : start + 17].tolist() == row_y


def test_get_batch_smallest_dataset_has_one_window():
    x, y = run_get_batch(np.array([5, 6, 7]), 3, 2, "cpu")
    assert x.tolist() == [[5, 6]] * 3 and y.tolist() == [[6, 7]] * 3
    with pytest.raises(ValueError, match="needs at least 3"):
        run_get_batch(np.array([5, 6]), 1, 2, "cpu")


def test_get_batch_device_errors_surface():
    dataset = np.arange(50)
    assert run_get_batch(dataset, 2, 4, "cpu")[0].device.type == "cpu"
    with pytest.raises(RuntimeError):
        run_get_batch(dataset, 2, 4, "not-a-device")
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="CUDA is not available"):
            run_get_batch(dataset, 2, 4, "cuda:0")
    else:
        with pytest.raises(RuntimeError, match="CUDA device"):
            run_get_batch(dataset, 2, 4, f"cuda:{torch.cuda.device_count()}")


def test_get_batch_seeded_generator_is_reproducible():
    from cs336_basics.data import get_batch

    dataset = np.arange(1000)
    a = get_batch(dataset, 8, 5, "cpu", generator=torch.Generator().manual_seed(3))
    b = get_batch(dataset, 8, 5, "cpu", generator=torch.Generator().manual_seed(3))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_get_batch_from_token_files(tmp_path):
    from cs336_basics.data import load_tokens

    tokens = np.arange(20, dtype=np.uint16)
    np.save(tmp_path / "t.npy", tokens)
    tokens.astype(np.int32).tofile(tmp_path / "t.bin")
    for dataset in (
        load_tokens(tmp_path / "t.npy"),
        load_tokens(tmp_path / "t.bin", dtype="int32"),
    ):
        x, y = run_get_batch(dataset, 3, 4, "cpu")
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
