"""How a truth states its tolerance: fixed from the float32 rounding of a few operations, or
left to ``course/cases/hidden_cases.py`` to derive from the spread of correct implementations."""

from __future__ import annotations

import torch

from tests.cases.core import Bundle

EPS32 = float(torch.finfo(torch.float32).eps)


def float32_atol(truth: torch.Tensor, inputs: torch.Tensor | None = None) -> float:
    """A fixed tolerance for a float32 result of a few operations: a few ulps of the result's
    scale, and of the inputs' scale where rounding them matters (``exp(x - logsumexp(x))``
    on inputs near 1000 is as right as ``exp(x - max) / sum``, to ~1000 ulps of 1)."""
    input_scale = 0.0 if inputs is None else float(inputs.abs().max())
    return 1e-6 + 64 * EPS32 * float(truth.abs().max()) + 4 * EPS32 * input_scale


class SpreadTolerance:
    """The ``out.atol`` of a truth whose tolerance is not known from its formula alone: the
    writer of the cases replaces it by ``max(10 e_ref, 4 e_styles) + 8 eps_f32 max|truth|``
    (``course/cases/fairness/spread.py``), from the reference's and the correct styles'
    float32 errors on the case's own inputs. Never written to disk."""

    def __repr__(self) -> str:
        return "TOLERANCE_FROM_SPREAD"


TOLERANCE_FROM_SPREAD = SpreadTolerance()


def close_to(truth: torch.Tensor) -> Bundle:
    """The expected ``out`` of a case judged by ``close_out``: ``truth`` in float64, its
    tolerance derived from the spread."""
    return {"out": truth.detach().to(torch.float64), "out.atol": TOLERANCE_FROM_SPREAD}
