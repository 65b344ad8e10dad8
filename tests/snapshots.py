"""Frozen-array comparison for the tests: ``snapshot.assert_match(actual, "rope")``.

Each ``fixtures/snapshots/<name>.npz`` (written by ``make fixtures``, see ``course/fixtures.py``)
holds:

- ``expected``: the float64 result of an independent computation (``torch.nn.functional``,
  complex-number RoPE, ...), against which the reference was checked when it was written;
- ``reference_float32``: the reference solution's own float32 output (``--snapshot-exact``);
- ``atol``: the tolerance, derived from the reference's float32 error against ``expected``;
- ``wrong.<slug>`` and ``hint.<slug>``: outputs of known mistakes and a sentence naming each,
  so a failure that matches one says what the likely bug is.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

SNAPSHOT_DIR = Path(__file__).resolve().parent.parent / "fixtures" / "snapshots"
# A student's output "matches" a catalogued mistake within this tolerance; course/fixtures.py
# only stores mistakes that sit at least ten times farther than this from the right answer.
MATCH_ATOL_FACTOR, MATCH_REL_FLOOR = 100.0, 1e-4


@dataclass(frozen=True)
class Snapshot:
    expected: np.ndarray
    reference_float32: np.ndarray
    atol: float
    hints: dict[str, tuple[str, np.ndarray]]

    @classmethod
    def load(cls, name: str) -> Snapshot:
        path = SNAPSHOT_DIR / f"{name}.npz"
        if not path.is_file():
            raise FileNotFoundError(
                f"snapshot {name!r} not found at {path}; instructors regenerate with `make fixtures`"
            )
        with np.load(path, allow_pickle=False) as data:
            hints = {
                key.removeprefix("wrong."): (
                    str(data["hint." + key.removeprefix("wrong.")]),
                    data[key],
                )
                for key in data.files
                if key.startswith("wrong.")
            }
            return cls(data["expected"], data["reference_float32"], float(data["atol"]), hints)


def to_numpy(value: torch.Tensor | np.ndarray) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", torch.float64).numpy()
    return np.asarray(value, dtype=np.float64)


def describe_mismatch(name: str, actual: np.ndarray, snap: Snapshot, *, exact: bool) -> str | None:
    """``None`` when ``actual`` matches the snapshot; otherwise a diagnosis for the student."""
    expected = snap.reference_float32.astype(np.float64) if exact else snap.expected
    if actual.shape != expected.shape:
        return (
            f"snapshot {name!r}: output shape {actual.shape} differs from the expected shape "
            f"{expected.shape}"
        )
    if not np.all(np.isfinite(actual)):
        where = tuple(int(i) for i in np.argwhere(~np.isfinite(actual))[0])
        return (
            f"snapshot {name!r}: output contains {float(actual[where])} at index {where}.\n"
            "hint: NaN or inf usually means exp() overflowed (subtract the max before softmax) "
            "or a query row was fully masked (is the diagonal allowed?)."
        )
    error = np.abs(actual - expected)
    tolerance = 0.0 if exact else snap.atol
    if error.max(initial=0.0) <= tolerance:
        return None
    worst = np.unravel_index(int(np.argmax(error)), error.shape)
    relative = error / np.maximum(np.abs(expected), np.finfo(np.float64).tiny)
    lines = [
        f"snapshot {name!r} mismatch ({'exact' if exact else 'tolerance'} comparison), shape {actual.shape}",
        f"  worst element at index {tuple(int(i) for i in worst)}: got {float(actual[worst]):.7g}, "
        f"expected {float(expected[worst]):.7g}",
        f"  max abs error {error.max():.3e}, max rel error {relative.max():.3e}, "
        f"{np.count_nonzero(error > tolerance)} of {error.size} elements off; atol {tolerance:.3e}",
    ]
    lines += [f"  hint: {hint}" for hint in matching_hints(actual, snap)]
    return "\n".join(lines)


def match_tolerance(atol: float, expected: np.ndarray) -> float:
    return max(MATCH_ATOL_FACTOR * atol, MATCH_REL_FLOOR * float(np.abs(expected).max(initial=0.0)))


def matching_hints(actual: np.ndarray, snap: Snapshot) -> list[str]:
    tolerance = match_tolerance(snap.atol, snap.expected)
    return [
        hint
        for hint, wrong in snap.hints.values()
        if wrong.shape == actual.shape and np.abs(actual - wrong).max() <= tolerance
    ]


class SnapshotChecker:
    """The ``snapshot`` fixture. ``update`` regenerates a snapshot from the reference first."""

    def __init__(self, *, update: bool, exact: bool) -> None:
        self.update = update
        self.exact = exact

    def assert_match(self, actual: torch.Tensor | np.ndarray, name: str) -> None:
        if self.update:
            regenerate(name)
        message = describe_mismatch(name, to_numpy(actual), Snapshot.load(name), exact=self.exact)
        if message is not None:
            raise AssertionError(message)


def regenerate(name: str) -> None:
    try:
        from course.fixtures import write_snapshot
    except ImportError as error:
        raise RuntimeError(
            "--snapshot-update needs the instructor tooling in course/ (not part of the handout)"
        ) from error
    write_snapshot(name)
