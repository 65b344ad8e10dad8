"""Correct implementations of the model's primitives that differ only in arithmetic order.

Each is what a student plausibly writes: ``x @ W.T``, ``einsum`` or ``F.linear``; ``1/sqrt`` or
``rsqrt``; softmax by subtracting the max or through ``logsumexp``; masks by ``masked_fill``,
an additive ``-inf`` bias or ``F.scaled_dot_product_attention``; RoPE by a cos/sin table, by
complex numbers or GPT-J's ``rotate_every_two``; heads split by a view or attended one by one in
a loop. ``STYLES`` combines them into whole solutions (``course/cases/fairness/kit.py``);
``float64_inside`` computes in float64 throughout and rounds once at the end. Written from the
handout, not from ``cs336_basics``."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from course.cases.fairness.kit import Kit, attention_scale, inverse_frequencies

# --- linear maps and lookups -------------------------------------------------------------------


def linear_matmul(x: Tensor, weight: Tensor) -> Tensor:
    return x @ weight.T


def linear_einsum(x: Tensor, weight: Tensor) -> Tensor:
    return torch.einsum("...i,oi->...o", x, weight)


def linear_broadcast_sum(x: Tensor, weight: Tensor) -> Tensor:
    """Elementwise products summed: another summation order than any matmul kernel."""
    return (x.unsqueeze(-2) * weight).sum(-1)


def embed_one_hot(weight: Tensor, ids: Tensor) -> Tensor:
    if ids.numel() and not 0 <= int(ids.min()) <= int(ids.max()) < weight.shape[0]:
        raise IndexError("token id outside the vocabulary")
    return F.one_hot(ids, weight.shape[0]).to(weight.dtype) @ weight


def embed_index_select(weight: Tensor, ids: Tensor) -> Tensor:
    return weight.index_select(0, ids.reshape(-1)).reshape(*ids.shape, weight.shape[1])


# --- normalisation and activations --------------------------------------------------------------


def widened(x: Tensor) -> Tensor:
    """``x`` in float32, or wider if it is: the handout computes RMSNorm in float32."""
    return x.to(torch.promote_types(x.dtype, torch.float32))


def rmsnorm_divide(x: Tensor, gain: Tensor, eps: float) -> Tensor:
    x32 = widened(x)
    return (x32 / torch.sqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * gain).to(x.dtype)


def rmsnorm_rsqrt(x: Tensor, gain: Tensor, eps: float) -> Tensor:
    x32 = widened(x)
    return (gain * (x32 * torch.rsqrt((x32 * x32).sum(-1, keepdim=True) / x.shape[-1] + eps))).to(
        x.dtype
    )


def rmsnorm_vector_norm(x: Tensor, gain: Tensor, eps: float) -> Tensor:
    x32 = widened(x)
    rms = torch.sqrt(torch.linalg.vector_norm(x32, dim=-1, keepdim=True) ** 2 / x.shape[-1] + eps)
    return (x32 / rms * gain).to(x.dtype)


def rmsnorm_functional(x: Tensor, gain: Tensor, eps: float) -> Tensor:
    return F.rms_norm(x.float(), (x.shape[-1],), gain.float(), eps=eps).to(x.dtype)


def silu_sigmoid(x: Tensor) -> Tensor:
    return x * torch.sigmoid(x)


def silu_divide(x: Tensor) -> Tensor:
    return x / (1 + torch.exp(-x))


def softmax_max(x: Tensor, dim: int) -> Tensor:
    shifted = torch.exp(x - x.amax(dim, keepdim=True))
    return shifted / shifted.sum(dim, keepdim=True)


def softmax_logsumexp(x: Tensor, dim: int) -> Tensor:
    return torch.exp(x - torch.logsumexp(x, dim, keepdim=True))


def softmax_torch(x: Tensor, dim: int) -> Tensor:
    return torch.softmax(x, dim)


# --- attention -------------------------------------------------------------------------------


def sdpa_masked_fill(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return softmax_max(scores, -1) @ v


def sdpa_scaled_queries(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
    """The scale applied to the queries first, the mask as an additive bias, einsum products."""
    scores = torch.einsum("...qd,...kd->...qk", q * attention_scale(q.shape[-1]), k)
    if mask is not None:
        scores = scores + torch.zeros_like(scores).masked_fill(~mask, float("-inf"))
    return torch.einsum("...qk,...kd->...qd", softmax_logsumexp(scores, -1), v)


def sdpa_torch(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


# --- RoPE ------------------------------------------------------------------------------------


def rope_table(x: Tensor, positions: Tensor, theta: float, max_seq_len: int) -> Tensor:
    """A float32 cos/sin table up to ``max_seq_len``, looked up, pairs split by strides."""
    dtype = widened(x).dtype
    angles = torch.outer(
        torch.arange(max_seq_len, dtype=dtype), inverse_frequencies(theta, x.shape[-1], dtype)
    )
    cos, sin = angles.cos()[positions], angles.sin()[positions]
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), -1).flatten(-2)


def rope_complex(x: Tensor, positions: Tensor, theta: float, max_seq_len: int) -> Tensor:
    """Pairs as complex numbers times ``exp(i angle)``, angles in float32 at the positions."""
    frequencies = theta ** (-torch.arange(0, x.shape[-1], 2, dtype=torch.float32) / x.shape[-1])
    angles = positions.to(torch.float32).unsqueeze(-1) * frequencies
    pairs = torch.view_as_complex(x.float().unflatten(-1, (-1, 2)).contiguous())
    rotated = pairs * torch.polar(torch.ones_like(angles), angles)
    return torch.view_as_real(rotated).flatten(-2).to(x.dtype)


def rope_rotate_every_two(x: Tensor, positions: Tensor, theta: float, max_seq_len: int) -> Tensor:
    """GPT-J's form ``x cos + rotate_every_two(x) sin``, angles computed in float64."""
    angles = positions.to(torch.float64).unsqueeze(-1) * inverse_frequencies(
        theta, x.shape[-1], torch.float64
    )
    cos = angles.cos().repeat_interleave(2, -1).to(x.dtype)
    sin = angles.sin().repeat_interleave(2, -1).to(x.dtype)
    swapped = torch.stack((-x[..., 1::2], x[..., 0::2]), -1).flatten(-2)
    return x * cos + swapped * sin


