"""Cases for the optimizer side: AdamW trajectories, the cosine schedule, gradient clipping.

Expected values come from plain float64 transcriptions of the handout's formulas (AdamW with
its decay before or after the update: both orders pass) and the handout's worked schedule."""

from __future__ import annotations

import math

import torch

from tests.cases.compare import close_mismatch, equal_mismatch, expect_close, first_failure
from tests.cases.core import Bundle, case
from tests.cases.draws import generator, normal
from tests.cases.layers import float32_atol

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


def check_adamw(outputs: Bundle, expected: Bundle, inputs: Bundle) -> str | None:
    """Either order of the decoupled decay passes."""
    after = close_mismatch(outputs, expected, "out", "parameters after each step")
    if after is None:
        return None
    decay_first = {"out": expected["decay_first"], "out.atol": expected["decay_first.atol"]}
    return after if close_mismatch(outputs, decay_first, "out") else None


def adamw_problem(seed: int, shapes: list[tuple[int, ...]], steps: int) -> Bundle:
    rng = generator(seed)
    inputs: Bundle = {"steps": steps, "group_of": [0] * len(shapes), "groups": [{}]}
    for i, shape in enumerate(shapes):
        inputs[f"p{i}"] = normal(rng, shape, torch.float64)
        inputs[f"g{i}"] = normal(rng, (steps, *shape), torch.float64)
    inputs["defaults"] = {"lr": 0.05, "betas": [0.8, 0.9], "eps": 1e-8, "weight_decay": 0.2}
    return inputs


def two_groups(seed: int) -> Bundle:
    inputs = adamw_problem(seed, [(3, 2), (4,)], steps=12)
    return inputs | {"group_of": [0, 1], "groups": [{}, {"lr": 0.01, "weight_decay": 0.0}]}


@case(
    "adamw",
    "formula",
    check=check_adamw,
    expected=adamw_expected,
    public=lambda s: adamw_problem(0, [(3,), (2, 2)], 20),
)
def adamw_formula(adapters, inputs: Bundle) -> Bundle:
    """Steps on float64 parameters with fixed gradients, parameters recorded after each."""
    params = [torch.nn.Parameter(inputs[f"p{i}"].clone()) for i in range(len(inputs["group_of"]))]
    groups = [
        {
            "params": [p for p, g in zip(params, inputs["group_of"], strict=True) if g == index],
            **overrides,
        }
        for index, overrides in enumerate(inputs["groups"])
    ]
    defaults = inputs["defaults"]
    optimizer = adapters.get_adamw_cls()(
        groups,
        lr=defaults["lr"],
        betas=tuple(defaults["betas"]),
        eps=defaults["eps"],
        weight_decay=defaults["weight_decay"],
    )
    history = []
    for step in range(inputs["steps"]):
        for i, p in enumerate(params):
            p.grad = inputs[f"g{i}"][step].clone()
        optimizer.step()
        history.append(torch.cat([p.detach().flatten() for p in params]))
    return {"out": torch.stack(history)}


case(
    "adamw",
    "param_groups",
    check=check_adamw,
    expected=adamw_expected,
    public=lambda s: two_groups(1),
)(adamw_formula.call)


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


def cosine_expected(inputs: Bundle) -> Bundle:
    return {
        "lrs": cosine_reference(inputs),
        "warmup_shift": cosine_reference(inputs, warmup_shift=1),
        "cosine_from_zero": cosine_reference(inputs, cosine_from_zero=True),
    }


