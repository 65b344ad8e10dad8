"""float64 references for the layer and attention cases that have no snapshot."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tests.cases.compare import expect_close
from tests.cases.core import Bundle

EPS32 = float(torch.finfo(torch.float32).eps)


def float32_atol(truth: torch.Tensor, inputs: torch.Tensor | None = None) -> float:
    """A fixed tolerance for a float32 result of a few operations: a few ulps of the result's
    scale, and of the inputs' scale where rounding them matters (``exp(x - logsumexp(x))``
    on inputs near 1000 is as right as ``exp(x - max) / sum``, to ~1000 ulps of 1)."""
    input_scale = 0.0 if inputs is None else float(inputs.abs().max())
    return 1e-6 + 64 * EPS32 * float(truth.abs().max()) + 4 * EPS32 * input_scale


def sdpa_unmasked(inputs: Bundle) -> Bundle:
    q, k, v = (inputs[n].double() for n in ("q", "k", "v"))
    truth = F.scaled_dot_product_attention(q, k, v)
    return expect_close("out", truth, float32_atol(truth))


def rmsnorm_low_precision(inputs: Bundle) -> Bundle:
    x, weight = inputs["x"].double(), inputs["weight"].double()
    return {"out": F.rms_norm(x, weight.shape, weight, eps=inputs["eps"])}


def silu_extremes(inputs: Bundle) -> Bundle:
    truth = F.silu(inputs["x"].double())
    return expect_close("out", truth, float32_atol(truth))


def softmax_stable(inputs: Bundle) -> Bundle:
    expected: Bundle = {}
    for dim in inputs["dims"]:
        truth = F.softmax(inputs["x"].double(), dim=dim)
        expected |= expect_close(f"dim{dim}", truth, float32_atol(truth, inputs["x"]))
    return expected


ORACLES = {
    ("scaled_dot_product_attention", "unmasked_extra_dims"): sdpa_unmasked,
    ("rmsnorm", "float16"): rmsnorm_low_precision,
    ("silu", "extremes"): silu_extremes,
    ("softmax", "large_inputs"): softmax_stable,
}
