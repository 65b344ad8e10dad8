"""The architecture variants' truths in float64, written from the equations with
``torch.nn.functional`` (grouped-query and QK-norm attention, multi-head latent attention,
mixture of experts), with the mistakes their snapshots name. Snapshot cases only: the variants
are not graded, so nothing here is in ``TRUTHS`` (and the base handout's copies of this
package need not hold ``tests/variants``)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from course.cases.truths.attention import complex_rope
from tests.variants import variant_weights as vw

f64 = torch.float64


def positions_of(x: Tensor) -> Tensor:
    return torch.arange(x.shape[1]).expand(x.shape[0], -1)


def naive_gqa(
    x: Tensor,
    w: dict[str, Tensor],
    theta: float,
    *,
    qk_norm: bool = False,
    norm_after_rope: bool = False,
    kv_heads_tiled: bool = False,
) -> Tensor:
    batch, seq, d_model = x.shape
    x64, positions = x.to(f64), positions_of(x)[:, None, :]

    def heads(name: str, count: int) -> Tensor:
        return (
            F.linear(x64, w[f"{name}_proj.weight"].to(f64))
            .reshape(batch, seq, count, vw.D_HEAD)
            .transpose(1, 2)
        )

    q, k, v = heads("q", vw.NUM_HEADS), heads("k", vw.NUM_KV_HEADS), heads("v", vw.NUM_KV_HEADS)

    def norm(t: Tensor, name: str) -> Tensor:
        return (
            F.rms_norm(t, (vw.D_HEAD,), w[f"{name}_norm.weight"].to(f64), eps=1e-5)
            if qk_norm
            else t
        )

    if not norm_after_rope:
        q, k = norm(q, "q"), norm(k, "k")
    q, k = complex_rope(q, positions, theta), complex_rope(k, positions, theta)
    if norm_after_rope:
        q, k = norm(q, "q"), norm(k, "k")
    group = vw.NUM_HEADS // vw.NUM_KV_HEADS
    expand = (
        (lambda t: t.repeat(1, group, 1, 1))
        if kv_heads_tiled
        else (lambda t: t.repeat_interleave(group, dim=1))
    )
    out = F.scaled_dot_product_attention(q, expand(k), expand(v), is_causal=True)
    return F.linear(
        out.transpose(1, 2).reshape(batch, seq, d_model), w["output_proj.weight"].to(f64)
    )


def naive_mla(
    x: Tensor, w: dict[str, Tensor], theta: float, *, rope_on_nope: bool = False
) -> Tensor:
    batch, seq, _ = x.shape
    heads, nope, rope = (
        vw.MLA_CONFIG["num_heads"],
        vw.MLA_CONFIG["qk_nope_head_dim"],
        vw.MLA_CONFIG["qk_rope_head_dim"],
    )
    x64, positions = x.to(f64), positions_of(x)
    w64 = {k: v.to(f64) for k, v in w.items()}
    q = F.linear(x64, w64["q_proj.weight"]).reshape(batch, seq, heads, nope + rope).transpose(1, 2)
    latent = F.rms_norm(
        F.linear(x64, w64["kv_down_proj.weight"]), (32,), w64["kv_norm.weight"], eps=1e-5
    )
    k_nope = (
        F.linear(latent, w64["k_up_proj.weight"]).reshape(batch, seq, heads, nope).transpose(1, 2)
    )
    v = F.linear(latent, w64["v_up_proj.weight"]).reshape(batch, seq, heads, -1).transpose(1, 2)
    k_rope = complex_rope(F.linear(x64, w64["k_rope_proj.weight"]), positions, theta)[
        :, None
    ].expand(-1, heads, -1, -1)
    q_rotated = complex_rope(q[..., nope:], positions[:, None], theta)
    if rope_on_nope:
        q = complex_rope(q, positions[:, None], theta)
        k = complex_rope(torch.cat((k_nope, k_rope), -1), positions[:, None], theta)
    else:
        q = torch.cat((q[..., :nope], q_rotated), -1)
        k = torch.cat((k_nope, k_rope), -1)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return F.linear(out.transpose(1, 2).reshape(batch, seq, -1), w64["output_proj.weight"])


def naive_moe(x: Tensor, w: dict[str, Tensor], *, normalize: bool) -> Tensor:
    tokens = x.to(f64).reshape(-1, x.shape[-1])
    w64 = {k: v.to(f64) for k, v in w.items()}
    probs = F.softmax(F.linear(tokens, w64["router.weight"]), dim=-1)
    top, chosen = probs.topk(vw.TOP_K, dim=-1)
    if normalize:
        top = top / top.sum(-1, keepdim=True)
    out = torch.zeros_like(tokens)
    for e in range(vw.NUM_EXPERTS):
        w1, w2, w3 = (w64[f"experts.{e}.{n}.weight"] for n in ("w1", "w2", "w3"))
        expert = F.linear(F.silu(F.linear(tokens, w1)) * F.linear(tokens, w3), w2)
        out += ((chosen == e) * top).sum(-1, keepdim=True) * expert
    return out.reshape(x.shape)
