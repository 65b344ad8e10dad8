"""Cases for attention: scaled dot-product attention, causal multi-head self-attention (with
and without RoPE, each with a causality property), and RoPE itself."""

from __future__ import annotations

import torch

from tests.cases.compare import close_mismatch
from tests.cases.core import Bundle, case
from tests.cases.draws import generator, normal
from tests.cases.layers import close_out

ROPE_THETA = 10000.0


@case(
    "scaled_dot_product_attention",
    "masked",
    check=close_out,
    snapshot="scaled_dot_product_attention",
    public=lambda s: {n: s.inputs[n] for n in ("q", "k", "v", "mask")},
)
def sdpa_masked(adapters, inputs: Bundle) -> Bundle:
    """Scaled dot-product attention with a boolean mask (True: may attend)."""
    q, k, v, mask = (inputs[n] for n in ("q", "k", "v", "mask"))
    return {"out": adapters.run_scaled_dot_product_attention(q, k, v, mask)}


@case(
    "scaled_dot_product_attention",
    "unmasked_extra_dims",
    check=close_out,
    public=lambda s: {n: s.inputs[n].reshape(2, 2, *s.inputs[n].shape[1:]) for n in "qkv"},
)
def sdpa_unmasked(adapters, inputs: Bundle) -> Bundle:
    """No mask, two leading batch dimensions."""
    q, k, v = (inputs[n] for n in ("q", "k", "v"))
    return {"out": adapters.run_scaled_dot_product_attention(q, k, v)}


def attention_inputs(s, rope: bool) -> Bundle:
    x = s.inputs["in_embeddings"]
    changed = x.clone()
    changed[:, 6:] = normal(generator(5), changed[:, 6:].shape)
    inputs = {
        **{f"{n}_proj": s.layer()[f"attn.{n}_proj.weight"] for n in ("q", "k", "v", "output")},
        "x": x,
        "x_changed": changed,  # the same as x up to position 5, different after
        "num_heads": s.config["num_heads"],
    }
    if rope:
        inputs |= {"theta": ROPE_THETA, "max_seq_len": s.config["context_length"]}
    return inputs


def attend(adapters, inputs: Bundle, x: torch.Tensor) -> torch.Tensor:
    weights = [inputs[f"{n}_proj"] for n in ("q", "k", "v", "output")]
    d_model, heads = weights[0].shape[1], inputs["num_heads"]
    if "theta" not in inputs:
        return adapters.run_multihead_self_attention(d_model, heads, *weights, x)
    positions = torch.arange(x.shape[-2]).expand(x.shape[:-1])
    return adapters.run_multihead_self_attention_with_rope(
        d_model, heads, inputs["max_seq_len"], inputs["theta"], *weights, x, positions
    )


def check_causal(outputs: Bundle, expected: Bundle, inputs: Bundle) -> str | None:
    """The output matches, and changing the tokens after position t leaves 0..t unchanged."""
    mismatch = close_mismatch(outputs, expected, "out")
    if mismatch:
        return mismatch
    unchanged = int((inputs["x"] == inputs["x_changed"]).all(-1).all(0).long().cumprod(0).sum())
    prefix = {"out": outputs["out"][:, :unchanged]}
    reference = {
        "out": outputs["changed"][:, :unchanged].double(),
        "out.atol": expected["out.atol"],
    }
    problem = close_mismatch(prefix, reference, "out", "changed")
    return problem and (
        f"attention is not causal: changing the tokens after position {unchanged - 1} changed "
        f"the outputs before it ({problem})"
    )


def mhsa_call(adapters, inputs: Bundle) -> Bundle:
    """Causal self-attention on x, and on x with the tokens after a position changed."""
    return {
        "out": attend(adapters, inputs, inputs["x"]),
        "changed": attend(adapters, inputs, inputs["x_changed"]),
    }


case(
    "multihead_self_attention",
    "causal",
    check=check_causal,
    snapshot="multihead_self_attention",
    public=lambda s: attention_inputs(s, rope=False),
)(mhsa_call)
case(
    "multihead_self_attention",
    "rope_causal",
    check=check_causal,
    snapshot="multihead_self_attention_with_rope",
    public=lambda s: attention_inputs(s, rope=True),
)(mhsa_call)


def pair_norms(t: torch.Tensor) -> torch.Tensor:
    return t.double().reshape(*t.shape[:-1], -1, 2).norm(dim=-1)


def check_rope(outputs: Bundle, expected: Bundle, inputs: Bundle) -> str | None:
    """Each head of the output matches; the message adds when pair norms changed."""
    out = outputs.get("out")
    if not isinstance(out, torch.Tensor) or out.dim() != inputs["x"].dim():
        return f"out: expected a tensor of shape {tuple(inputs['x'].shape)}"
    for head in range(out.shape[1]) if "heads" in inputs else [None]:
        sliced = {"out": out if head is None else out[:, head]}
        mismatch = close_mismatch(
            sliced, expected, "out", "out" if head is None else f"head {head}"
        )
        if mismatch:
            norms_kept = sliced["out"].shape == expected["out"].shape and torch.allclose(
                pair_norms(sliced["out"]),
                pair_norms(inputs["x"] if head is None else inputs["x"][:, head]),
                atol=1e-4,
            )
            return mismatch + (
                ""
                if norms_kept
                else "\n  hint: RoPE rotates pairs, so it keeps each pair's norm; yours changed"
            )
    return None


@case(
    "rope",
    "basic",
    check=check_rope,
    snapshot="rope",
    public=lambda s: {
        "x": s.inputs["in_embeddings"],
        "positions": s.inputs["token_positions"],
        "theta": ROPE_THETA,
        "max_seq_len": s.config["context_length"],
    },
)
def rope(adapters, inputs: Bundle) -> Bundle:
    """RoPE at given token positions."""
    x = inputs["x"]
    out = adapters.run_rope(
        x.shape[-1], inputs["theta"], inputs["max_seq_len"], x, inputs["positions"]
    )
    return {"out": out}


@case(
    "rope",
    "heads",
    check=check_rope,
    snapshot="rope",
    public=lambda s: {
        "x": s.inputs["in_embeddings"][:, None].expand(-1, 3, -1, -1).contiguous(),
        "positions": s.inputs["token_positions"][:, None, :],
        "heads": 3,
        "theta": ROPE_THETA,
        "max_seq_len": s.config["context_length"],
    },
)
def rope_heads(adapters, inputs: Bundle) -> Bundle:
    """A (batch, heads, seq, d_k) input; positions broadcast over the heads."""
    return rope.call(adapters, inputs)
