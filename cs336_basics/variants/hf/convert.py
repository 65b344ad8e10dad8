"""Convert ``TransformerLM`` state dicts to and from Hugging Face ``transformers`` checkpoints.

Supported families (``model_type`` of the HF config), with the variant each one exercises:

=============  ============================================================================
``llama``      RoPE, grouped-query attention, SwiGLU, RMSNorm (``LlamaForCausalLM``)
``qwen2``      the same plus query/key/value biases (``Qwen2ForCausalLM``)
``qwen3``      the same plus QK-norm and a free ``head_dim`` (``Qwen3ForCausalLM``)
``qwen3_moe``  QK-norm + mixture of SwiGLU experts, dense ``mlp_only_layers`` (``Qwen3MoeForCausalLM``)
``mixtral``    mixture of experts with renormalised top-k (``MixtralForCausalLM``)
``deepseek_v2`` multi-head latent attention; MoE with shared experts, dense first layers,
               ``routed_scaling_factor``, greedy or group-limited top-k (``DeepseekV2ForCausalLM``)
``deepseek_v3`` the same MLA weights and MoE layout with sigmoid routing: ``e_score_correction_bias``
               for selection, "noaux_tc" groups, ``norm_topk_prob`` (``DeepseekV3ForCausalLM``
               with ``rope_interleave``)
``deepseek_v32`` DeepSeek-V3 with sparse attention: a lightning indexer per layer
               (``index_n_heads``, ``index_head_dim``, ``index_topk``; ``DeepseekV32ForCausalLM``)
``gpt2``       learned positions, LayerNorm, GELU (exact or tanh), biases, tied head (``GPT2LMHeadModel``)
=============  ============================================================================

The dicts are those of ``model.state_dict()`` of the installed ``transformers`` (5.x holds
MoE experts as stacked ``gate_up_proj`` / ``down_proj`` tensors in memory; checkpoint files keep
one tensor per expert, which ``expert_layout`` converts). Nothing here imports
``transformers``, and nothing here decides architecture: ``named_builders.config_from_hf`` (the
families' builders) reads an HF config into a ``VariantConfig``; this module maps the tensors::

    config = config_from_hf(hf_model.config)  # from cs336_basics.variants.hf.named_builders
    model = build_model(config)
    model.load_state_dict(from_hf(hf_model.state_dict(), config))
    hf_model.load_state_dict(to_hf(model.state_dict(), config, hf_model.config.model_type))

Two layout facts need more than renaming:

- RoPE pairs. This package rotates interleaved pairs ``(x[2i], x[2i+1])``; Llama, Qwen and
  Mixtral rotate ``(x[i], x[i + d/2])``. Reordering each head's query and key rows (and the
  QK-norm gains) from ``[0, 2, 4, ..., 1, 3, 5, ...]`` maps one convention onto the other.
  DeepSeek-V2 rotates interleaved pairs, like this package, and so does V3 with
  ``rope_interleave`` (it reorders query and key dims alike, which leaves their dot products).
  V3.2's indexer rotates halves of the first ``qk_rope_head_dim`` dims of its query heads and key:
  those rows (and its key norm's gain and bias) are reordered the same way.
- Fused matrices: GPT-2's ``c_attn`` stacks Q, K, V (as a transposed ``Conv1D``), DeepSeek's
  ``kv_a_proj_with_mqa`` stacks the latent and RoPE-key projections and ``kv_b_proj``
  interleaves per-head key and value up-projections, and MoE experts stack gate and up.

DeepSeek-V3's router buffer ``mlp.gate.e_score_correction_bias`` is our MoE layer's
``ffn.score_correction_bias``.
"""

from __future__ import annotations

import torch
from einops import rearrange
from torch import Tensor

from cs336_basics.variants.config import AttentionConfig, MoEConfig, VariantConfig

FAMILIES = (
    "llama",
    "qwen2",
    "qwen3",
    "qwen3_moe",
    "mixtral",
    "deepseek_v2",
    "deepseek_v3",
    "deepseek_v32",
    "gpt2",
)
MLA_FAMILIES = ("deepseek_v2", "deepseek_v3", "deepseek_v32")


def interleaved_to_half(weight: Tensor, head_dim: int) -> Tensor:
    """Reorder every head's rows (dim 0) from interleaved RoPE pairs to rotate-half order."""
    return rearrange(
        weight, "(heads half two) ... -> (heads two half) ...", two=2, half=head_dim // 2
    )


