"""The Transformer block and LM in float64, built from ``torch.nn.functional`` and the naive
attention of ``truths/attention.py``, with the handout's ablation switches and the common
mistakes (for hints)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from course.cases.truths.attention import naive_attention
from course.cases.truths.tolerances import close_to
from cs336_basics.config import ModelConfig
from tests.cases.core import Bundle

f64 = torch.float64


def layer_weights(state_dict: dict[str, Tensor], layer: int = 0) -> dict[str, Tensor]:
    prefix = f"layers.{layer}."
    return {k.removeprefix(prefix): v for k, v in state_dict.items() if k.startswith(prefix)}


def naive_block(
    x: Tensor,
    w: dict[str, Tensor],
    config: ModelConfig,
    *,
    norm_placement: str = "pre",
    rope: bool = True,
    gated: bool = True,
    mistake: str | None = None,
) -> Tensor:
    """The block with the handout's ablation switches (post-norm is ``mistake="post_norm"`` or
    ``norm_placement="post"``), or with ``mistake`` "no_ffn_residual" or "ffn_uses_ln1"."""
    positions = torch.arange(x.shape[1]).expand(x.shape[0], -1)
    if mistake == "post_norm":
        norm_placement = "post"

    def norm(t: Tensor, name: str) -> Tensor:
        return F.rms_norm(t, (config.d_model,), w[name].to(f64), eps=config.norm_eps)

    def attn(t: Tensor) -> Tensor:
        weights = {k.removeprefix("attn."): v for k, v in w.items() if k.startswith("attn.")}
        return naive_attention(
            t, weights, config.num_heads, positions, config.rope_theta if rope else None
        )

    def ffn(t: Tensor) -> Tensor:
        hidden = F.silu(F.linear(t, w["ffn.w1.weight"].to(f64)))
        if gated:
            hidden = hidden * F.linear(t, w["ffn.w3.weight"].to(f64))
        return F.linear(hidden, w["ffn.w2.weight"].to(f64))

    x = x.to(f64)
    if norm_placement == "post":
        x = norm(x + attn(x), "ln1.weight")
        return norm(x + ffn(x), "ln2.weight")
    if norm_placement == "none":
        x = x + attn(x)
        return x + ffn(x)
    x = x + attn(norm(x, "ln1.weight"))
    if mistake == "no_ffn_residual":
        return ffn(norm(x, "ln2.weight"))
    return x + ffn(norm(x, "ln1.weight" if mistake == "ffn_uses_ln1" else "ln2.weight"))


def naive_lm(
    ids: Tensor, config: ModelConfig, state_dict: dict[str, Tensor], *, final_norm: bool = True
) -> Tensor:
    x = F.embedding(ids, state_dict["token_embeddings.weight"].to(f64))
    for i in range(config.num_layers):
        x = naive_block(x, layer_weights(state_dict, i), config)
    if final_norm:
        x = F.rms_norm(
            x, (config.d_model,), state_dict["ln_final.weight"].to(f64), eps=config.norm_eps
        )
    return F.linear(x, state_dict["lm_head.weight"].to(f64))


def case_model(inputs: Bundle) -> tuple[ModelConfig, dict[str, Tensor]]:
    """A block or LM case's config and weights (its ``w.``-prefixed inputs)."""
    config = ModelConfig(
        vocab_size=inputs.get("vocab_size", 1),
        context_length=inputs["context_length"],
        d_model=inputs["d_model"],
        num_layers=inputs.get("num_layers", 1),
        num_heads=inputs["num_heads"],
        d_ff=inputs["d_ff"],
        rope_theta=inputs["rope_theta"],
    )
    weights = {k.removeprefix("w."): v for k, v in inputs.items() if k.startswith("w.")}
    return config, weights


def block(inputs: Bundle) -> Bundle:
    config, weights = case_model(inputs)
    return close_to(naive_block(inputs["x"], weights, config))


def lm(inputs: Bundle) -> Bundle:
    config, weights = case_model(inputs)
    return close_to(naive_lm(inputs["ids"], config, weights))


TRUTHS = {
    ("transformer_block", "basic"): block,
    ("transformer_lm", "prefixes"): lm,
    ("transformer_lm", "truncated"): lm,
}
