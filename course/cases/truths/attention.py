"""Attention and RoPE in float64: ``F.scaled_dot_product_attention`` on heads split by hand, and
RoPE as a multiplication of complex numbers (the handout states it as pairs of rotations)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from course.cases.truths.tolerances import close_to, float32_atol
from tests.cases.compare import expect_close
from tests.cases.core import Bundle

f64 = torch.float64


def complex_rope(
    x: Tensor, positions: Tensor, theta: float, *, rotate_half: bool = False
) -> Tensor:
    """RoPE as multiplication of complex numbers ``x[2i] + i x[2i+1]`` by ``exp(i p theta^(-2i/d))``."""
    d = x.shape[-1]
    frequencies = theta ** (-torch.arange(0, d, 2, dtype=f64) / d)
    angles = positions.to(f64)[..., None] * frequencies
    if rotate_half:  # the GPT-NeoX / HF layout: pairs (x[i], x[i + d/2])
        pairs = torch.stack((x[..., : d // 2], x[..., d // 2 :]), dim=-1).to(f64)
    else:
        pairs = x.to(f64).reshape(*x.shape[:-1], d // 2, 2)
    rotated = torch.view_as_real(
        torch.view_as_complex(pairs.contiguous()) * torch.polar(torch.ones_like(angles), angles)
    )
    if rotate_half:
        return torch.cat((rotated[..., 0], rotated[..., 1]), dim=-1)
    return rotated.reshape(x.shape)


def naive_attention(
    x: Tensor,
    w: dict[str, Tensor],
    num_heads: int,
    positions: Tensor | None = None,
    theta: float | None = None,
    *,
    heads_last: bool = False,
    causal: bool = True,
    future_mask: bool = False,
    rope_values: bool = False,
) -> Tensor:
    """Causal MHSA via ``F.scaled_dot_product_attention``; ``w`` holds ``{q,k,v,output}_proj.weight``.

    The keyword flags reproduce mistakes: ``future_mask`` lets query i see keys i.. instead of
    ..i, ``rope_values`` rotates the values too."""
    batch, seq, d_model = x.shape
    d_k = d_model // num_heads

    def heads(t: Tensor) -> Tensor:
        if heads_last:  # mistake: feature index read as (d_k, heads) instead of (heads, d_k)
            return t.reshape(batch, seq, d_k, num_heads).permute(0, 3, 1, 2)
        return t.reshape(batch, seq, num_heads, d_k).transpose(1, 2)

    q, k, v = (heads(F.linear(x.to(f64), w[f"{n}_proj.weight"].to(f64))) for n in "qkv")
    if theta is not None:
        q, k = (
            complex_rope(q, positions[:, None, :], theta),
            complex_rope(k, positions[:, None, :], theta),
        )
        if rope_values:
            v = complex_rope(v, positions[:, None, :], theta)
    if future_mask:
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=torch.ones(seq, seq, dtype=torch.bool).triu()
        )
    else:
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    out = out.transpose(1, 2).reshape(batch, seq, d_model)
    return F.linear(out, w["output_proj.weight"].to(f64))


def sdpa_masked(inputs: Bundle) -> Bundle:
    q, k, v = (inputs[n].to(f64) for n in "qkv")
    return close_to(F.scaled_dot_product_attention(q, k, v, attn_mask=inputs["mask"]))


def sdpa_unmasked(inputs: Bundle) -> Bundle:
    q, k, v = (inputs[n].double() for n in ("q", "k", "v"))
    truth = F.scaled_dot_product_attention(q, k, v)
    return expect_close("out", truth, float32_atol(truth))


def attention_weights(inputs: Bundle) -> dict[str, Tensor]:
    return {f"{n}_proj.weight": inputs[f"{n}_proj"] for n in ("q", "k", "v", "output")}


def mhsa(inputs: Bundle) -> Bundle:
    x = inputs["x"]
    if "theta" not in inputs:
        return close_to(naive_attention(x, attention_weights(inputs), inputs["num_heads"]))
    positions = torch.arange(x.shape[1]).expand(x.shape[0], -1)
    return close_to(
        naive_attention(
            x, attention_weights(inputs), inputs["num_heads"], positions, inputs["theta"]
        )
    )


def rope(inputs: Bundle) -> Bundle:
    x, positions = inputs["x"], inputs["positions"]
    if "heads" in inputs:  # every head holds the same rows; compare head by head
        x, positions = x[:, 0], positions[:, 0]
    return close_to(complex_rope(x, positions, inputs["theta"]))


TRUTHS = {
    ("scaled_dot_product_attention", "masked"): sdpa_masked,
    ("scaled_dot_product_attention", "unmasked_extra_dims"): sdpa_unmasked,
    ("multihead_self_attention", "causal"): mhsa,
    ("multihead_self_attention", "rope_causal"): mhsa,
    ("rope", "basic"): rope,
    ("rope", "heads"): rope,
}
