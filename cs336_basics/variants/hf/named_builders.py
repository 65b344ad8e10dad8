"""Named builders, one per published model family, and what each HF family's config means.

As torchtune's ``llama3_2_1b()`` assembles a ``TransformerDecoder``, each builder here
(``llama3_2_1b``, ``qwen2_5_0_5b``, ``qwen3_0_6b``, ``qwen3_moe``, ``mixtral``,
``deepseek_v2_lite``, ``deepseek_v3``, ``deepseek_v3_2``, ``gpt2_small``, ``transformer_base``,
``cs336_tinystories``) reads the few numbers it needs from an HF config and builds the model
from core and variant parts. Called with nothing it builds the published model (its
``config.json``, in ``published.py``); given an HF config (a ``transformers`` config object,
or a dict of its fields: missing ones keep the published value) or overriding fields by their HF
names, it builds that one, e.g. a tiny model for a test::

    tiny = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
    model = qwen3_0_6b(**tiny)  # Qwen3-0.6B's structure: head_dim 128, QK-norm, tied head
    config = qwen3_0_6b.config(**tiny)

``builder.config(...)`` is the ``VariantConfig`` (what checkpoints save and
``build_variant_model`` builds again). The architecture of each HF family is decided here, in
``config_from_hf`` and its readers (e.g. Qwen3 has QK-norm, DeepSeek-V3 routes by sigmoid);
``convert`` only maps tensor names. Settings a family's parts cannot reproduce are refused by
name, never ignored.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import torch
from torch import nn

from cs336_basics.variants.builders import build_variant_model
from cs336_basics.variants.config import (
    AttentionConfig,
    LatentAttentionConfig,
    MoEConfig,
    SparseAttentionConfig,
    VariantConfig,
)
from cs336_basics.variants.encoder_decoder import Seq2SeqConfig, Seq2SeqTransformer
from cs336_basics.variants.hf import published
from cs336_basics.variants.hf.convert import FAMILIES, MLA_FAMILIES

_SIGMOID_ROUTED = ("deepseek_v3", "deepseek_v32")
Device = torch.device | str | None


@dataclass(frozen=True)
class NamedBuilder:
    """A published family's builder: ``builder(hf_config=None, **overrides)`` is the model,
    ``builder.config(hf_config=None, **overrides)`` its config.

    ``read`` turns the HF fields (``published`` updated with ``hf_config`` and the overrides)
    into the config, and ``build`` the config into the model.
    """

    name: str
    published: dict[str, Any]
    read: Callable[[Any, int | None], Any]
    build: Callable[..., nn.Module] = build_variant_model

    def config(
        self, hf_config: Any = None, context_length: int | None = None, **overrides: Any
    ) -> Any:
        """The config of the model ``hf_config`` and ``overrides`` (HF field names) describe;
        ``context_length`` defaults to the family's ``max_position_embeddings``."""
        fields = hf_fields(self.published, hf_config, overrides)
        expected = self.published["model_type"]
        if getattr(fields, "model_type", expected) != expected:
            raise ValueError(
                f"{self.name} reads a {expected!r} config; got model_type {fields.model_type!r}"
            )
        return self.read(fields, context_length)

    def __call__(
        self,
        hf_config: Any = None,
        context_length: int | None = None,
        device: Device = None,
        dtype: torch.dtype | None = None,
        **overrides: Any,
    ) -> nn.Module:
        """The freshly initialised model of ``config(hf_config, context_length, **overrides)``."""
        config = self.config(hf_config, context_length, **overrides)
        return self.build(config, device=device, dtype=dtype)


def hf_fields(published: dict[str, Any], hf_config: Any, overrides: dict[str, Any]) -> Any:
    """The HF config to read, with attribute access: a config object as given (a copy with the
    ``overrides`` set), or a dict's fields over the ``published`` ones."""
    if hf_config is None or isinstance(hf_config, dict):
        return SimpleNamespace(**(published | (hf_config or {}) | overrides))
    if overrides:
        hf_config = copy.copy(hf_config)
        for name, value in overrides.items():
            setattr(hf_config, name, value)
    return hf_config


