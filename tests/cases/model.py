"""Cases for the Transformer block and the LM (full, truncated, and prefix = full logits)."""

from __future__ import annotations

from tests.cases.compare import close_mismatch
from tests.cases.core import Bundle, case
from tests.cases.layers import close_out

LM_KEYS = (
    "vocab_size",
    "context_length",
    "d_model",
    "num_layers",
    "num_heads",
    "d_ff",
    "rope_theta",
)
BLOCK_KEYS = ("d_model", "num_heads", "d_ff", "context_length", "rope_theta")


def weights_of(inputs: Bundle) -> dict:
    return {k.removeprefix("w."): v for k, v in inputs.items() if k.startswith("w.")}


def block_inputs(s) -> Bundle:
    return {
        **{f"w.{k}": v for k, v in s.layer().items()},
        **{k: s.config[k] for k in BLOCK_KEYS},
        "x": s.inputs["in_embeddings"],
    }


@case(
    "transformer_block", "basic", check=close_out, snapshot="transformer_block", public=block_inputs
)
def block(adapters, inputs: Bundle) -> Bundle:
    """A pre-norm Transformer block on fixed weights and inputs."""
    args = [inputs[k] for k in BLOCK_KEYS]
    return {"out": adapters.run_transformer_block(*args, weights_of(inputs), inputs["x"])}


def truncated_length(context_length: int) -> int:
    """The truncated LM input's length: shorter than the context, and of another size than the
    batch (4) and than the hidden instances' lengths, so positions taken from the wrong axis fail."""
    return 3 * context_length // 8


def lm_inputs(s, length: int | None = None, prefixes: list[int] | None = None) -> Bundle:
    ids = s.inputs["in_indices"]
    return {
        **{f"w.{k}": v for k, v in s.state_dict.items()},
        **{k: s.config[k] for k in LM_KEYS},
        "ids": ids if length is None else ids[:, :length],
        "prefixes": prefixes or [],
    }


def lm_logits(adapters, inputs: Bundle, ids):
    args = [inputs[k] for k in LM_KEYS]
    return adapters.run_transformer_lm(*args, weights_of(inputs), ids)


def check_prefixes(outputs: Bundle, expected: Bundle, inputs: Bundle) -> str | None:
    """The full logits match, and each prefix's logits equal the full run's first positions."""
    mismatch = close_mismatch(outputs, expected, "out")
    if mismatch:
        return mismatch
    for length in inputs["prefixes"]:
        reference = {"out": outputs["out"][:, :length].double(), "out.atol": expected["out.atol"]}
        problem = close_mismatch(
            {"out": outputs[f"prefix{length}"]}, reference, "out", f"prefix {length}"
        )
        if problem:
            return (
                f"the logits of the first {length} tokens alone differ from the same positions of "
                f"the full sequence (causal masking or positions depend on the length?): {problem}"
            )
    return None


@case(
    "transformer_lm",
    "prefixes",
    check=check_prefixes,
    snapshot="transformer_lm",
    public=lambda s: lm_inputs(s, prefixes=[1, 5]),
)
def lm_prefixes(adapters, inputs: Bundle) -> Bundle:
    """Logits of the full sequence, and of its first few tokens alone."""
    ids = inputs["ids"]
    outputs = {"out": lm_logits(adapters, inputs, ids)}
    for length in inputs["prefixes"]:
        outputs[f"prefix{length}"] = lm_logits(adapters, inputs, ids[:, :length])
    return outputs


@case(
    "transformer_lm",
    "truncated",
    check=close_out,
    snapshot="transformer_lm_truncated",
    public=lambda s: lm_inputs(s, length=truncated_length(s.config["context_length"])),
)
def lm_truncated(adapters, inputs: Bundle) -> Bundle:
    """Input shorter than the context length."""
    return {"out": lm_logits(adapters, inputs, inputs["ids"])}
