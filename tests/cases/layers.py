"""Cases for the single layers: Linear, Embedding, RMSNorm, SiLU, SwiGLU, softmax."""

from __future__ import annotations

import torch

from tests.cases.compare import close_mismatch, first_failure
from tests.cases.core import Bundle, case, describe_exception


def close_out(outputs: Bundle, expected: Bundle, inputs: Bundle) -> str | None:
    return close_mismatch(outputs, expected, "out")


@case(
    "linear",
    "basic",
    check=close_out,
    snapshot="linear",
    public=lambda s: {"weight": s.layer()["ffn.w1.weight"], "x": s.inputs["in_embeddings"]},
)
def linear(adapters, inputs: Bundle) -> Bundle:
    """run_linear on fixed weights and inputs."""
    weight = inputs["weight"]
    return {"out": adapters.run_linear(weight.shape[1], weight.shape[0], weight, inputs["x"])}


@case(
    "embedding",
    "basic",
    check=close_out,
    snapshot="embedding",
    public=lambda s: {
        "weight": s.state_dict["token_embeddings.weight"],
        "ids": s.inputs["in_indices"],
    },
)
def embedding(adapters, inputs: Bundle) -> Bundle:
    """run_embedding on fixed weights and token ids."""
    weight = inputs["weight"]
    return {"out": adapters.run_embedding(*weight.shape, weight, inputs["ids"])}


def check_out_of_range(outputs: Bundle, expected: Bundle, inputs: Bundle) -> str | None:
    """Valid ids are looked up (it returns a tensor: the values are the basic case's subject, so
    a wrong lookup is charged there once) and every id past the vocabulary raises."""
    if not isinstance(outputs.get("out"), torch.Tensor):
        return "out: looking up valid ids returned no tensor"
    returned = [
        i
        for i, outcome in zip(inputs["bad_ids"], outputs.get("bad", []), strict=False)
        if outcome is None
    ]
    if len(outputs.get("bad", [])) != len(inputs["bad_ids"]):
        return "bad: one outcome per out-of-range id expected"
    if returned:
        return f"looking up ids {returned} (outside the vocabulary) returned instead of raising"
    return None


@case(
    "embedding",
    "out_of_range",
    check=check_out_of_range,
    snapshot="embedding",
    public=lambda s: {
        "weight": s.state_dict["token_embeddings.weight"],
        "ids": s.inputs["in_indices"],
        "bad_ids": [512, 10_000],
    },
)
def embedding_out_of_range(adapters, inputs: Bundle) -> Bundle:
    """A valid lookup, then ids past the vocabulary: each must raise (any exception)."""
    weight = inputs["weight"]
    outcomes = []
    for bad in inputs["bad_ids"]:
        try:
            adapters.run_embedding(*weight.shape, weight, torch.tensor([[0, bad]]))
            outcomes.append(None)
        except Exception as error:  # noqa: BLE001  (any exception type is fine)
            outcomes.append(describe_exception(error, 200))
    return {"out": adapters.run_embedding(*weight.shape, weight, inputs["ids"]), "bad": outcomes}


@case(
    "rmsnorm",
    "basic",
    check=close_out,
    snapshot="rmsnorm",
    public=lambda s: {
        "weight": s.layer()["ln1.weight"],
        "x": s.inputs["in_embeddings"],
        "eps": s.config["norm_eps"],
    },
)
def rmsnorm(adapters, inputs: Bundle) -> Bundle:
    """run_rmsnorm on fixed gains and inputs."""
    weight = inputs["weight"]
    return {"out": adapters.run_rmsnorm(weight.shape[0], inputs["eps"], weight, inputs["x"])}


# A float32 computation rounded once to float16 is within half a float16 ulp; one more rounding
# (the gain applied after the cast, as HF's Llama does) is fine too.
LOW_PRECISION_ROUNDINGS = 2.5


