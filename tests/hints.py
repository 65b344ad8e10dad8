"""Plain hints for failing tests: when a wrong answer equals what a known mistake would give,
the failure says which mistake that is (the snapshot tests do the same; see snapshots.py)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

import torch


def matching_hints(
    actual: object, mistakes: dict[str, object], same: Callable[[object, object], bool]
) -> str:
    """``"\\nhint: ..."`` lines for every mistake whose outcome ``same``-matches ``actual``."""
    return "".join(f"\nhint: {hint}" for hint, outcome in mistakes.items() if same(actual, outcome))


def diagnosis_lines(lines: Iterable[str], indent: str = "") -> str:
    """``"\\n<indent>diagnosis: ..."`` for each non-empty line (a measured diagnosis)."""
    return "".join(f"\n{indent}diagnosis: {line}" for line in lines if line)


# A hint or diagnosis line of a message, as the tests write them.
LABELLED = re.compile(r"^\s*(?:hint|diagnosis):\s*(.+?)\s*$", re.MULTILINE)


def labelled_lines(message: str) -> list[str]:
    """The text of each ``hint:`` or ``diagnosis:`` line of ``message``, label and indent off
    (what ``matching_hints`` and ``diagnosis_lines`` wrote into it)."""
    return [m.group(1) for m in LABELLED.finditer(message)]


def close(a: object, b: object, tolerance: float = 1e-6) -> bool:
    """Same shape and values within ``tolerance``; NaN matches NaN (a mistake's NaN pattern)."""
    a, b = torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64)
    return a.shape == b.shape and bool(
        torch.allclose(a, b, rtol=tolerance, atol=tolerance, equal_nan=True)
    )


def softmax_mistakes(x: torch.Tensor, dim: int) -> dict[str, torch.Tensor]:
    """What the usual softmax mistakes give on ``x``, computed in ``x``'s own dtype (so they
    overflow and underflow where a student's code would)."""

    def normalized(shifted: torch.Tensor, sum_dim: int = dim) -> torch.Tensor:
        exp = shifted.exp()
        return exp / exp.sum(dim=sum_dim, keepdim=True)

    mistakes = {
        "exp() without subtracting the max first overflows: subtract the max along dim": (
            normalized(x)
        ),
        "you subtract the max of the whole tensor, not the max along dim: where a row lies far "
        "below it, every exp() underflows to 0 (0/0)": normalized(x - x.amax()),
    }
    for other in range(x.ndim):
        if other != dim % x.ndim:
            mistakes[f"the max is taken along dim {other}, not along dim={dim}"] = normalized(
                x - x.amax(dim=other, keepdim=True)
            )
            mistakes[f"the sum is taken along dim {other}, not along dim={dim}"] = normalized(
                x - x.amax(dim=dim, keepdim=True), other
            )
    # A mistake that gives the right answer on this input is no evidence of anything.
    right = torch.softmax(x.double(), dim=dim)
    return {hint: out for hint, out in mistakes.items() if not close(out, right, 1e-5)}


def assert_close_or_hint(
    actual: object, expected: object, mistakes: dict[str, object], tolerance: float = 1e-6
) -> None:
    """Like ``torch.testing.assert_close``, naming the matching mistake on failure."""
    if not close(actual, expected, tolerance):
        raise AssertionError(
            f"got {actual}, expected {expected}"
            + matching_hints(actual, mistakes, lambda a, b: close(a, b, tolerance))
        )


def dtype_kept(out: torch.Tensor, given: torch.dtype) -> str:
    """``""`` when ``out`` has the input's dtype ``given``; else the failure, with a hint that
    says what the dtype shows (a float32 result from bfloat16 inputs: a missing cast back)."""
    if out.dtype == given:
        return ""
    message = f"the output is {out.dtype} for {given} inputs, expected {given}"
    if out.dtype in (torch.float32, torch.float64) and given in (torch.bfloat16, torch.float16):
        return message + (
            f"\nhint: computing in float32 is right, but cast the result back to the input's "
            f"dtype at the end (.to(x.dtype)); {out.dtype} leaks out of an upcast or a float32 "
            "constant"
        )
    if out.is_floating_point() and given.is_floating_point and out.itemsize > given.itemsize:
        return message + (
            f"\nhint: computing in {out.dtype} may be right, but return the input's dtype: cast "
            "the result back at the end (.to(x.dtype))"
        )
    return message