def half_to_interleaved(weight: Tensor, head_dim: int) -> Tensor:
    """Inverse of ``interleaved_to_half``."""
    return rearrange(
        weight, "(heads two half) ... -> (heads half two) ...", two=2, half=head_dim // 2
    )


def to_hf(state_dict: dict[str, Tensor], config: VariantConfig, family: str) -> dict[str, Tensor]:
    """Our ``TransformerLM`` state dict as the state dict of the HF ``family`` model."""
    _check_family(config, family)
    if family == "gpt2":
        return _gpt2_to_hf(state_dict, config)
    ours = state_dict
    hf = {
        "model.embed_tokens.weight": ours["token_embeddings.weight"],
        "model.norm.weight": ours["ln_final.weight"],
        "lm_head.weight": ours["lm_head.weight"],
    }
    for i in range(config.num_layers):
        layer = {
            k[len(f"layers.{i}.") :]: v for k, v in ours.items() if k.startswith(f"layers.{i}.")
        }
        hf.update(
            {
                f"model.layers.{i}.{k}": v
                for k, v in _layer_to_hf(layer, config, family, config.is_moe_layer(i)).items()
            }
        )
    return hf


def from_hf(
    hf_state_dict: dict[str, Tensor], config: VariantConfig, family: str
) -> dict[str, Tensor]:
    """The HF ``family`` model's state dict as our ``TransformerLM`` state dict."""
    _check_family(config, family)
    if family == "gpt2":
        return _gpt2_from_hf(hf_state_dict, config)
    hf = hf_state_dict
    ours = {
        "token_embeddings.weight": hf["model.embed_tokens.weight"],
        "ln_final.weight": hf["model.norm.weight"],
        "lm_head.weight": hf.get("lm_head.weight", hf["model.embed_tokens.weight"]),
    }
    for i in range(config.num_layers):
        prefix = f"model.layers.{i}."
        layer = {k[len(prefix) :]: v for k, v in hf.items() if k.startswith(prefix)}
        ours.update(
            {
                f"layers.{i}.{k}": v
                for k, v in _layer_from_hf(layer, config, family, config.is_moe_layer(i)).items()
            }
        )
    return ours


def _layer_names(config: VariantConfig, family: str, moe: bool) -> tuple[dict, dict]:
    """Our name -> HF's for one layer's tensors that are only renamed, and for the query/key
    tensors whose rows also change order (HF rotates each head's halves, we interleave pairs)."""
    renamed = {
        "ln1.weight": "input_layernorm.weight",
        "ln2.weight": "post_attention_layernorm.weight",
        "attn.output_proj.weight": "self_attn.o_proj.weight",
    }
    rotated = {}
    if family not in MLA_FAMILIES:  # latent attention has its own layout (_mla_to_hf)
        kinds = ["weight"] + (["bias"] if config.mha.qkv_bias else [])
        for kind in kinds:
            renamed[f"attn.v_proj.{kind}"] = f"self_attn.v_proj.{kind}"
            for name in ("q_proj", "k_proj"):
                rotated[f"attn.{name}.{kind}"] = f"self_attn.{name}.{kind}"
        if config.mha.qk_norm:
            rotated |= {f"attn.{n}.weight": f"self_attn.{n}.weight" for n in ("q_norm", "k_norm")}
    if not moe:
        renamed |= {f"ffn.{ours}.weight": f"mlp.{hf}.weight" for ours, hf in _SWIGLU.items()}
    return renamed, rotated


def _layer_to_hf(
    ours: dict[str, Tensor], config: VariantConfig, family: str, moe: bool
) -> dict[str, Tensor]:
    renamed, rotated = _layer_names(config, family, moe)
    hf = {theirs: ours[name] for name, theirs in renamed.items()}
    hf |= {
        theirs: interleaved_to_half(ours[name], config.d_head) for name, theirs in rotated.items()
    }
    if family in MLA_FAMILIES:
        hf.update(_mla_to_hf(ours, config))
    if moe:
        hf.update(_moe_to_hf(ours, config))
    return hf