def seq2seq_config(fields: Any, context_length: int | None) -> Seq2SeqConfig:
    """The encoder-decoder of a MarianConfig-style config: the same width, heads and MLP in the
    encoder and the decoder (other settings are refused by name)."""
    for part in ("attention_heads", "ffn_dim"):
        encoder, decoder = (getattr(fields, f"{side}_{part}") for side in ("encoder", "decoder"))
        _require(
            encoder == decoder,
            f"decoder_{part}={decoder} is not supported: encoder and decoder share their "
            f"shape; supported: decoder_{part} = encoder_{part} ({encoder})",
        )
    return Seq2SeqConfig(
        vocab_size=fields.vocab_size,
        context_length=context_length or fields.max_position_embeddings,
        d_model=fields.d_model,
        num_heads=fields.encoder_attention_heads,
        d_ff=fields.encoder_ffn_dim,
        num_encoder_layers=fields.encoder_layers,
        num_decoder_layers=fields.decoder_layers,
        norm_eps=fields.layer_norm_eps,
    )


def ablation_config(fields: Any, context_length: int | None) -> VariantConfig:
    """The assignment's model with its ablation switches, from ``VariantConfig`` fields."""
    data = {name: value for name, value in vars(fields).items() if name != "model_type"}
    if context_length is not None:
        data["context_length"] = context_length
    return VariantConfig.from_dict(data)


def config_from_hf(hf_config: Any, context_length: int | None = None) -> VariantConfig:
    """The ``VariantConfig`` of an HF config object of a supported family.

    Raises ``ValueError`` naming the field for settings this package cannot represent (an
    output-projection bias in Llama-style attention, a non-SiLU MLP, sliding windows, RoPE
    scaling other than ``linear``/``dynamic``/``llama3``/``yarn``, routing fields HF's
    DeepSeek does not read, ...). ``context_length`` defaults to ``max_position_embeddings``
    (``dynamic`` RoPE scaling: ``factor`` times that, the length it is meant to reach).
    """
    family = hf_config.model_type
    if family not in FAMILIES:
        raise ValueError(f"unsupported model_type {family!r}; expected one of {FAMILIES}")
    if family == "gpt2":
        return _gpt2_config(hf_config, context_length)
    shape = _llama_like_shape(hf_config, context_length)
    if family in MLA_FAMILIES:
        return _deepseek_config(hf_config, shape)
    shape |= _attention_heads(hf_config, family)
    if family == "qwen3_moe":
        shape |= _qwen3_moe_experts(hf_config)
    if family == "mixtral":
        noise = hf_config.router_jitter_noise
        _require(
            not noise,
            f"router_jitter_noise={noise} (noise on training-time router logits) is not "
            "supported; supported: router_jitter_noise=0",
        )
        shape["ffn"] = MoEConfig(
            num_experts=hf_config.num_local_experts,
            top_k=hf_config.num_experts_per_tok,
            normalize_topk=True,
            aux_loss_coef=hf_config.router_aux_loss_coef,
        )
    return VariantConfig(**shape)


_GPT2_ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh"}
_GPT2_FIXED = {  # field: the only value this package implements
    "scale_attn_weights": True,
    "scale_attn_by_inverse_layer_idx": False,
    "add_cross_attention": False,
}


def _gpt2_config(hf_config: Any, context_length: int | None) -> VariantConfig:
    activation = hf_config.activation_function
    _require(
        activation in _GPT2_ACTIVATIONS,
        f"GPT-2 activation_function={activation!r} is not supported; "
        f"supported: {tuple(_GPT2_ACTIVATIONS)}",
    )
    for field, implemented in _GPT2_FIXED.items():
        value = getattr(hf_config, field, implemented)
        _require(
            value == implemented,
            f"{field}={value!r} is not supported; supported: {field}={implemented!r}",
        )
    return VariantConfig(
        vocab_size=hf_config.vocab_size,
        context_length=context_length or hf_config.n_positions,
        d_model=hf_config.n_embd,
        num_layers=hf_config.n_layer,
        num_heads=hf_config.n_head,
        d_ff=hf_config.n_inner or 4 * hf_config.n_embd,
        norm_eps=hf_config.layer_norm_epsilon,
        norm="layernorm",
        position_encoding="learned",
        ffn=_GPT2_ACTIVATIONS[activation],
        bias=True,
        tie_embeddings=bool(hf_config.tie_word_embeddings),
    )


