"""The regeneration check: last-bit noise from another CPU passes, a change of behaviour fails."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from course.cases.fixture_diff import ULPS, fixture_differences, npz_differences
from course.cases.fixtures import FIXTURES, npz_bytes, update_fixture

SNAPSHOT = FIXTURES / "snapshots" / "transformer_lm.npz"


def committed() -> dict[str, np.ndarray]:
    with np.load(SNAPSHOT, allow_pickle=False) as archive:
        return {name: archive[name] for name in archive.files}


def ulps_up(array: np.ndarray, count: int) -> np.ndarray:
    """Every element moved ``count`` ulps of the array's largest magnitude."""
    step = np.spacing(np.abs(array).max()).astype(array.dtype)
    return (array + count * step).astype(array.dtype)


@pytest.mark.parametrize("name", ["expected", "reference_float32"])
def test_one_ulp_in_the_last_bit_passes(name: str) -> None:
    arrays = committed()
    changed = dict(arrays, **{name: np.nextafter(arrays[name], np.inf).astype(arrays[name].dtype)})
    assert npz_differences(SNAPSHOT.read_bytes(), npz_bytes(changed)) == []
    changed[name] = ulps_up(arrays[name], ULPS // 2)
    assert npz_differences(SNAPSHOT.read_bytes(), npz_bytes(changed)) == []


@pytest.mark.parametrize("name", ["expected", "reference_float32"])
def test_a_change_beyond_a_few_ulp_fails(name: str) -> None:
    arrays = committed()
    changed = dict(arrays, **{name: ulps_up(arrays[name], 4 * ULPS)})
    problems = npz_differences(SNAPSHOT.read_bytes(), npz_bytes(changed))
    assert len(problems) == 1 and problems[0].startswith(f"{name}: moved by up to")


def test_a_flipped_weight_bit_is_a_change_of_behaviour() -> None:
    """What one flipped bit of one float32 weight does to a float64 output: a relative change
    of about 2**-23 in a few elements, which is some 2**29 float64 ulps."""
    arrays = committed()
    expected = arrays["expected"].copy()
    expected.flat[7] *= 1 + 2.0**-23
    changed = dict(arrays, expected=expected)
    assert npz_differences(SNAPSHOT.read_bytes(), npz_bytes(changed))


def test_derived_tolerance_may_move_a_little() -> None:
    arrays = committed()
    a_little = dict(arrays, atol=np.float64(arrays["atol"] * 1.1))
    assert npz_differences(SNAPSHOT.read_bytes(), npz_bytes(a_little)) == []
    doubled = dict(arrays, atol=np.float64(arrays["atol"] * 2))
    assert npz_differences(SNAPSHOT.read_bytes(), npz_bytes(doubled))[0].startswith("atol:")


def test_exact_arrays_names_dtypes_and_shapes() -> None:
    old = {"ids": np.arange(5), "x": np.zeros(3, np.float32), "hint": np.array("a hint")}
    cases = {
        "ids": dict(old, ids=np.arange(5) + np.eye(1, 5, 4, dtype=np.int64)[0]),
        "hint": dict(old, hint=np.array("another hint")),
        "dtype": dict(old, x=np.zeros(3, np.float64)),
        "shape": dict(old, x=np.zeros(4, np.float32)),
        "missing": {k: v for k, v in old.items() if k != "x"},
        "nan": dict(old, x=np.array([0, np.nan, 0], np.float32)),
    }
    for label, new in cases.items():
        assert npz_differences(npz_bytes(old), npz_bytes(new)), label


def test_other_files_must_be_exact() -> None:
    assert fixture_differences("weights.safetensors", b"abc", b"abc") == []
    assert fixture_differences("weights.safetensors", b"abc", b"abd") == [
        "weights.safetensors: bytes differ; this file must be exact"
    ]


def test_committed_file_is_rewritten_only_when_behaviour_changed(tmp_path: Path) -> None:
    arrays = {"expected": np.linspace(-2, 2, 7), "atol": np.float64(1e-6)}
    path = tmp_path / "case.npz"
    assert update_fixture(path, npz_bytes(arrays))
    original = path.read_bytes()
    noise = dict(arrays, expected=np.nextafter(arrays["expected"], 0))
    assert not update_fixture(path, npz_bytes(noise))
    assert path.read_bytes() == original
    changed = dict(arrays, expected=arrays["expected"] * 1.001)
    assert update_fixture(path, npz_bytes(changed))
    assert path.read_bytes() == npz_bytes(changed)