def _layer_from_hf(
    hf: dict[str, Tensor], config: VariantConfig, family: str, moe: bool
) -> dict[str, Tensor]:
    renamed, rotated = _layer_names(config, family, moe)
    ours = {name: hf[theirs] for name, theirs in renamed.items()}
    ours |= {
        name: half_to_interleaved(hf[theirs], config.d_head) for name, theirs in rotated.items()
    }
    if family in MLA_FAMILIES:
        ours.update(_mla_from_hf(hf, config))
    if moe:
        ours.update(_moe_from_hf(hf, config))
    return ours


def _moe_to_hf(ours: dict[str, Tensor], config: VariantConfig) -> dict[str, Tensor]:
    experts = range(config.moe.num_experts)
    hf = {
        "mlp.gate.weight": ours["ffn.router.weight"],
        "mlp.experts.gate_up_proj": torch.stack(
            [
                torch.cat((ours[f"ffn.experts.{e}.w1.weight"], ours[f"ffn.experts.{e}.w3.weight"]))
                for e in experts
            ]
        ),
        "mlp.experts.down_proj": torch.stack([ours[f"ffn.experts.{e}.w2.weight"] for e in experts]),
    }
    if config.moe.num_shared_experts:
        for ours_name, hf_name in _SWIGLU.items():
            hf[f"mlp.shared_experts.{hf_name}.weight"] = ours[
                f"ffn.shared_experts.{ours_name}.weight"
            ]
    if config.moe.router_scoring == "sigmoid":
        hf["mlp.gate.e_score_correction_bias"] = ours["ffn.score_correction_bias"]
    return hf


def _moe_from_hf(hf: dict[str, Tensor], config: VariantConfig) -> dict[str, Tensor]:
    ours = {"ffn.router.weight": hf["mlp.gate.weight"]}
    for e in range(config.moe.num_experts):
        gate, up = hf["mlp.experts.gate_up_proj"][e].chunk(2, dim=0)
        ours[f"ffn.experts.{e}.w1.weight"] = gate
        ours[f"ffn.experts.{e}.w3.weight"] = up
        ours[f"ffn.experts.{e}.w2.weight"] = hf["mlp.experts.down_proj"][e]
    if config.moe.num_shared_experts:
        for ours_name, hf_name in _SWIGLU.items():
            ours[f"ffn.shared_experts.{ours_name}.weight"] = hf[
                f"mlp.shared_experts.{hf_name}.weight"
            ]
    if config.moe.router_scoring == "sigmoid":
        ours["ffn.score_correction_bias"] = hf["mlp.gate.e_score_correction_bias"]
    return ours


_SWIGLU = {"w1": "gate_proj", "w3": "up_proj", "w2": "down_proj"}  # ours -> HF


def _mla_to_hf(ours: dict[str, Tensor], config: VariantConfig) -> dict[str, Tensor]:
    if config.mla.q_lora_rank is None:
        hf = {"self_attn.q_proj.weight": ours["attn.q_proj.weight"]}
    else:
        hf = {
            "self_attn.q_a_proj.weight": ours["attn.q_down_proj.weight"],
            "self_attn.q_a_layernorm.weight": ours["attn.q_norm.weight"],
            "self_attn.q_b_proj.weight": ours["attn.q_up_proj.weight"],
        }
    hf["self_attn.kv_a_proj_with_mqa.weight"] = torch.cat(
        (ours["attn.kv_down_proj.weight"], ours["attn.k_rope_proj.weight"])
    )
    hf["self_attn.kv_a_layernorm.weight"] = ours["attn.kv_norm.weight"]
    if config.sparse is not None:
        hf |= {
            f"self_attn.indexer.{name}": _indexer_rows(
                ours[f"attn.indexer.{name}"], config, rotated
            )
            for name, rotated in _INDEXER_ROTATED.items()
        }
    k_up, v_up = (
        rearrange(
            ours[f"attn.{name}.weight"], "(heads d) rank -> heads d rank", heads=config.num_heads
        )
        for name in ("k_up_proj", "v_up_proj")
    )
    hf["self_attn.kv_b_proj.weight"] = rearrange(
        torch.cat((k_up, v_up), dim=1), "heads d rank -> (heads d) rank"
    )
    return hf