def check_cosine(outputs: Bundle, expected: Bundle, inputs: Bundle) -> str | None:
    actual = outputs.get("lrs")
    if not isinstance(actual, list) or not all(isinstance(x, float) for x in actual):
        return "lrs: expected a list of floats"
    tolerance = 1e-9 * max(1.0, abs(inputs["max"]))

    def same(a: list[float], b: list[float]) -> bool:
        return len(a) == len(b) and all(abs(x - y) <= tolerance for x, y in zip(a, b, strict=True))

    if same(actual, expected["lrs"]):
        return None
    reveal = expected.get("reveal", True)
    message = equal_mismatch(actual, expected["lrs"], "learning rates", reveal)
    if reveal and same(actual, expected["warmup_shift"]):
        message += "\nhint: warmup is off by one: the rate is it / warmup_iters * max, so iteration 0 has rate 0"
    if reveal and same(actual, expected["cosine_from_zero"]):
        message += "\nhint: the cosine must start at the end of warmup: progress is (it - warmup) / (cycle - warmup)"
    return message


def schedule(high: float, low: float, warmup: int, cycle: int, its: list[int]) -> Bundle:
    return {"max": high, "min": low, "warmup": warmup, "cycle": cycle, "its": its}


@case(
    "cosine_schedule",
    "handout",
    check=check_cosine,
    expected=cosine_expected,
    public=lambda s: schedule(1.0, 0.1, 7, 21, list(range(25))),
)
def cosine(adapters, inputs: Bundle) -> Bundle:
    """The learning rate at each of several iterations."""
    args = [inputs[k] for k in ("max", "min", "warmup", "cycle")]
    return {"lrs": [float(adapters.run_get_lr_cosine_schedule(it, *args)) for it in inputs["its"]]}


case(
    "cosine_schedule",
    "no_warmup",
    check=check_cosine,
    expected=cosine_expected,
    public=lambda s: schedule(2.0, 1.0, 0, 10, list(range(13))),
)(cosine.call)


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


def check_clipping(outputs: Bundle, expected: Bundle, inputs: Bundle) -> str | None:
    keys = [
        f"round{k}.g{i}" for k in range(len(inputs["max_norms"])) for i in range(inputs["count"])
    ]
    kept = [
        key
        for key in keys
        if int(key.split(".g")[1]) in inputs["missing"] and outputs.get(key, 0) is not None
    ]
    return first_failure(
        kept and f"gradients {kept} did not exist and must still be None",
        *(close_mismatch(outputs, expected, key) for key in keys if key in expected),
    )


def clipping_problem(
    seed: int,
    scale: float,
    max_norms: list[float],
    missing: list[int],
    shapes=((3, 4), (5,), (2, 2, 2)),
) -> Bundle:
    rng = generator(seed)
    inputs: Bundle = {"count": len(shapes), "missing": missing, "max_norms": max_norms}
    for i, shape in enumerate(shapes):
        inputs[f"g{i}"] = normal(rng, shape) * scale
    return inputs


@case(
    "gradient_clipping",
    "large_norm",
    check=check_clipping,
    expected=clipping_expected,
    public=lambda s: clipping_problem(0, 10.0, [1.0], []),
)
def clipping(adapters, inputs: Bundle) -> Bundle:
    """Clip fresh copies of the gradients once per maximum norm (parameters as an iterator)."""
    outputs = {}
    for k, max_norm in enumerate(inputs["max_norms"]):
        params = []
        for i in range(inputs["count"]):
            p = torch.nn.Parameter(torch.zeros_like(inputs[f"g{i}"]))
            p.grad = None if i in inputs["missing"] else inputs[f"g{i}"].clone()
            params.append(p)
        adapters.run_gradient_clipping(iter(params), max_norm)
        outputs |= {f"round{k}.g{i}": p.grad for i, p in enumerate(params)}
    return outputs


case(
    "gradient_clipping",
    "small_norm",
    check=check_clipping,
    expected=clipping_expected,
    public=lambda s: clipping_problem(0, 1e-3, [1.0, 1e-3], []),  # unchanged, then clipped
)(clipping.call)
case(
    "gradient_clipping",
    "missing_grad",
    check=check_clipping,
    expected=clipping_expected,
    public=lambda s: clipping_problem(3, 5.0, [2.0], [1]),
)(clipping.call)
