"""A Transformer LM assembled from interchangeable primitives, as plain functions.

Every fairness *style* (``course/cases/fairness/styles.py``) picks one implementation of each
primitive (linear map, RMSNorm, SiLU, softmax, attention, RoPE, cross-entropy); ``Kit`` turns
that choice into the full set of numeric adapters (``run_linear`` ... ``run_transformer_lm``)
with the upstream adapters' names and parameters, so a style can be graded exactly as a
student's ``tests/adapters.py`` is. Written from the handout's formulas, independently of
``cs336_basics``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

import torch
from torch import Tensor

Weights = dict[str, Tensor]


@dataclass(frozen=True)
class Kit:
    """One choice of each primitive, and whether the q, k, v projections are one matmul."""

    linear: Callable[[Tensor, Tensor], Tensor]  # (x, weight of shape (d_out, d_in))
    rmsnorm: Callable[[Tensor, Tensor, float], Tensor]  # (x, gain, eps)
    silu: Callable[[Tensor], Tensor]
    softmax: Callable[[Tensor, int], Tensor]
    sdpa: Callable[[Tensor, Tensor, Tensor, Tensor | None], Tensor]  # mask True: may attend
    rope: Callable[[Tensor, Tensor, float, int], Tensor]  # (x, positions, theta, max_seq_len)
    cross_entropy: Callable[[Tensor, Tensor], Tensor]
    embed: Callable[[Tensor, Tensor], Tensor] = lambda weight, ids: weight[ids]
    fused_qkv: bool = False  # one projection by the stacked q, k, v weights
    loop_heads: bool = False  # each head projected and attended on its own, then concatenated
    wrap: Callable[[Callable], Callable] = lambda function: function  # e.g. torch.compile

    def swiglu(self, x: Tensor, w1: Tensor, w2: Tensor, w3: Tensor) -> Tensor:
        return self.linear(self.silu(self.linear(x, w1)) * self.linear(x, w3), w2)

    def project(self, x: Tensor, wq: Tensor, wk: Tensor, wv: Tensor) -> tuple[Tensor, ...]:
        if self.fused_qkv:
            return self.linear(x, torch.cat((wq, wk, wv))).chunk(3, dim=-1)
        return self.linear(x, wq), self.linear(x, wk), self.linear(x, wv)

    def attention(self, x: Tensor, w: tuple[Tensor, ...], heads: int, rope=None, positions=None):
        """Causal MHSA on ``x``; ``w`` holds the q, k, v and output projections; ``rope`` is
        ``(theta, max_seq_len)`` or ``None``."""
        if self.loop_heads and heads > 1:
            rows = w[0].shape[0] // heads
            outs = [
                self.heads_attention(
                    x, tuple(m[h * rows : (h + 1) * rows] for m in w[:3]), 1, rope, positions
                )
                for h in range(heads)
            ]
            return self.linear(torch.cat(outs, dim=-1), w[3])
        return self.linear(self.heads_attention(x, w[:3], heads, rope, positions), w[3])

    def heads_attention(self, x: Tensor, w: tuple[Tensor, ...], heads: int, rope, positions):
        """The attended values of ``heads`` heads before the output projection."""
        q, k, v = self.project(x, *w)
        seq, d_k = x.shape[-2], q.shape[-1] // heads

        def split(t: Tensor) -> Tensor:
            return t.unflatten(-1, (heads, d_k)).transpose(-3, -2)

        q, k, v = split(q), split(k), split(v)
        if rope is not None:
            if positions is None:
                positions = torch.arange(seq, device=x.device)
            positions = positions.unsqueeze(-2)  # broadcast over the heads
            q, k = self.rope(q, positions, *rope), self.rope(k, positions, *rope)
        causal = torch.ones(seq, seq, dtype=torch.bool, device=x.device).tril()
        return self.sdpa(q, k, v, causal).transpose(-3, -2).flatten(-2)

    def block(self, x: Tensor, w: Weights, heads: int, rope: tuple[float, int], eps: float):
        attn = tuple(w[f"attn.{n}_proj.weight"] for n in ("q", "k", "v", "output"))
        h = x + self.attention(self.rmsnorm(x, w["ln1.weight"], eps), attn, heads, rope)
        ffn = (w[f"ffn.w{i}.weight"] for i in (1, 2, 3))
        return h + self.swiglu(self.rmsnorm(h, w["ln2.weight"], eps), *ffn)

    def lm(self, ids: Tensor, w: Weights, layers: int, heads: int, rope, eps: float) -> Tensor:
        x = self.embed(w["token_embeddings.weight"], ids)
        for i in range(layers):
            prefix = f"layers.{i}."
            own = {k.removeprefix(prefix): v for k, v in w.items() if k.startswith(prefix)}
            x = self.block(x, own, heads, rope, eps)
        return self.linear(self.rmsnorm(x, w["ln_final.weight"], eps), w["lm_head.weight"])

    def adapters(self, name: str) -> ModuleType:
        """The numeric adapters of this kit, as a module a case can call."""
        module = ModuleType(f"fairness_{name}")
        eps = 1e-5  # the block and LM adapters take no eps: the handout's default
        block = self.wrap(self.block)
        lm = self.wrap(self.lm)
        module.__dict__.update(
            run_linear=lambda d_in, d_out, weights, x: self.linear(x, weights),
            run_embedding=lambda vocab, d_model, weights, ids: self.embed(weights, ids),
            run_rmsnorm=lambda d_model, eps, weights, x: self.rmsnorm(x, weights, eps),
            run_silu=self.silu,
            run_softmax=lambda x, dim: self.softmax(x, dim),
            run_swiglu=lambda d_model, d_ff, w1, w2, w3, x: self.swiglu(x, w1, w2, w3),
            run_scaled_dot_product_attention=lambda q, k, v, mask=None: self.sdpa(q, k, v, mask),
            run_multihead_self_attention=lambda d, heads, q, k, v, o, x: self.attention(
                x, (q, k, v, o), heads
            ),
            run_multihead_self_attention_with_rope=(
                lambda d, heads, max_len, theta, q, k, v, o, x, positions=None: self.attention(
                    x, (q, k, v, o), heads, (theta, max_len), positions
                )
            ),
            run_rope=lambda d_k, theta, max_len, x, positions: self.rope(
                x, positions, theta, max_len
            ),
            run_transformer_block=lambda d, heads, d_ff, max_len, theta, weights, x: block(
                x, weights, heads, (theta, max_len), eps
            ),
            run_transformer_lm=(
                lambda vocab, context, d, layers, heads, d_ff, theta, weights, ids: lm(
                    ids, weights, layers, heads, (theta, context), eps
                )
            ),
            run_cross_entropy=self.cross_entropy,
        )
        return module


def inverse_frequencies(theta: float, d_k: int, dtype: torch.dtype) -> Tensor:
    """``theta^(-2i/d_k)`` for the pairs ``i = 0 .. d_k/2 - 1``."""
    return 1.0 / theta ** (torch.arange(0, d_k, 2, dtype=dtype) / d_k)


def attention_scale(d_k: int) -> float:
    return 1.0 / math.sqrt(d_k)
