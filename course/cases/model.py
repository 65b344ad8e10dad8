"""Snapshot cases for the model components.

Each truth is computed in float64 by code independent of ``cs336_basics``:
``torch.nn.functional``, ``nn.MultiheadAttention``, and the naive attention, RoPE, block and LM
of ``course/cases/truths``. The wrong outputs are the mistakes students actually make, computed
the same independent way.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from course.cases.snapshot_case import CaseResult, FixtureData, snapshot_case
from course.cases.truths.attention import complex_rope, naive_attention
from course.cases.truths.model import layer_weights, naive_block, naive_lm
from cs336_basics.attention import MultiHeadSelfAttention, scaled_dot_product_attention
from cs336_basics.block import transformer_block
from cs336_basics.embedding import Embedding
from cs336_basics.feedforward import SwiGLU
from cs336_basics.functional import silu, softmax
from cs336_basics.linear import Linear
from cs336_basics.model import transformer_lm
from cs336_basics.rmsnorm import RMSNorm
from cs336_basics.rope import RotaryPositionalEmbedding
from cs336_basics.variants.builders import variant_block
from cs336_basics.variants.config import VariantConfig
from tests.cases.model import truncated_length

f64 = torch.float64


@snapshot_case("linear")
def linear(data: FixtureData) -> CaseResult:
    weight, x = layer_weights(data.state_dict)["ffn.w1.weight"], data.inputs["in_embeddings"]
    module = Linear(weight.shape[1], weight.shape[0])
    module.load_state_dict({"weight": weight})
    return CaseResult(module(x), F.linear(x.to(f64), weight.to(f64)))


@snapshot_case("embedding")
def embedding(data: FixtureData) -> CaseResult:
    weight, ids = data.state_dict["token_embeddings.weight"], data.inputs["in_indices"]
    module = Embedding(*weight.shape)
    module.load_state_dict({"weight": weight})
    return CaseResult(module(ids), F.embedding(ids, weight.to(f64)))


@snapshot_case("rmsnorm")
def rmsnorm(data: FixtureData) -> CaseResult:
    gain, x = layer_weights(data.state_dict)["ln1.weight"], data.inputs["in_embeddings"]
    eps = data.config.norm_eps
    module = RMSNorm(gain.shape[0], eps)
    module.load_state_dict({"weight": gain})
    x64, g64 = x.to(f64), gain.to(f64)
    centred = x64 - x64.mean(-1, keepdim=True)
    return CaseResult(
        module(x),
        F.rms_norm(x64, (gain.shape[0],), g64, eps=eps),
        {
            "mean_subtracted": (
                "RMSNorm does not subtract the mean (that is LayerNorm): divide x itself by sqrt(mean(x^2) + eps).",
                F.rms_norm(centred, (gain.shape[0],), g64, eps=eps),
            ),
            "gain_ignored": (
                "the output ignores the learned gain: multiply by weight.",
                F.rms_norm(x64, (gain.shape[0],), eps=eps),
            ),
            "variance": (
                "RMSNorm does not subtract the mean (that is LayerNorm's variance): use mean(x^2).",
                x64 / torch.sqrt(centred.pow(2).mean(-1, keepdim=True) + eps) * g64,
            ),
            "no_sqrt": (
                "divide by the root of the mean square, sqrt(mean(x^2) + eps), not by the mean square itself.",
                x64 / (x64.pow(2).mean(-1, keepdim=True) + eps) * g64,
            ),
            "eps_outside_sqrt": (
                "add eps inside the square root: x / sqrt(mean(x^2) + eps), not x / (sqrt(mean(x^2)) + eps).",
                x64 / (x64.pow(2).mean(-1, keepdim=True).sqrt() + eps) * g64,
            ),
        },
    )


@snapshot_case("silu")
def silu_case(data: FixtureData) -> CaseResult:
    x = data.inputs["in_embeddings"]
    return CaseResult(
        silu(x),
        F.silu(x.to(f64)),
        {
            "sigmoid_only": (
                "SiLU is x * sigmoid(x), not sigmoid(x) alone.",
                torch.sigmoid(x.to(f64)),
            )
        },
    )


@snapshot_case("swiglu")
def swiglu(data: FixtureData) -> CaseResult:
    w = {
        k.removeprefix("ffn."): v
        for k, v in layer_weights(data.state_dict).items()
        if k.startswith("ffn.")
    }
    x = data.inputs["in_embeddings"]
    module = SwiGLU(w["w1.weight"].shape[1], w["w1.weight"].shape[0])
    module.load_state_dict(w)
    x64 = x.to(f64)
    w1, w2, w3 = (w[f"{n}.weight"].to(f64) for n in ("w1", "w2", "w3"))
    return CaseResult(
        module(x),
        F.linear(F.silu(F.linear(x64, w1)) * F.linear(x64, w3), w2),
        {
            "w1_w3_swapped": (
                "w1 and w3 are swapped: SiLU goes on w1 x, and w3 x is the linear gate.",
                F.linear(F.silu(F.linear(x64, w3)) * F.linear(x64, w1), w2),
            ),
            "no_gate": (
                "the gate is missing: SwiGLU multiplies silu(w1 x) elementwise by w3 x.",
                F.linear(F.silu(F.linear(x64, w1)), w2),
            ),
        },
    )


@snapshot_case("softmax")
def softmax_case(data: FixtureData) -> CaseResult:
    x = data.inputs["in_logits"]
    return CaseResult(
        softmax(x, dim=-1),
        F.softmax(x.to(f64), dim=-1),
        {
            "wrong_dim": (
                "softmax normalised over the wrong dimension: use the `dim` argument.",
                F.softmax(x.to(f64), dim=0),
            )
        },
    )


@snapshot_case("scaled_dot_product_attention")
def sdpa(data: FixtureData) -> CaseResult:
    q, k, v, mask = (data.inputs[n] for n in ("q", "k", "v", "mask"))
    q64, k64, v64 = q.to(f64), k.to(f64), v.to(f64)
    d_k = q.shape[-1]
    return CaseResult(
        scaled_dot_product_attention(q, k, v, mask),
        F.scaled_dot_product_attention(q64, k64, v64, attn_mask=mask),
        {
            "no_scale": (
                "scores are not scaled: divide QK^T by sqrt(d_k).",
                F.scaled_dot_product_attention(q64, k64, v64, attn_mask=mask, scale=1.0),
            ),
            "scale_by_d_k": (
                "scores are divided by d_k; the scale is 1/sqrt(d_k).",
                F.scaled_dot_product_attention(q64, k64, v64, attn_mask=mask, scale=1 / d_k),
            ),
            "inverted_mask": (
                "the mask is inverted: True means the query MAY attend to the key.",
                F.scaled_dot_product_attention(q64, k64, v64, attn_mask=~mask),
            ),
            "mask_ignored": (
                "the mask is ignored: set masked scores to -inf before the softmax.",
                F.scaled_dot_product_attention(q64, k64, v64),
            ),
        },
    )


@snapshot_case("multihead_self_attention")
def mhsa(data: FixtureData) -> CaseResult:
    w = {
        k.removeprefix("attn."): v
        for k, v in layer_weights(data.state_dict).items()
        if k.startswith("attn.")
    }
    x = data.inputs["in_embeddings"]
    d_model, heads = data.config.d_model, data.config.num_heads
    module = MultiHeadSelfAttention(d_model, heads)
    module.load_state_dict(w)
    torch_mha = nn.MultiheadAttention(d_model, heads, bias=False, batch_first=True, dtype=f64)
    torch_mha.in_proj_weight.data = torch.cat([w[f"{n}_proj.weight"] for n in "qkv"]).to(f64)
    torch_mha.out_proj.weight.data = w["output_proj.weight"].to(f64)
    seq = x.shape[1]
    future = torch.ones(seq, seq, dtype=torch.bool).triu(1)  # nn.MultiheadAttention: True = blocked
    x64 = x.to(f64)
    truth = torch_mha(x64, x64, x64, attn_mask=future, need_weights=False)[0]
    return CaseResult(
        module(x),
        truth,
        {
            "not_causal": (
                "attention is not causal: each position must ignore the positions after it.",
                naive_attention(x, w, heads, causal=False),
            ),
            "future_mask": (
                "the causal mask is upside down: query i sees keys 0..i (lower triangle), not i.. (upper).",
                naive_attention(x, w, heads, future_mask=True),
            ),
            "heads_split_wrong": (
                "heads are split in the wrong order: head h owns features h*d_k .. (h+1)*d_k - 1, i.e. '(heads d_k)'.",
                naive_attention(x, w, heads, heads_last=True),
            ),
        },
    )


@snapshot_case("multihead_self_attention_with_rope")
def mhsa_rope(data: FixtureData) -> CaseResult:
    w = {
        k.removeprefix("attn."): v
        for k, v in layer_weights(data.state_dict).items()
        if k.startswith("attn.")
    }
    x, config = data.inputs["in_embeddings"], data.config
    positions = torch.arange(x.shape[1]).expand(x.shape[0], -1)
    rope = RotaryPositionalEmbedding(config.rope_theta, config.d_head, config.context_length)
    module = MultiHeadSelfAttention(config.d_model, config.num_heads, rope=rope)
    module.load_state_dict(w)
    return CaseResult(
        module(x, positions),
        naive_attention(x, w, config.num_heads, positions, config.rope_theta),
        {
            "rope_missing": (
                "RoPE is missing: rotate queries and keys before the scores.",
                naive_attention(x, w, config.num_heads),
            ),
            "rope_on_values": (
                "RoPE rotates queries and keys only, never values.",
                naive_attention(
                    x, w, config.num_heads, positions, config.rope_theta, rope_values=True
                ),
            ),
        },
    )


@snapshot_case("rope")
def rope_case(data: FixtureData) -> CaseResult:
    x, positions, config = data.inputs["in_embeddings"], data.inputs["token_positions"], data.config
    d_k = x.shape[-1]
    module = RotaryPositionalEmbedding(config.rope_theta, d_k, config.context_length)
    return CaseResult(
        module(x, positions),
        complex_rope(x, positions, config.rope_theta),
        {
            "rotate_half": (
                "this is the rotate-half layout (pairs x[i], x[i + d/2]); the handout rotates interleaved pairs (x[2i], x[2i+1]).",
                complex_rope(x, positions, config.rope_theta, rotate_half=True),
            ),
            "positions_off_by_one": (
                "positions are off by one: use token_positions as given, starting at 0.",
                complex_rope(x, positions + 1, config.rope_theta),
            ),
            "rotation_reversed": (
                "the rotation goes the wrong way: x[2i] cos - x[2i+1] sin, then x[2i] sin + x[2i+1] cos.",
                complex_rope(x, -positions, config.rope_theta),
            ),
            "frequency_exponent": (
                "the frequencies are off: pair i = 0 .. d_k/2 - 1 turns by p * theta^(-2i/d_k), not theta^(-i/d_k).",
                complex_rope(x, positions, config.rope_theta**0.5),
            ),
        },
    )


@snapshot_case("transformer_block")
def block(data: FixtureData) -> CaseResult:
    w, x = layer_weights(data.state_dict), data.inputs["in_embeddings"]
    config = data.config
    rope = RotaryPositionalEmbedding(config.rope_theta, config.d_head, config.context_length)
    module = transformer_block(config.d_model, config.num_heads, config.d_ff, rope, config.norm_eps)
    module.load_state_dict(w)
    return CaseResult(
        module(x),
        naive_block(x, w, data.config),
        {
            "post_norm": (
                "this is a post-norm block; the handout's block is pre-norm: x + attn(ln1(x)), then + ffn(ln2(.)).",
                naive_block(x, w, data.config, mistake="post_norm"),
            ),
            "no_ffn_residual": (
                "the feed-forward sublayer lost its residual connection: h + ffn(ln2(h)).",
                naive_block(x, w, data.config, mistake="no_ffn_residual"),
            ),
            "ffn_uses_ln1": (
                "the feed-forward sublayer has its own norm, ln2; ln1 belongs to attention.",
                naive_block(x, w, data.config, mistake="ffn_uses_ln1"),
            ),
        },
    )


# The handout's ablations: (config switches, naive_block switches, weights the variant lacks).
ABLATIONS = {
    "post_norm": (dict(norm_placement="post"), dict(norm_placement="post"), ()),
    "no_norm": (
        dict(norm_placement="none"),
        dict(norm_placement="none"),
        ("ln1.weight", "ln2.weight"),
    ),
    "nope": (dict(position_encoding="none"), dict(rope=False), ()),
    "silu_ffn": (dict(ffn="silu"), dict(gated=False), ("ffn.w3.weight",)),
}


def ablation_case(config_switches: dict, block_switches: dict, absent: tuple[str, ...]):
    def case(data: FixtureData) -> CaseResult:
        w = {k: v for k, v in layer_weights(data.state_dict).items() if k not in absent}
        x = data.inputs["in_embeddings"]
        config = VariantConfig.from_dict({**data.config.flat_dict(), **config_switches})
        rope = RotaryPositionalEmbedding(config.rope_theta, config.d_head, config.context_length)
        module = variant_block(config, rope if config.position_encoding == "rope" else None)
        module.load_state_dict(w)
        return CaseResult(module(x), naive_block(x, w, data.config, **block_switches))

    return case


for _name, _switches in ABLATIONS.items():
    snapshot_case(f"transformer_block_{_name}")(ablation_case(*_switches))


@snapshot_case("transformer_lm")
def lm(data: FixtureData) -> CaseResult:
    ids = data.inputs["in_indices"]
    model = transformer_lm(data.config)
    model.load_state_dict(data.state_dict)
    return CaseResult(
        model(ids),
        naive_lm(ids, data.config, data.state_dict),
        {
            "no_final_norm": (
                "the final RMSNorm (ln_final) is missing before lm_head.",
                naive_lm(ids, data.config, data.state_dict, final_norm=False),
            ),
            "probabilities": (
                "return unnormalised logits; the softmax belongs to the loss or the sampler.",
                F.softmax(naive_lm(ids, data.config, data.state_dict), dim=-1),
            ),
        },
    )


@snapshot_case("transformer_lm_truncated")
def lm_truncated(data: FixtureData) -> CaseResult:
    ids = data.inputs["in_indices"][:, : truncated_length(data.config.context_length)]
    model = transformer_lm(data.config)
    model.load_state_dict(data.state_dict)
    return CaseResult(model(ids), naive_lm(ids, data.config, data.state_dict))