def _mla_from_hf(hf: dict[str, Tensor], config: VariantConfig) -> dict[str, Tensor]:
    if config.mla.q_lora_rank is None:
        ours = {"attn.q_proj.weight": hf["self_attn.q_proj.weight"]}
    else:
        ours = {
            "attn.q_down_proj.weight": hf["self_attn.q_a_proj.weight"],
            "attn.q_norm.weight": hf["self_attn.q_a_layernorm.weight"],
            "attn.q_up_proj.weight": hf["self_attn.q_b_proj.weight"],
        }
    latent, k_rope = hf["self_attn.kv_a_proj_with_mqa.weight"].split(
        [config.mla.kv_lora_rank, config.mla.qk_rope_head_dim]
    )
    ours["attn.kv_down_proj.weight"] = latent
    ours["attn.k_rope_proj.weight"] = k_rope
    ours["attn.kv_norm.weight"] = hf["self_attn.kv_a_layernorm.weight"]
    if config.sparse is not None:
        ours |= {
            f"attn.indexer.{name}": _indexer_rows(
                hf[f"self_attn.indexer.{name}"], config, rotated, from_hf=True
            )
            for name, rotated in _INDEXER_ROTATED.items()
        }
    kv_up = rearrange(
        hf["self_attn.kv_b_proj.weight"], "(heads d) rank -> heads d rank", heads=config.num_heads
    )
    k_up, v_up = kv_up.split([config.mla_nope_dim, config.mla_v_dim], dim=1)
    ours["attn.k_up_proj.weight"] = rearrange(k_up, "heads d rank -> (heads d) rank")
    ours["attn.v_up_proj.weight"] = rearrange(v_up, "heads d rank -> (heads d) rank")
    return ours


# V3.2's indexer tensors -> whether their rows hold rotated dims (per head: the first
# qk_rope_head_dim of every index_head_dim), which change order between HF and us.
_INDEXER_ROTATED = {
    "wq_b.weight": True,
    "wk.weight": True,
    "k_norm.weight": True,
    "k_norm.bias": True,
    "weights_proj.weight": False,
}


def _indexer_rows(
    weight: Tensor, config: VariantConfig, rotated: bool, from_hf: bool = False
) -> Tensor:
    """An indexer tensor with its rotated rows reordered: HF's rotate-half order to our
    interleaved pairs (``from_hf``) or back."""
    if not rotated:
        return weight
    width, rope = config.sparse.index_head_dim, config.mla.qk_rope_head_dim
    heads = rearrange(weight, "(heads d) ... -> heads d ...", d=width)
    turned, rest = heads.split([rope, width - rope], dim=1)
    reorder = half_to_interleaved if from_hf else interleaved_to_half
    turned = reorder(rearrange(turned, "heads d ... -> (heads d) ..."), rope)
    turned = rearrange(turned, "(heads d) ... -> heads d ...", d=rope)
    return rearrange(torch.cat((turned, rest), dim=1), "heads d ... -> (heads d) ...")


_GPT2_RENAMES = {  # ours -> HF, inside each block; Conv1D weights are stored transposed
    "ln1": "ln_1",
    "ln2": "ln_2",
    "attn.output_proj": "attn.c_proj",
    "ffn.w1": "mlp.c_fc",
    "ffn.w2": "mlp.c_proj",
}


def _gpt2_to_hf(ours: dict[str, Tensor], config: VariantConfig) -> dict[str, Tensor]:
    hf = {
        "transformer.wte.weight": ours["token_embeddings.weight"],
        "transformer.wpe.weight": ours["position_embeddings.weight"],
        "transformer.ln_f.weight": ours["ln_final.weight"],
        "transformer.ln_f.bias": ours["ln_final.bias"],
        "lm_head.weight": ours["lm_head.weight"],
    }
    for i in range(config.num_layers):
        mine, theirs = f"layers.{i}.", f"transformer.h.{i}."
        for name, hf_name in _GPT2_RENAMES.items():
            transpose = not name.startswith("ln")
            weight = ours[f"{mine}{name}.weight"]
            hf[f"{theirs}{hf_name}.weight"] = weight.T if transpose else weight
            hf[f"{theirs}{hf_name}.bias"] = ours[f"{mine}{name}.bias"]
        qkv = ("q_proj", "k_proj", "v_proj")
        hf[f"{theirs}attn.c_attn.weight"] = torch.cat(
            [ours[f"{mine}attn.{p}.weight"] for p in qkv]
        ).T
        hf[f"{theirs}attn.c_attn.bias"] = torch.cat([ours[f"{mine}attn.{p}.bias"] for p in qkv])
    return hf


