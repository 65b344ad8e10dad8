"""Judge-side comparisons shared by the cases' checks.

Expected float tensors live in a bundle as ``<key>`` (float64 truth), ``<key>.atol`` (the
derived tolerance) and, optionally, ``<key>.wrong.<slug>`` / ``<key>.hint.<slug>`` (the output
of a known mistake and the sentence naming it). A bundle's ``reveal`` value says whether
messages may quote expected values: true for public cases, false for hidden ones.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from tests.cases.core import Bundle
from tests.snapshots import Snapshot, describe_mismatch


def expect_close(key: str, truth: torch.Tensor, atol: float, hints: dict | None = None) -> Bundle:
    """The expected entries for a float output ``key``; ``hints`` maps slug to (hint, tensor)."""
    bundle: Bundle = {key: truth.detach().to(torch.float64).contiguous(), f"{key}.atol": atol}
    for slug, (hint, wrong) in (hints or {}).items():
        bundle[f"{key}.wrong.{slug}"] = wrong.detach().to(torch.float64).contiguous()
        bundle[f"{key}.hint.{slug}"] = hint
    return bundle


def expect_snapshot(key: str, name: str) -> Bundle:
    """The expected entries for output ``key`` from ``fixtures/snapshots/<name>.npz``."""
    snap = Snapshot.load(name)
    hints = {slug: (hint, torch.from_numpy(w)) for slug, (hint, w) in snap.hints.items()}
    return expect_close(key, torch.from_numpy(snap.expected), snap.atol, hints)


def close_mismatch(
    outputs: Bundle,
    expected: Bundle,
    key: str,
    label: str | None = None,
    given: torch.Tensor | None = None,
) -> str | None:
    """``None`` when float output ``key`` is within tolerance of the expected one; ``given``:
    the input an in-place update starts from (see ``tests.snapshots.relation_hints``)."""
    label = label or key
    if key not in outputs:
        return f"{label}: missing from the outputs"
    value = outputs[key]
    if not isinstance(value, torch.Tensor) or not value.is_floating_point():
        kind = value.dtype if isinstance(value, torch.Tensor) else type(value).__name__
        return f"{label}: expected a floating-point tensor, got {kind}"
    actual = value.to(torch.float64).numpy()
    truth = expected[key].numpy()
    atol = float(expected[f"{key}.atol"])
    if expected.get("reveal", True):
        hints = {
            k.split(".wrong.")[1]: (expected[k.replace(".wrong.", ".hint.")], expected[k].numpy())
            for k in expected
            if k.startswith(f"{key}.wrong.")
        }
        start = None if given is None else given.to(torch.float64).numpy()
        snap = Snapshot(truth, truth, atol, hints)
        return describe_mismatch(label, actual, snap, exact=False, given=start)
    return hidden_mismatch(label, actual, truth, atol)


def hidden_mismatch(label: str, actual: np.ndarray, truth: np.ndarray, atol: float) -> str | None:
    """Like ``describe_mismatch`` but quoting no expected value (hidden cases)."""
    if actual.shape != truth.shape:
        return f"{label}: output shape {actual.shape} differs from the expected shape"
    if not np.all(np.isfinite(actual)):
        return f"{label}: output contains NaN or inf"
    error = np.abs(actual - truth)
    worst = float(error.max(initial=0.0))
    if worst <= atol:
        return None
    return (
        f"{label}: {np.count_nonzero(error > atol)} of {error.size} elements off, "
        f"max abs error {worst:.3e} (tolerance {atol:.3e})"
    )


def equal_mismatch(actual: Any, expected: Any, label: str, reveal: bool = True) -> str | None:
    """``None`` when the JSON values are equal; a message saying where they first differ."""
    if actual == expected:
        return None
    if isinstance(actual, list) and isinstance(expected, list):
        first = next(
            (i for i, (a, e) in enumerate(zip(actual, expected, strict=False)) if a != e),
            min(len(actual), len(expected)),
        )
        detail = f"length {len(actual)} vs expected {len(expected)}, first difference at {first}"
        if reveal and first < min(len(actual), len(expected)):
            detail += f": got {actual[first]!r}, expected {expected[first]!r}"
        return f"{label}: {detail}"
    if reveal:
        return f"{label}: got {str(actual)[:200]}, expected {str(expected)[:200]}"
    return f"{label}: differs from the expected value"


def first_failure(*messages: str | None) -> str | None:
    return next((m for m in messages if m), None)