def _llama_like_shape(hf_config: Any, context_length: int | None) -> dict[str, Any]:
    """The fields every RMSNorm + RoPE + SiLU family shares, after checking what we cannot
    represent."""
    _require(
        hf_config.hidden_act == "silu",
        f"hidden_act={hf_config.hidden_act!r} is not supported; supported: hidden_act='silu'",
    )
    for field in ("attention_bias", "mlp_bias"):
        _require(
            not getattr(hf_config, field, False),
            f"{field}=True is not supported; supported: {field}=False (query/key/value "
            "biases alone: model_type qwen2)",
        )
    window = getattr(hf_config, "sliding_window", None)
    _require(
        window is None,
        f"sliding_window={window} (sliding-window attention) is not supported; "
        "supported: sliding_window=None",
    )
    rope = _rope(hf_config)
    scaling = rope.get("rope_scaling") or {}
    if context_length is None and scaling.get("rope_type") == "dynamic":
        # dynamic NTK exists to run past max_position_embeddings: allow `factor` times as far
        context_length = int(scaling["factor"] * hf_config.max_position_embeddings)
    return dict(
        vocab_size=hf_config.vocab_size,
        context_length=context_length or hf_config.max_position_embeddings,
        d_model=hf_config.hidden_size,
        num_layers=hf_config.num_hidden_layers,
        num_heads=hf_config.num_attention_heads,
        d_ff=hf_config.intermediate_size,
        **rope,
        norm_eps=hf_config.rms_norm_eps,
        tie_embeddings=bool(hf_config.tie_word_embeddings),
    )


def _deepseek_config(hf_config: Any, shape: dict[str, Any]) -> VariantConfig:
    family = hf_config.model_type
    _require(
        family != "deepseek_v3" or hf_config.rope_interleave,
        "DeepSeek-V3 with rope_interleave=False (rotate-half RoPE) is not supported; "
        "supported: rope_interleave=True",
    )
    kv_heads = hf_config.num_key_value_heads
    _require(
        kv_heads == hf_config.num_attention_heads,
        f"num_key_value_heads={kv_heads} is not supported: latent attention has one key/value "
        f"head per query head; supported: num_key_value_heads = num_attention_heads "
        f"({hf_config.num_attention_heads})",
    )
    dense = _deepseek_dense_layers(hf_config)
    if dense < hf_config.num_hidden_layers:
        shape |= _deepseek_experts(hf_config, dense)
    attention = LatentAttentionConfig(
        q_lora_rank=hf_config.q_lora_rank,
        kv_lora_rank=hf_config.kv_lora_rank,
        qk_rope_head_dim=hf_config.qk_rope_head_dim,
        qk_nope_head_dim=hf_config.qk_nope_head_dim,
        v_head_dim=hf_config.v_head_dim,
        sparse=_sparse_attention(hf_config) if family == "deepseek_v32" else None,
    )
    return VariantConfig(**shape, attention=attention)


def _deepseek_dense_layers(hf_config: Any) -> int:
    """How many first layers keep a dense MLP (V3.2 may list them as ``mlp_layer_types``)."""
    layers = hf_config.num_hidden_layers
    types = getattr(hf_config, "mlp_layer_types", None)
    if types is None:
        return min(hf_config.first_k_dense_replace, layers)
    dense = types.count("dense")
    _require(
        types == ["dense"] * dense + ["sparse"] * (layers - dense),
        f"mlp_layer_types={types} is not supported; supported: dense layers first, then sparse",
    )
    return dense


