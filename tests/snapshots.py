"""Frozen-array comparison for the tests: ``snapshot.assert_match(actual, "rope")``.

Each ``fixtures/snapshots/<name>.npz`` (written by ``make fixtures``, see ``course/cases/fixtures.py``)
holds:

- ``expected``: the float64 result of an independent computation (``torch.nn.functional``,
  complex-number RoPE, ...), against which the reference was checked when it was written;
- ``reference_float32``: the reference solution's own float32 output (``--snapshot-exact``);
- ``atol``: the tolerance, derived from the reference's float32 error against ``expected``;
- ``wrong.<slug>`` and ``hint.<slug>``: outputs of known mistakes and a sentence naming each,
  so a failure that matches one says what the likely bug is.

Before the catalogue's hints, a failure is diagnosed generically (:func:`relation_hints`, printed
as ``diagnosis:`` lines): is the output
the expected one times a constant (which one: ``sqrt(d_k)``, ``d_k``, 2, -1, ...), transposed or
with permuted axes, with the last dimension permuted, shifted by one position, right except at
some masked or trailing positions, right up to float16/bfloat16 rounding, close but for a small
term (each row off by its own factor: a per-row normalizer); and where a NaN or inf comes from.
Each diagnosis says what it measured and prints only when that measurement holds; a catalogued
mistake's hint prints only when the output is within the match tolerance of that mistake's output
and four times closer to it than to the right answer.
"""

from __future__ import annotations

import itertools
import math
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

SNAPSHOT_DIR = Path(__file__).resolve().parent.parent / "fixtures" / "snapshots"
# A student's output "matches" a catalogued mistake within this tolerance (and when it is
# MATCH_CLOSER times closer to it than to the right answer); course/cases/fixtures.py stores mistakes
# at least ten times farther than this from the right answer, or a few atol for near ones.
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


