"""Weights for the architecture-variant snapshots, sliced deterministically from the frozen
reference model (``fixtures/model``), so the snapshot generator (``course/cases/variants.py``)
and the tests feed identical weights without storing more fixtures.

The reference model has d_model 64, 4 heads of 16, d_ff 128 and 3 layers.
"""

from __future__ import annotations

from torch import Tensor

NUM_HEADS, NUM_KV_HEADS, D_HEAD = 4, 2, 16
MLA_CONFIG = dict(
    vocab_size=512,
    context_length=16,
    d_model=64,
    num_layers=1,
    num_heads=4,
    d_ff=128,
    attention="mla",
    kv_lora_rank=32,
    qk_rope_head_dim=4,
    qk_nope_head_dim=12,
    v_head_dim=16,
)
NUM_EXPERTS, TOP_K = 3, 2


def gqa_weights(state_dict: dict[str, Tensor], qk_norm: bool = False) -> dict[str, Tensor]:
    """Layer 0's attention with keys and values cut to ``NUM_KV_HEADS`` heads."""
    kv_rows = NUM_KV_HEADS * D_HEAD
    weights = {
        "q_proj.weight": state_dict["layers.0.attn.q_proj.weight"],
        "k_proj.weight": state_dict["layers.0.attn.k_proj.weight"][:kv_rows],
        "v_proj.weight": state_dict["layers.0.attn.v_proj.weight"][:kv_rows],
        "output_proj.weight": state_dict["layers.0.attn.output_proj.weight"],
    }
    if qk_norm:
        weights["q_norm.weight"] = state_dict["layers.1.ln1.weight"][:D_HEAD]
        weights["k_norm.weight"] = state_dict["layers.1.ln2.weight"][:D_HEAD]
    return weights


def layernorm_weights(state_dict: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
    """A gain and a (non-zero) shift."""
    return state_dict["layers.0.ln1.weight"], state_dict["layers.0.ln2.weight"] - 1.0


def gelu_weights(state_dict: dict[str, Tensor]) -> dict[str, Tensor]:
    return {
        "w1.weight": state_dict["layers.0.ffn.w1.weight"],
        "w2.weight": state_dict["layers.0.ffn.w2.weight"],
    }


def mla_weights(state_dict: dict[str, Tensor]) -> dict[str, Tensor]:
    """MLA with a full-rank query (``q_proj``: 4 heads x (12 nope + 4 rope) = 64 rows)."""
    attn = {
        name: state_dict[f"layers.0.attn.{name}.weight"]
        for name in ("q_proj", "k_proj", "output_proj")
    }
    return {
        "q_proj.weight": attn["q_proj"],
        "kv_down_proj.weight": attn["k_proj"][:32],
        "k_rope_proj.weight": attn["k_proj"][32:36],
        "kv_norm.weight": state_dict["layers.0.ln1.weight"][:32],
        "k_up_proj.weight": state_dict["layers.0.ffn.w1.weight"][:48, :32],
        "v_up_proj.weight": state_dict["layers.0.ffn.w3.weight"][:64, :32],
        "output_proj.weight": attn["output_proj"],
    }


def moe_weights(state_dict: dict[str, Tensor]) -> dict[str, Tensor]:
    """Three SwiGLU experts, the feed-forwards of the three layers, and a router."""
    weights = {"router.weight": state_dict["lm_head.weight"][:NUM_EXPERTS]}
    for e in range(NUM_EXPERTS):
        for name in ("w1", "w2", "w3"):
            weights[f"experts.{e}.{name}.weight"] = state_dict[f"layers.{e}.ffn.{name}.weight"]
    return weights


def _attention(
    state_dict: dict[str, Tensor], layer: int, prefix: str, bias_source: Tensor
) -> dict[str, Tensor]:
    weights = {}
    for i, name in enumerate(("q_proj", "k_proj", "v_proj", "output_proj")):
        weights[f"{prefix}.{name}.weight"] = state_dict[f"layers.{layer}.attn.{name}.weight"]
        weights[f"{prefix}.{name}.bias"] = bias_source[i]
    return weights


def encoder_layer_weights(state_dict: dict[str, Tensor], layer: int = 0) -> dict[str, Tensor]:
    """A post-LN encoder layer (d_model 64, 4 heads, d_ff 128) with every bias non-zero."""
    biases = state_dict["lm_head.weight"][8 * layer : 8 * layer + 8]  # rows of 64 values
    ffn = {name: state_dict[f"layers.{layer}.ffn.{name}.weight"] for name in ("w1", "w2", "w3")}
    return _attention(state_dict, layer, "self_attn", biases[:4]) | {
        "ffn.w1.weight": ffn["w1"],
        "ffn.w1.bias": ffn["w3"][:, 0],
        "ffn.w2.weight": ffn["w2"],
        "ffn.w2.bias": biases[4],
        "ln1.weight": state_dict[f"layers.{layer}.ln1.weight"],
        "ln1.bias": biases[5],
        "ln2.weight": state_dict[f"layers.{layer}.ln2.weight"],
        "ln2.bias": biases[6],
    }


def decoder_layer_weights(state_dict: dict[str, Tensor]) -> dict[str, Tensor]:
    """A post-LN decoder layer: the encoder layer of layer 1 plus cross-attention from layer 2."""
    extra = state_dict["lm_head.weight"][32:37]
    return (
        encoder_layer_weights(state_dict, 1)
        | _attention(state_dict, 2, "cross_attn", extra[:4])
        | {
            "ln3.weight": state_dict["ln_final.weight"],
            "ln3.bias": extra[4],
        }
    )