def _sparse_attention(hf_config: Any) -> SparseAttentionConfig:
    _require(
        hf_config.q_lora_rank is not None,
        "q_lora_rank=None is not supported by deepseek_v32: its indexer reads the query latent",
    )
    return SparseAttentionConfig(
        index_topk=hf_config.index_topk,
        index_heads=hf_config.index_n_heads,
        index_head_dim=hf_config.index_head_dim,
    )


# Routing fields that HF's DeepSeek implementations do not read: each implements one value, so
# only that value is accepted (published configs carry them; absent means that value).
_DEEPSEEK_FIXED_ROUTING = {
    "deepseek_v2": {"scoring_func": "softmax", "norm_topk_prob": False, "moe_layer_freq": 1},
    "deepseek_v3": {"scoring_func": "sigmoid", "topk_method": "noaux_tc", "moe_layer_freq": 1},
    "deepseek_v32": {"scoring_func": "sigmoid", "topk_method": "noaux_tc", "moe_layer_freq": 1},
}
_DEEPSEEK_V2_TOPK = ("greedy", "group_limited_greedy")


def _deepseek_experts(hf_config: Any, dense: int) -> dict[str, Any]:
    """DeepSeek's MoE: shared experts, dense SwiGLUs in the first ``first_k_dense_replace``
    layers, routed weights times ``routed_scaling_factor``. V2: softmax router, greedy or
    group-limited top-k, never renormalised; V3: sigmoid scores with ``e_score_correction_bias``
    and group-limited "noaux_tc" selection, renormalised when ``norm_topk_prob``."""
    family = hf_config.model_type
    for field, implemented in _DEEPSEEK_FIXED_ROUTING[family].items():
        value = getattr(hf_config, field, implemented)
        _require(
            value == implemented,
            f"{field}={value!r} is not supported: HF's {family} implements only "
            f"{field}={implemented!r}; supported routing fields: {_DEEPSEEK_ROUTING_FIELDS}",
        )
    if family in _SIGMOID_ROUTED:
        groups = [hf_config.n_group, hf_config.topk_group]
        routing = dict(
            router_scoring="sigmoid",
            normalize_topk=bool(hf_config.norm_topk_prob),
            expert_groups=None if groups[0] == groups[1] else groups,  # all groups: no limit
        )
    else:
        method = hf_config.topk_method
        _require(
            method in _DEEPSEEK_V2_TOPK,
            f"topk_method={method!r} is not supported by deepseek_v2; supported: {_DEEPSEEK_V2_TOPK}",
        )
        grouped = method == "group_limited_greedy"
        routing = dict(
            normalize_topk=False,
            expert_groups=[hf_config.n_group, hf_config.topk_group] if grouped else None,
        )
    experts = MoEConfig(
        num_experts=hf_config.n_routed_experts,
        top_k=hf_config.num_experts_per_tok,
        num_shared_experts=hf_config.n_shared_experts or None,
        routed_scaling=float(hf_config.routed_scaling_factor),
        dense_layers=list(range(dense)) or None,
        dense_d_ff=hf_config.intermediate_size if dense else None,
        **routing,
    )
    return dict(ffn=experts, d_ff=hf_config.moe_intermediate_size)


_DEEPSEEK_ROUTING_FIELDS = (
    "n_routed_experts",
    "num_experts_per_tok",
    "moe_intermediate_size",
    "n_shared_experts",
    "first_k_dense_replace",
    "routed_scaling_factor",
    "topk_method (v2: greedy, group_limited_greedy; v3: noaux_tc)",
    "n_group",
    "topk_group",
    "norm_topk_prob (v3)",
    "scoring_func (v2: softmax; v3: sigmoid)",
    "moe_layer_freq (1)",
)


def _attention_heads(hf_config: Any, family: str) -> dict[str, Any]:
    default = hf_config.hidden_size // hf_config.num_attention_heads
    head_dim = getattr(hf_config, "head_dim", None) or default
    attention = AttentionConfig(
        num_kv_heads=hf_config.num_key_value_heads,
        qk_norm=family in ("qwen3", "qwen3_moe"),
        qkv_bias=family == "qwen2",
        head_dim=None if head_dim == default else head_dim,
    )
    return dict(attention=attention)


