"""When a regenerated fixture counts as unchanged, so ``make fixtures`` holds on any x86-64 CPU.

Weights, inputs, token ids, tokenizer files and every integer, boolean or string array must come
out bit for bit: they are drawn or computed without vectorised floating-point math. Float
outputs are computed by torch kernels whose summation order depends on the CPU's vector width
(AVX2, AVX-512, scalar), so their last bits may differ from one machine to another. The rule:

- a float array is unchanged when every element is within ``ULPS`` units in the last place of
  the array's largest magnitude (``ULPS * spacing(max|committed|)`` in the array's own dtype);
- a derived tolerance (``atol``, ten times a measured float32 error) is unchanged when it moves
  by at most ``DERIVED_RTOL`` of its value;
- names, dtypes and shapes must match exactly.

``make fixtures`` rewrites a committed file only when it differs beyond this rule, so a diff
under ``fixtures/`` always means behaviour changed. A real change (one flipped bit of one
weight) moves float64 outputs by about 2**29 ulps, far beyond the rule.
"""

from __future__ import annotations

import io

import numpy as np

# Observed between AVX-512, AVX2 and scalar (ATEN_CPU_CAPABILITY=default) kernels: at most 8.
ULPS = 16
DERIVED_RTOL = {"atol": 0.25}


def load_npz(data: bytes) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(data), allow_pickle=False) as archive:
        return {name: archive[name] for name in archive.files}


def array_difference(name: str, old: np.ndarray, new: np.ndarray) -> str | None:
    """Why ``new`` is not the committed ``old`` under the rule, or None when it counts as equal."""
    if old.dtype != new.dtype or old.shape != new.shape:
        return f"{name}: {new.dtype}{list(new.shape)} instead of {old.dtype}{list(old.shape)}"
    if np.array_equal(old, new):
        return None
    if old.dtype.kind != "f":
        where = np.argwhere(old != new)[0].tolist() if old.ndim else []
        return f"{name}: {old.dtype} values differ (first at {where}); these must be exact"
    finite = np.isfinite(old)
    if not np.array_equal(finite, np.isfinite(new)) or not np.array_equal(
        old[~finite], new[~finite], equal_nan=True
    ):
        return f"{name}: non-finite values moved"
    difference = np.where(finite, np.abs(old.astype(np.float64) - new.astype(np.float64)), 0.0)
    if name in DERIVED_RTOL:
        limit = DERIVED_RTOL[name] * np.abs(old.astype(np.float64))
        rule = f"{DERIVED_RTOL[name]:.0%} of its value"
    else:
        ulp = float(np.spacing(np.abs(old[finite]).max(initial=0)))
        limit = ULPS * ulp
        rule = f"{ULPS} ulp of max |{name}| ({ULPS} x {ulp:.3e})"
    if (difference <= limit).all():
        return None
    return f"{name}: moved by up to {difference.max():.3e}, beyond {rule}"


def npz_differences(old: bytes, new: bytes) -> list[str]:
    """Differences between two ``.npz`` fixtures beyond the rule (empty: they count as equal)."""
    before, after = load_npz(old), load_npz(new)
    problems = [f"{name}: missing" for name in sorted(set(before) - set(after))]
    problems += [f"{name}: new" for name in sorted(set(after) - set(before))]
    for name in sorted(set(before) & set(after)):
        problem = array_difference(name, before[name], after[name])
        if problem is not None:
            problems.append(problem)
    return problems


def fixture_differences(name: str, old: bytes, new: bytes) -> list[str]:
    """Differences beyond the rule between a committed fixture file and its regeneration."""
    if old == new:
        return []
    if name.endswith(".npz"):
        return npz_differences(old, new)
    return [f"{name}: bytes differ; this file must be exact"]
