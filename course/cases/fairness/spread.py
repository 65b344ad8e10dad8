"""The rule for derived float tolerances: they follow the spread of correct implementations.

``atol = max(10 * e_ref, 4 * e_styles) + 8 eps_f32 max|truth|``, where ``e_ref`` is the largest
error of the reference's float32 output against the independent float64 ``truth`` and
``e_styles`` the largest error of the correct styles of ``course/cases/fairness/styles.py`` (other
summation orders, ``rsqrt``, ``logsumexp``, fused heads, RoPE angles in float32, float64
inside), each run through the case's own adapter call. The reference's error is measured on one
CPU, hence the tenfold headroom; the styles' errors sample the other orders a student may pick,
hence fourfold. ``course/cases/fixtures.py`` (snapshots) and ``course/cases/hidden_cases.py`` (the grader's
cases) both derive their tolerances here; ``python -m course.cases.fairness`` then checks the styles on
other CPU code paths and thread counts, and the mutation runs check that every catalogued
mistake still fails.
"""

from __future__ import annotations

import functools
from types import ModuleType

import numpy as np
import torch

from course.cases.fairness.styles import STYLES
from tests.cases import run_case
from tests.cases.core import Bundle, Case

EPS32 = float(np.finfo(np.float32).eps)
# A correct output farther than this fraction of the output's scale from the truth is a bug in
# the style or the truth, not rounding: generation stops rather than widen a tolerance that far.
AGREEMENT = 1e-4


def derived_atol(reference_error: float, styles_error: float, scale: float) -> float:
    return max(10 * reference_error, 4 * styles_error) + 8 * EPS32 * scale


@functools.cache
def correct_styles() -> tuple[tuple[str, ModuleType], ...]:
    return tuple((name, make()) for name, make in STYLES.items())


def style_outputs(case: Case, inputs: Bundle) -> dict[str, torch.Tensor]:
    """The ``out`` of each correct style (head 0 only for a RoPE case whose heads hold the same
    rows, as the truth does)."""
    found = {}
    for name, adapters in correct_styles():
        outputs = run_case(case, adapters, inputs)
        if outputs.raised is not None:
            raise RuntimeError(
                f"style {name} raised on {case.component}/{case.name}: {outputs.raised}"
            )
        out = outputs.data["out"]
        found[name] = out[:, 0] if "heads" in inputs else out
    return found


def spread_error(case: Case, inputs: Bundle, truth: torch.Tensor) -> float:
    """The largest error of a correct style against ``truth`` on this case (0 with none)."""
    scale = max(float(truth.abs().max()), 1.0)
    worst = 0.0
    for name, out in style_outputs(case, inputs).items():
        if out.shape != truth.shape:
            raise RuntimeError(f"style {name}: {case.component} output shape {tuple(out.shape)}")
        error = float((out.double() - truth.double()).abs().max())
        if not error <= AGREEMENT * scale:
            raise RuntimeError(
                f"style {name} disagrees with the truth on {case.component}/{case.name} ({error:.3e})"
            )
        worst = max(worst, error)
    return worst
