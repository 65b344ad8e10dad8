"""Cases for the optimizer side: AdamW trajectories, the cosine schedule, gradient clipping.

AdamW passes with its decoupled decay applied after the update (the handout's order) or before
it (torch.optim.AdamW's); a failing schedule or AdamW names the known mistake it matches."""

from __future__ import annotations

import torch

from tests.cases.compare import close_mismatch, equal_mismatch, first_failure
from tests.cases.core import Bundle, case
from tests.cases.draws import generator, normal


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
    public=lambda s: two_groups(1),
)(adamw_formula.call)


def check_cosine(outputs: Bundle, expected: Bundle, inputs: Bundle) -> str | None:
    actual = outputs.get("lrs")
    if not isinstance(actual, list) or not all(isinstance(x, float) for x in actual):
        return "lrs: expected a list of floats"
    tolerance = expected["lrs.atol"]

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
    public=lambda s: schedule(2.0, 1.0, 0, 10, list(range(13))),
)(cosine.call)


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
        *(
            close_mismatch(outputs, expected, key, given=inputs[key.split(".")[1]])
            for key in keys
            if key in expected
        ),
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


# The containers of parameters the assignment's code passes: a list, a tuple, and (its own
# case) a one-shot generator, as a training loop passing model.parameters() does.
CONTAINERS = {"list": list, "tuple": tuple, "generator": lambda params: (p for p in params)}


@case(
    "gradient_clipping",
    "large_norm",
    check=check_clipping,
    public=lambda s: clipping_problem(0, 10.0, [1.0], []) | {"container": "tuple"},
)
def clipping(adapters, inputs: Bundle) -> Bundle:
    """Clip fresh copies of the gradients once per maximum norm, the parameters passed in a
    list, a tuple or a generator."""
    outputs = {}
    for k, max_norm in enumerate(inputs["max_norms"]):
        params = []
        for i in range(inputs["count"]):
            p = torch.nn.Parameter(torch.zeros_like(inputs[f"g{i}"]))
            p.grad = None if i in inputs["missing"] else inputs[f"g{i}"].clone()
            params.append(p)
        adapters.run_gradient_clipping(CONTAINERS[inputs["container"]](params), max_norm)
        outputs |= {f"round{k}.g{i}": p.grad for i, p in enumerate(params)}
    return outputs


case(
    "gradient_clipping",
    "small_norm",
    check=check_clipping,
    # unchanged, then clipped
    public=lambda s: clipping_problem(0, 1e-3, [1.0, 1e-3], []) | {"container": "list"},
)(clipping.call)
case(
    "gradient_clipping",
    "missing_grad",
    check=check_clipping,
    public=lambda s: clipping_problem(3, 5.0, [2.0], [1]) | {"container": "tuple"},
)(clipping.call)
case(
    "gradient_clipping",
    "generator",
    check=check_clipping,
    public=lambda s: (
        clipping_problem(4, 3.0, [1.5], [], shapes=((4,), (2, 3))) | {"container": "generator"}
    ),
)(clipping.call)
