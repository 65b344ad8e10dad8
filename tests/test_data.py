"""get_batch covers every valid window start and nothing else, from arrays and memmaps."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch

from .adapters import run_get_batch
from .expect import raises_an_error
from .localize import graded_case_located


@graded_case_located("get_batch")
def test_get_batch_shapes_targets_and_every_start():
    torch.manual_seed(0)  # get_batch draws from the global generator; fixed, so the test is too
    dataset = np.arange(100)
    batch_size, context_length = 32, 7
    starts = Counter()
    for _ in range(100):
        x, y = run_get_batch(dataset, batch_size, context_length, "cpu")
        assert x.shape == y.shape == (batch_size, context_length)
        assert not x.dtype.is_floating_point and x.device.type == "cpu"  # integer token ids
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


def batch_dtype_hint(got: torch.dtype, source: np.dtype) -> str:
    """Why a batch came out as ``got`` from a dataset of ``source`` dtype."""
    if got == torch.from_numpy(np.zeros(1, dtype=source)).dtype:
        return (
            f"\nhint: your batch kept the dataset's dtype ({source}): torch.from_numpy and "
            "torch.tensor keep the array's dtype; cast the ids to int64 (.long()), the dtype "
            "embedding lookups and cross-entropy's gather expect"
        )
    if got.is_floating_point:
        return "\nhint: token ids are integers: do not convert them to float"
    return f"\nhint: cast the ids to int64 (.long()), not {got}"


@pytest.mark.parametrize("source", [np.uint16, np.int32, np.int64])
def test_get_batch_gives_int64_ids_on_the_device(tmp_path, source):
    # Token files are usually uint16 memmaps (any vocabulary under 65536 fits): the batches must
    # still be int64 ids, on the device asked for.
    tokens = np.arange(200, dtype=source)
    path = tmp_path / "tokens.bin"
    tokens.tofile(path)
    devices = ["cpu"] + (["cuda:0"] if torch.cuda.is_available() else [])
    for device in devices:
        x, y = run_get_batch(np.memmap(path, dtype=source, mode="r"), 3, 5, device)
        for name, batch in (("inputs", x), ("targets", y)):
            assert batch.dtype == torch.int64, (
                f"{name} are {batch.dtype} from a {np.dtype(source)} dataset, expected torch.int64"
                + batch_dtype_hint(batch.dtype, np.dtype(source))
            )
            assert batch.device == torch.device(device), (
                f"{name} are on {batch.device}, expected {device}: move them with .to(device)"
            )


def test_get_batch_smallest_dataset_has_one_window():
    x, y = run_get_batch(np.array([5, 6, 7]), 3, 2, "cpu")
    assert x.tolist() == [[5, 6]] * 3 and y.tolist() == [[6, 7]] * 3


# --- robustness (advice, not graded) ---------------------------------------------------------


@pytest.mark.robustness
def test_get_batch_too_small_dataset_raises():
    with raises_an_error():
        run_get_batch(np.array([5, 6]), 1, 2, "cpu")


@pytest.mark.robustness
def test_get_batch_device_errors_surface():
    dataset = np.arange(50)
    assert run_get_batch(dataset, 2, 4, "cpu")[0].device.type == "cpu"
    with raises_an_error():
        run_get_batch(dataset, 2, 4, "not-a-device")
    missing = "cuda:0" if not torch.cuda.is_available() else f"cuda:{torch.cuda.device_count()}"
    with raises_an_error():
        run_get_batch(dataset, 2, 4, missing)