def describe_mismatch(
    name: str, actual: np.ndarray, snap: Snapshot, *, exact: bool, given: np.ndarray | None = None
) -> str | None:
    """``None`` when ``actual`` matches the snapshot; otherwise a diagnosis for the student.
    ``given``: the value the output would keep if the call did nothing to it (an in-place
    update's input), when there is one."""
    expected = snap.reference_float32.astype(np.float64) if exact else snap.expected
    if actual.shape != expected.shape:
        return (
            f"snapshot {name!r}: output shape {actual.shape} differs from the expected shape "
            f"{expected.shape}"
            + "".join(f"\n  diagnosis: {d}" for d in axes_hints(actual, expected, snap.atol))
        )
    if not np.all(np.isfinite(actual)):
        where = tuple(int(i) for i in np.argwhere(~np.isfinite(actual))[0])
        return (
            f"snapshot {name!r}: output contains {float(actual[where])} at index {where}.\n"
            f"hint: {non_finite_hint(actual, expected)}"
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
    lines += [f"  diagnosis: {d}" for d in relation_hints(actual, expected, snap.atol, given)]
    lines += [f"  hint: {hint}" for hint in matching_hints(actual, snap)]
    return "\n".join(lines)


def match_tolerance(atol: float, expected: np.ndarray) -> float:
    return max(MATCH_ATOL_FACTOR * atol, MATCH_REL_FLOOR * float(np.abs(expected).max(initial=0.0)))


# A catalogued mistake matches only an output this many times closer to it than to the right
# answer. Far mistakes (most of the catalogue) satisfy this whenever they match at all; near ones
# (an eps outside a square root: a few tolerances from the truth) are told apart by it.
MATCH_CLOSER = 4.0


def matching_hints(actual: np.ndarray, snap: Snapshot) -> list[str]:
    tolerance = match_tolerance(snap.atol, snap.expected)
    if actual.shape != snap.expected.shape:
        return []
    to_truth = float(np.abs(actual - snap.expected).max(initial=0.0))
    hints = []
    for hint, wrong in snap.hints.values():
        if wrong.shape != actual.shape:
            continue
        to_wrong = float(np.abs(actual - wrong).max(initial=0.0))
        if to_wrong <= tolerance and MATCH_CLOSER * to_wrong <= to_truth:
            hints.append(hint)
    return hints


# --- Generic diagnosis: how does a wrong output relate to the right one? -----------------------

# Within this fraction of the output's scale, a relation "holds" (a float32 computation that
# matches the reference up to the relation is far closer than this).
RELATION_REL = 1e-3


def relation_tolerance(atol: float, expected: np.ndarray) -> float:
    return max(
        match_tolerance(atol, expected), RELATION_REL * float(np.abs(expected).max(initial=0))
    )


def relation_hints(
    actual: np.ndarray, expected: np.ndarray, atol: float, given: np.ndarray | None = None
) -> list[str]:
    """Plain sentences naming each simple relation between a wrong ``actual`` and ``expected``
    (same shape, both finite); the first that explains the whole output wins. An output that
    is still the ``given`` input is said to be, and nothing else: any relation would then hold
    between that input and the expected value (clipping's expected gradients are the given
    ones times a constant), no evidence of a mistake in the student's arithmetic."""
    tolerance = relation_tolerance(atol, expected)
    unchanged = given is not None and given.shape == actual.shape
    if unchanged and np.abs(actual - given).max(initial=0.0) <= tolerance:
        return ["your output is the input the call was given, unchanged: nothing was done to it"]
    if np.abs(actual - expected).max(initial=0.0) <= tolerance:
        # Every relation below holds up to ``tolerance``, so none would say anything.
        hint = low_precision_hint(actual, expected, tolerance)
        return [hint or near_miss_hint(actual, expected, tolerance, atol)]
    for diagnose in GENERIC_HINTS:
        hint = diagnose(actual, expected, tolerance)
        if hint:
            return [hint]
    return []


def near_miss_hint(actual: np.ndarray, expected: np.ndarray, tolerance: float, atol: float) -> str:
    """An output within ``tolerance`` (a thousandth of its scale) of the expected one but outside
    ``atol``: say so, and whether each row along the last axis is off by its own factor (what a
    per-row normalizer computed differently gives, e.g. eps outside a square root)."""
    error = float(np.abs(actual - expected).max())
    scale = float(np.abs(expected).max(initial=0.0))
    text = (
        f"your output is close to the expected one (max abs error {error:.2e}, "
        f"{error / max(scale, 1e-300):.1e} of its largest value) but outside the tolerance "
        f"{atol:.2e}: not a structural bug but a small term computed differently"
    )
    if expected.ndim == 0 or expected.shape[-1] < 2:
        return text + " (an eps, a float64 vs float32 step)"
    rows, got = expected.reshape(-1, expected.shape[-1]), actual.reshape(-1, expected.shape[-1])
    norms = np.einsum("ij,ij->i", rows, rows)
    usable = norms > 0
    factors = np.einsum("ij,ij->i", rows[usable], got[usable]) / norms[usable]
    residual = np.abs(got[usable] - factors[:, None] * rows[usable]).max(initial=0.0)
    spread = float(factors.max() - factors.min()) if factors.size else 0.0
    if factors.size > 1 and residual <= atol and spread > atol / max(scale, 1e-300):
        return text + (
            f": each row along the last axis is the expected row times its own factor "
            f"(between {factors.min():.7g} and {factors.max():.7g}), so a per-row normalizer "
            "differs (e.g. eps added outside the square root, sqrt(mean(x^2)) + eps)"
        )
    return text + " (an eps, a float64 vs float32 step)"


def named_constant(factor: float, shape: tuple[int, ...]) -> str:
    """``"sqrt(64) (the size of the last dimension, e.g. d_k)"`` etc. for a factor, or ``""``."""
    sizes = sorted({n for n in shape if n > 2}, reverse=True)
    candidates = [("2", 2.0), ("sqrt(2)", math.sqrt(2)), ("pi", math.pi), ("e", math.e)]
    for n in sizes:
        where = (
            "the last dimension, e.g. d_k or d_model"
            if n == shape[-1]
            else f"a dimension of size {n}"
        )
        candidates += [(f"sqrt({n}) (sqrt of {where})", math.sqrt(n)), (f"{n} ({where})", float(n))]
    magnitude = abs(factor)
    for label, value in candidates:
        for power, text in ((1, "{}"), (-1, "1/{}")):
            if math.isclose(magnitude, value**power, rel_tol=1e-3):
                return ("-" if factor < 0 else "") + text.format(label)
    return ""


def constant_factor_hint(actual: np.ndarray, expected: np.ndarray, tolerance: float) -> str:
    norm = float(np.vdot(expected, expected))
    if norm == 0:
        return ""
    factor = float(np.vdot(expected, actual)) / norm
    if abs(factor) < 1e-12 or math.isclose(factor, 1.0, rel_tol=1e-3):
        return ""
    if np.abs(actual - factor * expected).max() > tolerance * max(1.0, abs(factor)):
        return ""
    if math.isclose(factor, -1.0, rel_tol=1e-3):
        return "your output is the expected one with its sign flipped (got = -expected)"
    if np.count_nonzero(expected) < 2:
        return ""  # one value is always some constant times another: no evidence
    name = named_constant(factor, expected.shape)
    which = f" = {name}" if name else ""
    return (
        f"your output is the expected one times a constant: got = expected x {factor:.6g}{which}. "
        "Look for a missing or extra scale factor (e.g. 1/sqrt(d_k), a mean vs a sum)"
    )


def low_precision_hint(actual: np.ndarray, expected: np.ndarray, tolerance: float) -> str:
    """Errors of the size a float16 or bfloat16 intermediate leaves: spread over the elements,
    each a few unit roundoffs of that format relative to the element (a float32 near miss and a
    small missing term are far below, a real bug far above)."""
    scale = np.abs(expected)
    sizable = scale > 1e-3 * scale.max(initial=0)
    if sizable.sum() < 8:
        return ""
    relative = np.abs(actual - expected)[sizable] / scale[sizable]
    typical, worst = float(np.median(relative)), float(relative.max())
    formats = {torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8}
    # The median relative error of one rounding is about a quarter of the unit roundoff.
    dtype = min(formats, key=lambda d: abs(math.log(4 * typical / formats[d] + 1e-300)))
    unit_roundoff = formats[dtype]
    if not (unit_roundoff / 16 <= typical <= unit_roundoff and worst <= 8 * unit_roundoff):
        return ""
    name = str(dtype).removeprefix("torch.")
    exact = np.array_equal(torch.from_numpy(actual).to(dtype).double().numpy(), actual)
    return (
        f"your output agrees with the expected one only to {name} precision (max relative "
        f"error {worst:.1e}, {worst / unit_roundoff:.1f} {name} unit roundoffs)"
        f"{f' (every value of your output is exactly a {name})' if exact else ''}: part of the "
        f"computation runs in {name}; compute in float32 and cast back at the end"
    )


def axes_hints(actual: np.ndarray, expected: np.ndarray, atol: float) -> list[str]:
    """For a shape mismatch: is the output the expected one with its axes permuted, or does
    its shape lack some of the expected axes?"""
    tolerance = relation_tolerance(atol, expected)
    hint = axes_hint(actual, expected, tolerance) or merged_axes_hint(actual, expected, tolerance)
    hint = hint or missing_axes_hint(actual.shape, expected.shape)
    return [hint] if hint else []


def merged_axes_hint(actual: np.ndarray, expected: np.ndarray, tolerance: float) -> str:
    """Is the output the expected one with some neighbouring axes merged into one (its values
    right, reshaped)?"""
    if actual.ndim >= expected.ndim or actual.size != expected.size or actual.size == 0:
        return ""
    if np.abs(actual.reshape(expected.shape) - expected).max() > tolerance:
        return ""
    return (
        f"your output holds the expected values, shaped {actual.shape} instead of "
        f"{expected.shape}: axes were merged (flattened) and never split back; keep the "
        "input's leading dims"
    )


def missing_axes_hint(actual: tuple[int, ...], expected: tuple[int, ...]) -> str:
    """Which axes of ``expected`` the output's shape lacks, when dropping them gives it."""
    kept, position = [], 0
    for axis, size in enumerate(expected):
        if position < len(actual) and actual[position] == size:
            kept.append(axis)
            position += 1
    if position != len(actual) or len(actual) == len(expected):
        return ""
    lacking = [axis for axis in range(len(expected)) if axis not in kept]
    sizes = ", ".join(str(expected[axis]) for axis in lacking)
    return (
        f"your output lacks axis {', '.join(map(str, lacking))} (size {sizes}) of the expected "
        f"shape {expected}, as if reduced or indexed away"
    )


def axes_hint(actual: np.ndarray, expected: np.ndarray, tolerance: float) -> str:
    if actual.ndim != expected.ndim or actual.ndim < 2 or actual.ndim > 5:
        return ""
    for order in itertools.permutations(range(expected.ndim)):
        if order == tuple(range(expected.ndim)):
            continue
        moved = np.transpose(expected, order)
        if moved.shape == actual.shape and np.abs(actual - moved).max() <= tolerance:
            if order[:-2] == tuple(range(expected.ndim - 2)):
                return "your output is the expected one transposed (last two axes swapped)"
            return (
                f"your output is the expected one with its axes permuted to {order} "
                "(check the order of the batch / head / sequence / feature axes)"
            )
    return ""


def last_dim_permutation_hint(actual: np.ndarray, expected: np.ndarray, tolerance: float) -> str:
    d = expected.shape[-1]
    if expected.ndim == 0 or d < 2 or d > 1024:
        return ""
    got, want = actual.reshape(-1, d), expected.reshape(-1, d)
    distance = np.abs(got[:, :, None] - want[:, None, :]).max(axis=0)  # [got column, want column]
    source = distance.argmin(axis=1)
    if len(set(source.tolist())) != d or distance[np.arange(d), source].max() > tolerance:
        return ""
    if np.array_equal(source, np.arange(d)):
        return ""
    half = d // 2
    layouts = {
        "the two halves swapped": np.roll(np.arange(d), half),
        "interleaved pairs laid out as halves (rotate-half vs interleaved layout)": np.arange(d)
        .reshape(half, 2)
        .T.reshape(-1),
        "halves laid out as interleaved pairs": np.arange(d).reshape(2, half).T.reshape(-1),
        "adjacent pairs swapped": np.arange(d).reshape(-1, 2)[:, ::-1].reshape(-1)
        if d % 2 == 0
        else np.arange(d),
        "reversed": np.arange(d)[::-1],
    }
    named = next((name for name, layout in layouts.items() if np.array_equal(source, layout)), "")
    moved = [(j, int(source[j])) for j in range(d) if source[j] != j][:3]
    example = ", ".join(f"element {j} holds expected element {k}" for j, k in moved)
    return (
        f"your output has the right values in the wrong order along the last dimension"
        f"{': ' + named if named else ''} ({example}, ...)"
    )


def shift_hint(actual: np.ndarray, expected: np.ndarray, tolerance: float) -> str:
    for axis in range(expected.ndim):
        n = expected.shape[axis]
        if n < 3:
            continue
        for step in (1, -1):
            got = np.take(actual, range(max(step, 0), n + min(step, 0)), axis=axis)
            want = np.take(expected, range(max(-step, 0), n + min(-step, 0)), axis=axis)
            if np.abs(got - want).max() <= tolerance:
                which = "i-1" if step == 1 else "i+1"
                return (
                    f"your output is the expected one shifted by {step:+d} along axis {axis}: "
                    f"index i holds the expected value of index {which}. Look for an "
                    "off-by-one in positions, slicing or the causal mask"
                )
    return ""


def sign_pattern_hint(actual: np.ndarray, expected: np.ndarray, tolerance: float) -> str:
    if np.abs(np.abs(actual) - np.abs(expected)).max() > tolerance:
        return ""
    flipped = np.abs(actual + expected) <= tolerance
    flipped &= np.abs(expected) > tolerance
    where = np.argwhere(flipped)
    if len(where) == 0:
        return ""
    pattern = ""
    columns = sorted(set(where[:, -1].tolist())) if expected.ndim else []
    if columns and len(columns) < expected.shape[-1]:
        pattern = f"; along the last dimension only at indices {columns[:8]}"
        if len(columns) > 8:
            pattern = pattern[:-1] + ", ...]"
    return (
        f"your output has the right magnitudes everywhere (within {tolerance:.1e}) but the wrong "
        f"sign at {len(where)} of {expected.size} elements{pattern}: look for a sign error (e.g. "
        "a rotation's direction, a subtraction reversed)"
    )


def partial_agreement_hint(actual: np.ndarray, expected: np.ndarray, tolerance: float) -> str:
    wrong = np.abs(actual - expected) > tolerance
    if wrong.all() or not wrong.any() or expected.ndim == 0:
        return ""
    if expected.ndim >= 2 and expected.shape[-1] == expected.shape[-2]:
        n = expected.shape[-1]
        above = np.triu(np.ones((n, n), dtype=bool), k=1)
        if not (wrong & ~above).any():
            return (
                f"your output is right except at {int(wrong.sum())} elements, all above the "
                "diagonal of the last two axes (future positions): check the causal mask"
            )
    for axis in range(expected.ndim):
        others = tuple(a for a in range(expected.ndim) if a != axis)
        bad = np.flatnonzero(wrong.any(axis=others))
        # Evidence only when most indices along the axis are right.
        if len(bad) <= expected.shape[axis] // 2:
            tail = bad.tolist() == list(range(int(bad[0]), expected.shape[axis]))
            what = (
                f"the trailing indices {int(bad[0])}..{expected.shape[axis] - 1}"
                if tail
                else f"indices {bad.tolist()[:8]}"
            )
            return (
                f"your output is right (within {tolerance:.1e}) except at {what} along axis "
                f"{axis}: compare what is special there (masked or padded positions, the first "
                "or last position)"
            )
    return ""


# The relations ``relation_hints`` tries, in its order: each names one simple mistake.
GENERIC_HINTS = (
    constant_factor_hint,
    low_precision_hint,
    axes_hint,
    last_dim_permutation_hint,
    shift_hint,
    sign_pattern_hint,
    partial_agreement_hint,
)


def non_finite_hint(actual: np.ndarray, expected: np.ndarray) -> str:
    """Where the NaN or inf values sit, and what usually causes that pattern."""
    bad = ~np.isfinite(actual)
    kinds = ", ".join(
        f"{int(count)} {label}"
        for label, count in (
            ("NaN", np.isnan(actual).sum()),
            ("+inf", np.isposinf(actual).sum()),
            ("-inf", np.isneginf(actual).sum()),
        )
        if count
    )
    if actual.ndim >= 1 and bad.any(axis=-1).sum() and (bad.any(axis=-1) == bad.all(axis=-1)).all():
        rows = int(bad.all(axis=-1).sum())
        return (
            f"{kinds} of {actual.size} values, filling {rows} whole rows of the last axis, where "
            "the expected rows are finite: a value the whole row shares went bad (its sum, max "
            "or mean square: 0/0, inf/inf, or a root of a negative number), as from a softmax "
            "over a fully masked row (all -inf; is the diagonal "
            "allowed?), exp() overflowing (no max subtracted), or exp() underflowing to 0 in the "
            "whole row (a max subtracted that is not the row's own: the global max, or the max "
            "along another dim)"
        )
    if np.abs(expected[bad]).max(initial=0) > 1e4 or np.isinf(actual).any():
        return (
            f"{kinds} of {actual.size} values where the expected ones are large: an overflow "
            "(exp() without subtracting the max, or squares in float16 — compute in float32)"
        )
    return (
        f"{kinds} of {actual.size} values: look for a division by zero or sqrt/log of a "
        "negative number (e.g. a missing eps)"
    )


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
    """Rewrite snapshot ``name`` from the reference solution: the instructors' generator
    (``course/cases/fixtures.py``, not part of the handout), run as a process of its own."""
    root = Path(__file__).resolve().parent.parent
    if not (root / "course" / "cases" / "fixtures.py").is_file():
        raise RuntimeError(
            "--snapshot-update needs the instructor tooling in course/ (not part of the handout)"
        )
    subprocess.run([sys.executable, "-m", "course.cases.fixtures", name], cwd=root, check=True)