def _gpt2_from_hf(hf: dict[str, Tensor], config: VariantConfig) -> dict[str, Tensor]:
    ours = {
        "token_embeddings.weight": hf["transformer.wte.weight"],
        "position_embeddings.weight": hf["transformer.wpe.weight"][: config.context_length],
        "ln_final.weight": hf["transformer.ln_f.weight"],
        "ln_final.bias": hf["transformer.ln_f.bias"],
        "lm_head.weight": hf.get("lm_head.weight", hf["transformer.wte.weight"]),
    }
    for i in range(config.num_layers):
        mine, theirs = f"layers.{i}.", f"transformer.h.{i}."
        for name, hf_name in _GPT2_RENAMES.items():
            transpose = not name.startswith("ln")
            weight = hf[f"{theirs}{hf_name}.weight"]
            ours[f"{mine}{name}.weight"] = weight.T if transpose else weight
            ours[f"{mine}{name}.bias"] = hf[f"{theirs}{hf_name}.bias"]
        weights = hf[f"{theirs}attn.c_attn.weight"].T.chunk(3)
        biases = hf[f"{theirs}attn.c_attn.bias"].chunk(3)
        for projection, weight, bias in zip(
            ("q_proj", "k_proj", "v_proj"), weights, biases, strict=True
        ):
            ours[f"{mine}attn.{projection}.weight"] = weight
            ours[f"{mine}attn.{projection}.bias"] = bias
    return ours


def family_of(config: VariantConfig) -> str:
    """The first HF family (in ``FAMILIES`` order) whose layout ``config`` describes."""
    for family in FAMILIES:
        if _describes(config, family):
            return family
    raise ValueError(f"no HF family ({', '.join(FAMILIES)}) describes this model: {config}")


def _check_family(config: VariantConfig, family: str) -> None:
    if family not in FAMILIES:
        raise ValueError(f"unsupported family {family!r}; expected one of {FAMILIES}")
    if not _describes(config, family):
        raise ValueError(f"this VariantConfig does not describe a {family!r} model: {config}")


def _describes(config: VariantConfig, family: str) -> bool:
    # A section that is off reads as its defaults: plain attention, softmax routing.
    mha, moe = config.mha or AttentionConfig(), config.moe or MoEConfig()
    mla_q_lora = config.mla is not None and config.mla.q_lora_rank is not None
    sigmoid_moe = (
        config.ffn == "swiglu" or config.moe is not None and moe.router_scoring == "sigmoid"
    )
    expected = {
        "gpt2": config.position_encoding == "learned"
        and config.norm == "layernorm"
        and config.ffn in ("gelu", "gelu_tanh")
        and config.bias,
        "deepseek_v2": config.mla is not None
        and config.sparse is None
        and (config.ffn == "swiglu" or config.moe is not None and not moe.normalize_topk)
        and moe.router_scoring == "softmax",
        "deepseek_v3": config.mla is not None and config.sparse is None and sigmoid_moe,
        "deepseek_v32": config.sparse is not None and mla_q_lora and sigmoid_moe,
        "llama": config.mha is not None and config.ffn == "swiglu" and not mha.qk_norm,
        "qwen2": config.mha is not None and config.ffn == "swiglu" and not mha.qk_norm,
        "qwen3": config.mha is not None and config.ffn == "swiglu" and mha.qk_norm,
        "qwen3_moe": config.moe is not None and mha.qk_norm,
        "mixtral": config.moe is not None and not mha.qk_norm and moe.normalize_topk,
    }[family]
    # HF's RMSNorm + RoPE families have no biases and no per-expert capacity.
    llama_like = (
        config.position_encoding == "rope"
        and config.norm == "rmsnorm"
        and not config.bias
        and mha.qkv_bias == (family == "qwen2")
        and moe.capacity_factor is None
    )
    if family not in MLA_FAMILIES and config.mha is None:
        return False
    deepseek_routing = (
        moe.num_shared_experts
        or moe.routed_scaling
        or moe.expert_groups
        or moe.router_scoring != "softmax"
    )
    if family not in MLA_FAMILIES and (
        deepseek_routing or moe.dense_layers and family != "qwen3_moe"
    ):
        return False
    return expected and config.norm_placement == "pre" and (family == "gpt2" or llama_like)
