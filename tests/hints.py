"""Plain hints for failing tests: when a wrong answer equals what a known mistake would give,
the failure says which mistake that is (the snapshot tests do the same; see snapshots.py)."""

from __future__ import annotations

from collections.abc import Callable

import torch


def matching_hints(
    actual: object, mistakes: dict[str, object], same: Callable[[object, object], bool]
) -> str:
    """``"\\nhint: ..."`` lines for every mistake whose outcome ``same``-matches ``actual``."""
    return "".join(f"\nhint: {hint}" for hint, outcome in mistakes.items() if same(actual, outcome))


def close(a: object, b: object, tolerance: float = 1e-6) -> bool:
    a, b = torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64)
    return a.shape == b.shape and bool(torch.allclose(a, b, rtol=tolerance, atol=tolerance))


def assert_close_or_hint(
    actual: object, expected: object, mistakes: dict[str, object], tolerance: float = 1e-6
) -> None:
    """Like ``torch.testing.assert_close``, naming the matching mistake on failure."""
    if not close(actual, expected, tolerance):
        raise AssertionError(
            f"got {actual}, expected {expected}"
            + matching_hints(actual, mistakes, lambda a, b: close(a, b, tolerance))
        )
