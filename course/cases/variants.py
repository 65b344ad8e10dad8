"""Snapshot cases for the architecture variants (beyond the assignment).

Truths are float64 computations written from the equations with ``torch.nn.functional``,
independent of ``cs336_basics`` (the longer ones in ``course/cases/truths/variants.py``); the
wrong outputs are plausible mistakes with their hints.
Weights come from ``tests/variants/variant_weights.py`` so the tests can rebuild them.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from course.cases.snapshot_case import CaseResult, FixtureData, snapshot_case
from course.cases.truths.variants import naive_gqa, naive_mla, naive_moe, positions_of
from cs336_basics.rope import RotaryPositionalEmbedding
from cs336_basics.variants.attention import SelfAttention, self_attention
from cs336_basics.variants.builders import latent_attention
from cs336_basics.variants.config import VariantConfig
from cs336_basics.variants.decoding.kv_cache import kv_caches
from cs336_basics.variants.encoder_decoder import DecoderLayer, EncoderLayer
from cs336_basics.variants.feedforward import FeedForward
from cs336_basics.variants.layernorm import LayerNorm
from cs336_basics.variants.moe import mixture_of_experts
from cs336_basics.variants.positional import SinusoidalPositionalEncoding
from tests.variants import variant_weights as vw

f64 = torch.float64


def gqa_module(data: FixtureData, w: dict[str, Tensor], qk_norm: bool) -> SelfAttention:
    config = data.config
    rope = RotaryPositionalEmbedding(config.rope_theta, vw.D_HEAD, config.context_length)
    module = self_attention(
        config.d_model, vw.NUM_HEADS, vw.NUM_KV_HEADS, rope=rope, qk_norm=qk_norm
    )
    module.load_state_dict(w)
    return module


@snapshot_case("grouped_query_attention")
def gqa(data: FixtureData) -> CaseResult:
    w, x = vw.gqa_weights(data.state_dict), data.inputs["in_embeddings"]
    theta = data.config.rope_theta
    return CaseResult(
        gqa_module(data, w, qk_norm=False)(x, positions_of(x)),
        naive_gqa(x, w, theta),
        {
            "kv_heads_tiled": (
                "query head h must read key/value head h // (num_heads / num_kv_heads) (repeat_interleave), not h % num_kv_heads.",
                naive_gqa(x, w, theta, kv_heads_tiled=True),
            )
        },
    )


@snapshot_case("qk_norm_attention")
def qk_norm(data: FixtureData) -> CaseResult:
    w, x = vw.gqa_weights(data.state_dict, qk_norm=True), data.inputs["in_embeddings"]
    theta = data.config.rope_theta
    return CaseResult(
        gqa_module(data, w, qk_norm=True)(x, positions_of(x)),
        naive_gqa(x, w, theta, qk_norm=True),
        {
            "norm_after_rope": (
                "QK-norm goes before RoPE (normalise each head, then rotate).",
                naive_gqa(x, w, theta, qk_norm=True, norm_after_rope=True),
            ),
            "qk_norm_missing": (
                "the per-head RMSNorm of queries and keys is missing.",
                naive_gqa(x, w, theta),
            ),
        },
    )


@snapshot_case("layernorm")
def layernorm(data: FixtureData) -> CaseResult:
    (gain, shift), x = vw.layernorm_weights(data.state_dict), data.inputs["in_embeddings"]
    module = LayerNorm(gain.shape[0], 1e-5)
    module.load_state_dict({"weight": gain, "bias": shift})
    x64, g64, b64 = x.to(f64), gain.to(f64), shift.to(f64)
    centred = x64 - x64.mean(-1, keepdim=True)
    return CaseResult(
        module(x),
        F.layer_norm(x64, (gain.shape[0],), g64, b64, eps=1e-5),
        {
            "sample_variance": (
                "LayerNorm divides by the population variance (mean of squares, / d_model), not the sample variance (/ (d_model - 1)).",
                centred / torch.sqrt(x64.var(-1, unbiased=True, keepdim=True) + 1e-5) * g64 + b64,
            ),
            "not_centred": (
                "LayerNorm subtracts the mean first (without it, this is RMSNorm).",
                F.rms_norm(x64, (gain.shape[0],), g64, eps=1e-5) + b64,
            ),
            "bias_ignored": (
                "the output ignores the learned bias: add it after scaling.",
                F.layer_norm(x64, (gain.shape[0],), g64, eps=1e-5),
            ),
        },
    )


@snapshot_case("gelu_feedforward")
def gelu_ffn(data: FixtureData) -> CaseResult:
    w, x = vw.gelu_weights(data.state_dict), data.inputs["in_embeddings"]
    module = FeedForward(w["w1.weight"].shape[1], w["w1.weight"].shape[0], "gelu")
    module.load_state_dict(w)
    x64, w1, w2 = x.to(f64), w["w1.weight"].to(f64), w["w2.weight"].to(f64)
    return CaseResult(
        module(x),
        F.linear(F.gelu(F.linear(x64, w1)), w2),
        {
            "relu": (
                "this is ReLU; GELU is x * Phi(x) with the standard normal CDF Phi.",
                F.linear(F.relu(F.linear(x64, w1)), w2),
            )
        },
    )


@snapshot_case("sinusoidal_positions")
def sinusoidal(data: FixtureData) -> CaseResult:
    positions, d_model = data.inputs["token_positions"], data.config.d_model
    p = positions.to(f64)[..., None]
    rates = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=f64) / d_model)
    truth = torch.stack((torch.sin(p * rates), torch.cos(p * rates)), dim=-1).flatten(-2)
    halves = torch.cat((torch.sin(p * rates), torch.cos(p * rates)), dim=-1)
    return CaseResult(
        SinusoidalPositionalEncoding(d_model, data.config.context_length)(positions),
        truth,
        {
            "sin_cos_halves": (
                "sin goes to even features and cos to odd ones (interleaved), not sin in the first half.",
                halves,
            )
        },
    )


@snapshot_case("multihead_latent_attention")
def mla(data: FixtureData) -> CaseResult:
    w, x = vw.mla_weights(data.state_dict), data.inputs["in_embeddings"]
    module = latent_attention(VariantConfig.from_dict(vw.MLA_CONFIG))
    module.load_state_dict(w)
    with kv_caches(module):  # the folded (latent-cached) path
        output = module(x, positions_of(x))
    return CaseResult(
        output,
        naive_mla(x, w, data.config.rope_theta),
        {
            "rope_on_all_dims": (
                "RoPE rotates only the qk_rope_head_dim decoupled dims (the shared key and the last query dims of each head).",
                naive_mla(x, w, data.config.rope_theta, rope_on_nope=True),
            )
        },
    )


@snapshot_case("mixture_of_experts")
def moe(data: FixtureData) -> CaseResult:
    w, x = vw.moe_weights(data.state_dict), data.inputs["in_embeddings"]
    d_model, d_ff = w["experts.0.w1.weight"].shape[1], w["experts.0.w1.weight"].shape[0]
    module = mixture_of_experts(d_model, d_ff, vw.NUM_EXPERTS, vw.TOP_K, normalize_topk=True)
    module.load_state_dict(w)
    return CaseResult(
        module(x),
        naive_moe(x, w, normalize=True),
        {
            "topk_not_renormalised": (
                "with normalize_topk the chosen experts' weights are renormalised to sum to one.",
                naive_moe(x, w, normalize=False),
            )
        },
    )


def torch_layer(kind: type, w: dict[str, Tensor], *, norm_first: bool = False) -> torch.nn.Module:
    """``nn.TransformerEncoderLayer`` / ``DecoderLayer`` in float64 holding the weights ``w``."""
    layer = kind(
        64,
        vw.NUM_HEADS,
        128,
        dropout=0.0,
        activation="gelu",
        batch_first=True,
        norm_first=norm_first,
        dtype=f64,
    )
    attentions = {
        "self_attn": layer.self_attn,
        "cross_attn": getattr(layer, "multihead_attn", None),
    }
    with torch.no_grad():
        for prefix, attention in attentions.items():
            if attention is None:
                continue
            attention.in_proj_weight.copy_(
                torch.cat([w[f"{prefix}.{p}_proj.weight"] for p in "qkv"])
            )
            attention.in_proj_bias.copy_(torch.cat([w[f"{prefix}.{p}_proj.bias"] for p in "qkv"]))
            attention.out_proj.weight.copy_(w[f"{prefix}.output_proj.weight"])
            attention.out_proj.bias.copy_(w[f"{prefix}.output_proj.bias"])
        for ours, theirs in (
            ("ffn.w1", "linear1"),
            ("ffn.w2", "linear2"),
            ("ln1", "norm1"),
            ("ln2", "norm2"),
            ("ln3", "norm3"),
        ):
            if f"{ours}.weight" in w:
                getattr(layer, theirs).weight.copy_(w[f"{ours}.weight"])
                getattr(layer, theirs).bias.copy_(w[f"{ours}.bias"])
    return layer.eval()


@snapshot_case("encoder_layer")
def encoder_layer(data: FixtureData) -> CaseResult:
    w, x = vw.encoder_layer_weights(data.state_dict), data.inputs["in_embeddings"]
    module = EncoderLayer(64, vw.NUM_HEADS, 128)
    module.load_state_dict(w)
    x64 = x.to(f64)
    return CaseResult(
        module(x),
        torch_layer(torch.nn.TransformerEncoderLayer, w)(x64),
        {
            "pre_norm": (
                "the original Transformer normalises after each residual add: ln(x + sublayer(x)).",
                torch_layer(torch.nn.TransformerEncoderLayer, w, norm_first=True)(x64),
            )
        },
    )


@snapshot_case("decoder_layer")
def decoder_layer(data: FixtureData) -> CaseResult:
    w, memory = vw.decoder_layer_weights(data.state_dict), data.inputs["in_embeddings"]
    x = memory[:, :7].flip(1)
    module = DecoderLayer(64, vw.NUM_HEADS, 128)
    module.load_state_dict(w)
    layer, x64, m64 = torch_layer(torch.nn.TransformerDecoderLayer, w), x.to(f64), memory.to(f64)
    causal = torch.nn.Transformer.generate_square_subsequent_mask(7, dtype=f64)
    return CaseResult(
        module(x, memory),
        layer(x64, m64, tgt_mask=causal, tgt_is_causal=True),
        {
            "self_attention_not_causal": (
                "the decoder's self-attention must be causal (cross-attention is not).",
                layer(x64, m64),
            )
        },
    )
