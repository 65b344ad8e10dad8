"""The snapshot comparison itself: it passes the reference, fails near misses, and names the
catalogued mistake a failing output matches."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import pytest_addoption
from tests.snapshots import Snapshot, SnapshotChecker, describe_mismatch


@pytest.fixture
def rope_snapshot() -> Snapshot:
    return Snapshot.load("rope")


class OptionRecorder:
    """Stands in for pytest's parser and its option groups: records the option names added."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def getgroup(self, name: str) -> OptionRecorder:
        return self

    def addoption(self, *names: str, **settings) -> None:
        self.names.extend(names)


def test_snapshot_options_are_registered():
    # This file lives outside tests/, so tests/conftest.py's hook is called here directly.
    recorder = OptionRecorder()
    pytest_addoption(recorder)
    assert {"--snapshot-update", "--snapshot-exact"} <= set(recorder.names)


def test_snapshot_accepts_the_reference_in_both_modes(rope_snapshot):
    reference = rope_snapshot.reference_float32.astype(np.float64)
    assert describe_mismatch("rope", reference, rope_snapshot, exact=False) is None
    assert describe_mismatch("rope", reference, rope_snapshot, exact=True) is None


def test_snapshot_failure_names_worst_element_and_tolerance(rope_snapshot):
    actual = rope_snapshot.expected.copy()
    actual[1, 2, 3] += 50 * rope_snapshot.atol
    message = describe_mismatch("rope", actual, rope_snapshot, exact=False)
    assert "index (1, 2, 3)" in message and "atol" in message and "1 of" in message


def test_snapshot_exact_mode_rejects_a_one_ulp_change(rope_snapshot):
    actual = rope_snapshot.reference_float32.copy()
    actual.flat[0] = np.nextafter(actual.flat[0], np.float32(np.inf))
    assert describe_mismatch("rope", actual.astype(np.float64), rope_snapshot, exact=False) is None
    assert (
        describe_mismatch("rope", actual.astype(np.float64), rope_snapshot, exact=True) is not None
    )


def test_snapshot_hint_names_a_matching_mistake(rope_snapshot):
    hint, wrong = rope_snapshot.hints["rotate_half"]
    message = describe_mismatch(
        "rope", wrong.astype(np.float32).astype(np.float64), rope_snapshot, exact=False
    )
    assert hint in message
    unrelated = describe_mismatch("rope", rope_snapshot.expected * 1.5, rope_snapshot, exact=False)
    assert "hint" not in unrelated


def test_snapshot_reports_shape_and_non_finite_values(rope_snapshot):
    assert "shape" in describe_mismatch(
        "rope", rope_snapshot.expected[:1], rope_snapshot, exact=False
    )
    broken = rope_snapshot.expected.copy()
    broken[0, 0, 0] = np.nan
    assert "nan" in describe_mismatch("rope", broken, rope_snapshot, exact=False)


def test_snapshot_missing_file_says_how_to_regenerate():
    with pytest.raises(FileNotFoundError, match="make fixtures"):
        SnapshotChecker(update=False, exact=False).assert_match(np.zeros(1), "no_such_snapshot")
