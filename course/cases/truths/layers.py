"""The single layers in float64 with ``torch.nn.functional``: Linear, Embedding, RMSNorm, SiLU,
SwiGLU and softmax."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from course.cases.truths.tolerances import close_to, float32_atol
from tests.cases.compare import expect_close
from tests.cases.core import Bundle

f64 = torch.float64


def linear(inputs: Bundle) -> Bundle:
    return close_to(F.linear(inputs["x"].to(f64), inputs["weight"].to(f64)))


def embedding(inputs: Bundle) -> Bundle:
    return close_to(F.embedding(inputs["ids"], inputs["weight"].to(f64)))


def rmsnorm(inputs: Bundle) -> Bundle:
    weight = inputs["weight"]
    return close_to(
        F.rms_norm(inputs["x"].to(f64), weight.shape, weight.to(f64), eps=inputs["eps"])
    )


def rmsnorm_low_precision(inputs: Bundle) -> Bundle:
    """Only the truth: the case's check bounds the error in roundings of the input's dtype."""
    x, weight = inputs["x"].double(), inputs["weight"].double()
    return {"out": F.rms_norm(x, weight.shape, weight, eps=inputs["eps"])}


def silu(inputs: Bundle) -> Bundle:
    return close_to(F.silu(inputs["x"].to(f64)))


def silu_extremes(inputs: Bundle) -> Bundle:
    truth = F.silu(inputs["x"].double())
    return expect_close("out", truth, float32_atol(truth))


def swiglu(inputs: Bundle) -> Bundle:
    x, w1, w2, w3 = (inputs[n].to(f64) for n in ("x", "w1", "w2", "w3"))
    return close_to(F.linear(F.silu(F.linear(x, w1)) * F.linear(x, w3), w2))


def softmax(inputs: Bundle) -> Bundle:
    return close_to(F.softmax(inputs["x"].to(f64), dim=inputs["dim"]))


def softmax_stable(inputs: Bundle) -> Bundle:
    expected: Bundle = {}
    for dim in inputs["dims"]:
        truth = F.softmax(inputs["x"].double(), dim=dim)
        expected |= expect_close(f"dim{dim}", truth, float32_atol(truth, inputs["x"]))
    return expected


TRUTHS = {
    ("linear", "basic"): linear,
    ("embedding", "basic"): embedding,
    ("embedding", "out_of_range"): embedding,
    ("rmsnorm", "basic"): rmsnorm,
    ("rmsnorm", "float16"): rmsnorm_low_precision,
    ("silu", "basic"): silu,
    ("silu", "extremes"): silu_extremes,
    ("swiglu", "basic"): swiglu,
    ("softmax", "basic"): softmax,
    ("softmax", "large_inputs"): softmax_stable,
}