def _qwen3_moe_experts(hf_config: Any) -> dict[str, Any]:
    step = hf_config.decoder_sparse_step
    dense = [
        i
        for i in range(hf_config.num_hidden_layers)
        if i in hf_config.mlp_only_layers or (i + 1) % step != 0
    ]
    experts = MoEConfig(
        dense_layers=dense or None,
        dense_d_ff=hf_config.intermediate_size if dense else None,
        num_experts=hf_config.num_experts,
        top_k=hf_config.num_experts_per_tok,
        normalize_topk=bool(hf_config.norm_topk_prob),
        aux_loss_coef=hf_config.router_aux_loss_coef,
    )
    return dict(ffn=experts, d_ff=hf_config.moe_intermediate_size)


def _rope(hf_config: Any) -> dict[str, Any]:
    """``rope_theta`` and ``rope_scaling`` (checked by ``VariantConfig``) of an HF config.
    HF's ``dynamic`` scales from ``max_position_embeddings``: it becomes the scaling's
    ``original_max_position_embeddings``."""
    given = getattr(hf_config, "rope_parameters", None) or {}
    parameters = {name: value for name, value in given.items() if value is not None}
    theta = float(parameters.pop("rope_theta", getattr(hf_config, "rope_theta", 10000.0)))
    kind = parameters.get("rope_type", "default")
    if kind == "default":
        extra = sorted(set(parameters) - {"rope_type"})
        _require(
            not extra,
            f"rope_parameters {extra} are not supported with rope_type 'default' "
            "(e.g. partial_rotary_factor: RoPE on part of each head); supported: rope_theta",
        )
        return dict(rope_theta=theta)
    if kind == "dynamic":
        context = hf_config.max_position_embeddings
        original = parameters.setdefault("original_max_position_embeddings", context)
        _require(
            original == context,
            f"rope_parameters original_max_position_embeddings={original} is not supported with "
            f"rope_type 'dynamic' (HF scales from max_position_embeddings); supported: "
            f"absent or {context}",
        )
    return dict(rope_theta=theta, rope_scaling=parameters)


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


llama3_2_1b = NamedBuilder("llama3_2_1b", published.LLAMA_3_2_1B, config_from_hf)
qwen2_5_0_5b = NamedBuilder("qwen2_5_0_5b", published.QWEN2_5_0_5B, config_from_hf)
qwen3_0_6b = NamedBuilder("qwen3_0_6b", published.QWEN3_0_6B, config_from_hf)
qwen3_moe = NamedBuilder("qwen3_moe", published.QWEN3_30B_A3B, config_from_hf)
mixtral = NamedBuilder("mixtral", published.MIXTRAL_8X7B, config_from_hf)
deepseek_v2_lite = NamedBuilder("deepseek_v2_lite", published.DEEPSEEK_V2_LITE, config_from_hf)
deepseek_v3 = NamedBuilder("deepseek_v3", published.DEEPSEEK_V3, config_from_hf)
deepseek_v3_2 = NamedBuilder("deepseek_v3_2", published.DEEPSEEK_V3_2, config_from_hf)
gpt2_small = NamedBuilder("gpt2_small", published.GPT2_SMALL, config_from_hf)
transformer_base = NamedBuilder(
    "transformer_base", published.TRANSFORMER_BASE, seq2seq_config, Seq2SeqTransformer
)
cs336_tinystories = NamedBuilder("cs336_tinystories", published.CS336_TINYSTORIES, ablation_config)

NAMED_BUILDERS = {
    builder.name: builder
    for builder in (
        llama3_2_1b,
        qwen2_5_0_5b,
        qwen3_0_6b,
        qwen3_moe,
        mixtral,
        deepseek_v2_lite,
        deepseek_v3,
        deepseek_v3_2,
        gpt2_small,
        transformer_base,
        cs336_tinystories,
    )
}