def check_low_precision(outputs: Bundle, expected: Bundle, inputs: Bundle) -> str | None:
    out, dtype = outputs.get("out"), inputs["x"].dtype
    if not isinstance(out, torch.Tensor) or out.dtype != dtype:
        kind = out.dtype if isinstance(out, torch.Tensor) else type(out).__name__
        return f"out: expected the input's dtype {dtype}, got {kind}"
    truth = expected["out"]
    if out.shape != truth.shape:
        return f"out: shape {tuple(out.shape)} differs from the input's {tuple(truth.shape)}"
    bound = LOW_PRECISION_ROUNDINGS * torch.finfo(dtype).eps / 2 * truth.abs() + 1e-6
    ratio = ((out.double() - truth).abs() / bound).nan_to_num(nan=float("inf"))
    if float(ratio.max()) <= 1.0:
        return None
    return (
        f"out: {int((ratio > 1).sum())} of {ratio.numel()} elements are off by more than "
        f"{LOW_PRECISION_ROUNDINGS} {dtype} roundings (worst {float(ratio.max()):.3g}x)\n"
        "  hint: compute the mean square in float32 (x.float()) and cast the result back to the "
        "input's dtype; in float16, x**2 overflows past 256"
    )


@case(
    "rmsnorm",
    "float16",
    check=check_low_precision,
    public=lambda s: {
        "weight": s.layer()["ln1.weight"].half(),
        "x": (300 * s.inputs["in_embeddings"]).half(),
        "eps": s.config["norm_eps"],
    },
)
def rmsnorm_float16(adapters, inputs: Bundle) -> Bundle:
    """float16 inputs as large as 1000: the statistics are computed in float32."""
    return rmsnorm.call(adapters, inputs)


@case(
    "silu",
    "basic",
    check=close_out,
    snapshot="silu",
    public=lambda s: {"x": s.inputs["in_embeddings"]},
)
def silu(adapters, inputs: Bundle) -> Bundle:
    """run_silu on fixed inputs."""
    return {"out": adapters.run_silu(inputs["x"])}


@case(
    "silu",
    "extremes",
    check=close_out,
    public=lambda s: {"x": torch.tensor([-1e4, -80.0, -1.0, 0.0, 1.0, 80.0, 1e4])},
)
def silu_extremes(adapters, inputs: Bundle) -> Bundle:
    """Large and small inputs, where a naive x / (1 + exp(-x)) overflows."""
    return {"out": adapters.run_silu(inputs["x"])}


@case(
    "swiglu",
    "basic",
    check=close_out,
    snapshot="swiglu",
    public=lambda s: {
        **{n: s.layer()[f"ffn.{n}.weight"] for n in ("w1", "w2", "w3")},
        "x": s.inputs["in_embeddings"],
    },
)
def swiglu(adapters, inputs: Bundle) -> Bundle:
    """run_swiglu on fixed weights and inputs."""
    w1, w2, w3 = inputs["w1"], inputs["w2"], inputs["w3"]
    return {"out": adapters.run_swiglu(w1.shape[1], w1.shape[0], w1, w2, w3, inputs["x"])}


@case(
    "softmax",
    "basic",
    check=close_out,
    snapshot="softmax",
    public=lambda s: {"x": s.inputs["in_logits"], "dim": -1},
)
def softmax(adapters, inputs: Bundle) -> Bundle:
    """run_softmax along a given dimension."""
    return {"out": adapters.run_softmax(inputs["x"], dim=inputs["dim"])}


def check_softmax_stable(outputs: Bundle, expected: Bundle, inputs: Bundle) -> str | None:
    return first_failure(*(close_mismatch(outputs, expected, f"dim{d}") for d in inputs["dims"]))


@case(
    "softmax",
    "large_inputs",
    check=check_softmax_stable,
    public=lambda s: {
        # Three rows of four: a softmax over the wrong axis of a square input could pass.
        "x": torch.tensor(
            [
                [1000.0, 1001.0, 1002.0, 999.0],
                [-1000.0, 0.0, 1000.0, 500.0],
                [88.0, 89.0, 90.0, 87.0],
            ]
        ),
        "dims": [0, 1, -1],
    },
)
def softmax_large_inputs(adapters, inputs: Bundle) -> Bundle:
    """Inputs near +-1000, where exp overflows unless the max is subtracted first."""
    return {f"dim{d}": adapters.run_softmax(inputs["x"], dim=d) for d in inputs["dims"]}
