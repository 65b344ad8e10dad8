"""float64 transcriptions of the handout's optimizer formulas: AdamW (with its decay before or
after the update: both orders pass, and three common mistakes for hints), the cosine schedule
(with two off-by-one mistakes), and global-norm gradient clipping."""

from __future__ import annotations

import math

import torch

from course.cases.truths.tolerances import float32_atol
from tests.cases.compare import expect_close
from tests.cases.core import Bundle

ADAMW_ATOL = 1e-6


def adamw_reference(
    inputs: Bundle, *, decay_first: bool = False, mistake: str | None = None
) -> torch.Tensor:
    """The parameters after each step, flattened: the handout's algorithm in float64."""
    defaults, groups = inputs["defaults"], inputs["groups"]
    beta1, beta2 = defaults["betas"]
    params = [inputs[f"p{i}"].double().clone() for i in range(len(inputs["group_of"]))]
    m = [torch.zeros_like(p) for p in params]
    v = [torch.zeros_like(p) for p in params]
    history = []
    for t in range(1, inputs["steps"] + 1):
        for i, p in enumerate(params):
            group = {**defaults, **groups[inputs["group_of"][i]]}
            lr, decay, eps = group["lr"], group["weight_decay"], defaults["eps"]
            g = inputs[f"g{i}"][t - 1].double()
            if mistake == "coupled_l2":
                g = g + decay * p
            if decay_first and mistake != "coupled_l2":
                p -= lr * decay * p
            m[i] = beta1 * m[i] + (1 - beta1) * g
            v[i] = beta2 * v[i] + (1 - beta2) * g * g
            alpha = (
                lr
                if mistake == "no_bias_correction"
                else lr * math.sqrt(1 - beta2**t) / (1 - beta1**t)
            )
            p -= alpha * m[i] / (v[i].sqrt() + eps)
            if not decay_first and mistake != "coupled_l2":
                p -= (alpha if mistake == "decay_with_step_size" else lr) * decay * p
        history.append(torch.cat([p.flatten() for p in params]))
    return torch.stack(history)


ADAMW_MISTAKES = {
    "no_bias_correction": "no bias correction: the step size is lr * sqrt(1 - beta2^t) / (1 - beta1^t)",
    "coupled_l2": "weight decay is added to the gradient (L2, coupled); AdamW decays the parameters directly: theta -= lr * lambda * theta",
    "decay_with_step_size": "the decay uses the bias-corrected step size; it is theta -= lr * lambda * theta with the plain lr",
}


def adamw_expected(inputs: Bundle) -> Bundle:
    hints = {
        slug: (hint, adamw_reference(inputs, mistake=slug)) for slug, hint in ADAMW_MISTAKES.items()
    }
    return {
        **expect_close("out", adamw_reference(inputs), ADAMW_ATOL, hints),
        **expect_close("decay_first", adamw_reference(inputs, decay_first=True), ADAMW_ATOL),
    }


def cosine_reference(
    inputs: Bundle, *, warmup_shift: int = 0, cosine_from_zero: bool = False
) -> list[float]:
    high, low, warmup, cycle = (inputs[k] for k in ("max", "min", "warmup", "cycle"))
    rates = []
    for it in inputs["its"]:
        if it < warmup:
            rates.append((it + warmup_shift) / warmup * high)
        elif it > cycle:
            rates.append(low)
        else:
            progress = it / cycle if cosine_from_zero else (it - warmup) / (cycle - warmup)
            rates.append(low + (1 + math.cos(math.pi * progress)) / 2 * (high - low))
    return rates


# A schedule computed in float32 (``torch.cos`` of a float32 tensor) is as right as one in float64:
# the rates' tolerance is 8 float32 ulps of the largest rate.
COSINE_RTOL = 8 * float(torch.finfo(torch.float32).eps)


def cosine_expected(inputs: Bundle) -> Bundle:
    return {
        "lrs": cosine_reference(inputs),
        "lrs.atol": COSINE_RTOL * max(abs(inputs["max"]), abs(inputs["min"])),
        "warmup_shift": cosine_reference(inputs, warmup_shift=1),
        "cosine_from_zero": cosine_reference(inputs, cosine_from_zero=True),
    }


def clipping_expected(inputs: Bundle) -> Bundle:
    """One global norm over the gradients present; each round clips fresh copies."""
    present = [i for i in range(inputs["count"]) if i not in inputs["missing"]]
    grads = {i: inputs[f"g{i}"].double() for i in present}
    norm = math.sqrt(sum(float(g.pow(2).sum()) for g in grads.values()))
    hint = "each parameter was clipped by its own norm; use one global L2 norm over all gradients"
    expected: Bundle = {}
    for k, max_norm in enumerate(inputs["max_norms"]):
        scale = max_norm / (norm + 1e-6) if norm > max_norm else 1.0
        for i, g in grads.items():
            per_parameter = g / max(1.0, float(g.norm()) / max_norm)
            wrong = {"per_parameter": (hint, per_parameter)}
            expected |= expect_close(f"round{k}.g{i}", g * scale, float32_atol(g), wrong)
    return expected


TRUTHS = {
    ("adamw", "formula"): adamw_expected,
    ("adamw", "param_groups"): adamw_expected,
    ("cosine_schedule", "handout"): cosine_expected,
    ("cosine_schedule", "no_warmup"): cosine_expected,
    ("gradient_clipping", "large_norm"): clipping_expected,
    ("gradient_clipping", "small_norm"): clipping_expected,
    ("gradient_clipping", "missing_grad"): clipping_expected,
    ("gradient_clipping", "generator"): clipping_expected,
}