# --- cross-entropy -----------------------------------------------------------------------------


def cross_entropy_logsumexp(logits: Tensor, targets: Tensor) -> Tensor:
    picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return (torch.logsumexp(logits, -1) - picked).mean()


def cross_entropy_log_softmax(logits: Tensor, targets: Tensor) -> Tensor:
    shifted = logits - logits.amax(-1, keepdim=True)
    log_probs = shifted - shifted.exp().sum(-1, keepdim=True).log()
    return -log_probs.gather(-1, targets.unsqueeze(-1)).mean()


def cross_entropy_torch(logits: Tensor, targets: Tensor) -> Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


# --- whole solutions ---------------------------------------------------------------------------

MATMUL = Kit(
    linear=linear_matmul,
    rmsnorm=rmsnorm_divide,
    silu=silu_sigmoid,
    softmax=softmax_max,
    sdpa=sdpa_masked_fill,
    rope=rope_table,
    cross_entropy=cross_entropy_log_softmax,
)
EINSUM = Kit(
    linear=linear_einsum,
    rmsnorm=rmsnorm_rsqrt,
    silu=silu_divide,
    softmax=softmax_logsumexp,
    sdpa=sdpa_scaled_queries,
    rope=rope_complex,
    cross_entropy=cross_entropy_logsumexp,
    embed=embed_one_hot,
    fused_qkv=True,
)
FUNCTIONAL = Kit(
    linear=F.linear,
    rmsnorm=rmsnorm_functional,
    silu=F.silu,
    softmax=softmax_torch,
    sdpa=sdpa_torch,
    rope=rope_rotate_every_two,
    cross_entropy=cross_entropy_torch,
    embed=embed_index_select,
)
BROADCAST = Kit(
    linear=linear_broadcast_sum,
    rmsnorm=rmsnorm_vector_norm,
    silu=silu_sigmoid,
    softmax=softmax_logsumexp,
    sdpa=sdpa_masked_fill,
    rope=rope_rotate_every_two,
    cross_entropy=cross_entropy_logsumexp,
    loop_heads=True,
)


def in_float64(function: Callable) -> Callable:
    """``function`` on float64 copies of its float tensor arguments, its result cast back to
    the dtype of the first of them (float32 results stay float32: rounded once, at the end)."""

    def widened(*args, **kwargs):
        dtype = next(
            (a.dtype for a in args if isinstance(a, Tensor) and a.is_floating_point()), None
        )

        def wide(value):
            if isinstance(value, Tensor) and value.is_floating_point():
                return value.double()
            if isinstance(value, dict):
                return {k: wide(v) for k, v in value.items()}
            return value

        result = function(*(wide(a) for a in args), **{k: wide(v) for k, v in kwargs.items()})
        return result.to(dtype) if dtype is not None and isinstance(result, Tensor) else result

    return widened


def float64_adapters():
    """The matmul solution with every numeric adapter computing in float64 inside."""
    module = MATMUL.adapters("float64")
    for name, value in list(vars(module).items()):
        if name.startswith("run_"):
            setattr(module, name, in_float64(value))
    return module


def compiled_adapters():
    """The matmul solution's block and LM through ``torch.compile`` (inductor's C++ kernels)."""
    return Kit(**{**vars(MATMUL), "wrap": torch.compile}).adapters("compiled")


STYLES: dict[str, Callable] = {
    "matmul": lambda: MATMUL.adapters("matmul"),
    "einsum_rsqrt_logsumexp": lambda: EINSUM.adapters("einsum"),
    "torch_functional": lambda: FUNCTIONAL.adapters("functional"),
    "broadcast_sum": lambda: BROADCAST.adapters("broadcast"),
    "float64_inside": float64_adapters,
}
# Slow to build (a C++ compile per shape), so run on request: ``--compiled``.
OPTIONAL_STYLES: dict[str, Callable] = {"compiled": compiled_adapters}
