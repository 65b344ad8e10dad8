"""The adapters of the architecture variants (beyond the assignment): the only place the
variant tests (``tests/variants/``) touch ``cs336_basics``.

They ship in the extension handout only, with the rest of ``tests/variants/``; the assignment's
adapters are in ``tests/adapters.py``. Like that file, this one imports only ``cs336_basics``
and third-party packages. Config dicts here are flat: every switch at the top level (``{"ffn":
"moe", "num_experts": 4, ...}``), as ``VariantConfig.from_dict`` reads them.
"""

from __future__ import annotations

import os
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from cs336_basics.accounting import forward_flops, kv_cache_bytes, parameter_counts
from cs336_basics.config import ModelConfig
from cs336_basics.generation import generate
from cs336_basics.rope import RotaryPositionalEmbedding
from cs336_basics.variants.accounting import kv_cache_elements_per_token
from cs336_basics.variants.attention import self_attention
from cs336_basics.variants.builders import build_variant_model, latent_attention
from cs336_basics.variants.config import VariantConfig
from cs336_basics.variants.decoding.generation import generate_batch, generate_cached
from cs336_basics.variants.decoding.kv_cache import kv_cache_num_bytes, kv_caches
from cs336_basics.variants.encoder_decoder import (
    DecoderLayer,
    EncoderLayer,
    Seq2SeqConfig,
    Seq2SeqTransformer,
)
from cs336_basics.variants.feedforward import FeedForward
from cs336_basics.variants.hf.checkpoint import load_pretrained, save_pretrained
from cs336_basics.variants.hf.convert import from_hf, to_hf
from cs336_basics.variants.hf.named_builders import NAMED_BUILDERS, config_from_hf
from cs336_basics.variants.hf.tokenizer import tokenizer_from_json
from cs336_basics.variants.layernorm import LayerNorm
from cs336_basics.variants.moe import mixture_of_experts
from cs336_basics.variants.positional import SinusoidalPositionalEncoding


def _config_dict(config: Any) -> dict[str, Any]:
    """A config as the adapters' dicts write it: a ``VariantConfig`` in the flat form (every
    switch at the top level), any other config (encoder-decoder) as its fields."""
    return config.flat_dict() if isinstance(config, VariantConfig) else config.to_dict()


def run_transformer_block_ablation(
    d_model: int,
    num_heads: int,
    d_ff: int,
    max_seq_len: int,
    theta: float,
    weights: dict[str, Tensor],
    in_features: Float[Tensor, " batch sequence_length d_model"],
    norm_placement: str = "pre",
    position_encoding: str = "rope",
    ffn: str = "swiglu",
) -> Float[Tensor, " batch sequence_length d_model"]:
    """A Transformer block with the handout's ablation switches: ``norm_placement`` "pre",
    "post" or "none"; ``position_encoding`` "rope" or "none" (NoPE); ``ffn`` "swiglu" or
    "silu" (``w2(silu(w1 x))``, no ``w3``)."""
    # BEGIN SOLUTION
    model = NAMED_BUILDERS["cs336_tinystories"](
        vocab_size=1,
        context_length=max_seq_len,
        d_model=d_model,
        num_layers=1,
        num_heads=num_heads,
        d_ff=d_ff,
        rope_theta=theta,
        norm_placement=norm_placement,
        position_encoding=position_encoding,
        ffn=ffn,
        device=in_features.device,
        dtype=in_features.dtype,
    )
    block = model.layers[0]
    block.load_state_dict(weights)
    return block(in_features)
    # END SOLUTION


def run_layernorm(
    d_model: int,
    eps: float,
    weight: Float[Tensor, " d_model"],
    bias: Float[Tensor, " d_model"],
    in_features: Float[Tensor, " ... d_model"],
) -> Float[Tensor, " ... d_model"]:
    """LayerNorm with gain ``weight`` and shift ``bias``."""
    # BEGIN SOLUTION
    norm = LayerNorm(d_model, eps, device=weight.device, dtype=weight.dtype)
    norm.load_state_dict({"weight": weight, "bias": bias})
    return norm(in_features)
    # END SOLUTION


def run_feedforward(
    d_model: int,
    d_ff: int,
    activation: str,
    weights: dict[str, Tensor],
    in_features: Float[Tensor, " ... d_model"],
) -> Float[Tensor, " ... d_model"]:
    """Ungated MLP ``w2(act(w1 x))``, ``activation`` in silu/gelu/relu; biases when ``weights``
    has ``w1.bias`` and ``w2.bias``."""
    # BEGIN SOLUTION
    bias = "w1.bias" in weights
    ffn = FeedForward(
        d_model, d_ff, activation, bias=bias, device=in_features.device, dtype=in_features.dtype
    )
    ffn.load_state_dict(weights)
    return ffn(in_features)
    # END SOLUTION


def run_sinusoidal_positions(
    d_model: int, max_seq_len: int, token_positions: Int[Tensor, " ... sequence_length"]
) -> Float[Tensor, " ... sequence_length d_model"]:
    """The original Transformer's sin/cos encoding of ``token_positions``."""
    # BEGIN SOLUTION
    return SinusoidalPositionalEncoding(d_model, max_seq_len, device=token_positions.device)(
        token_positions
    )
    # END SOLUTION


def run_grouped_query_attention(
    d_model: int,
    num_heads: int,
    num_kv_heads: int,
    max_seq_len: int,
    theta: float,
    weights: dict[str, Tensor],
    in_features: Float[Tensor, " ... sequence_length d_model"],
    token_positions: Int[Tensor, " ... sequence_length"] | None = None,
    qk_norm: bool = False,
    eps: float = 1e-5,
) -> Float[Tensor, " ... sequence_length d_model"]:
    """Causal grouped-query attention with RoPE; ``weights`` has ``{q,k,v,output}_proj.weight``
    (``k``/``v`` with ``num_kv_heads * d_head`` rows) and, with ``qk_norm``, ``{q,k}_norm.weight``."""
    # BEGIN SOLUTION
    device, dtype = in_features.device, in_features.dtype
    rope = RotaryPositionalEmbedding(theta, d_model // num_heads, max_seq_len, device=device)
    attention = self_attention(
        d_model,
        num_heads,
        num_kv_heads,
        rope=rope,
        qk_norm=qk_norm,
        norm_eps=eps,
        device=device,
        dtype=dtype,
    )
    attention.load_state_dict(weights)
    return attention(in_features, token_positions)
    # END SOLUTION


def run_multihead_latent_attention(
    config: dict[str, Any],
    weights: dict[str, Tensor],
    in_features: Float[Tensor, " ... sequence_length d_model"],
    token_positions: Int[Tensor, " ... sequence_length"] | None = None,
    use_latent_cache: bool = False,
) -> Float[Tensor, " ... sequence_length d_model"]:
    """DeepSeek-V2 multi-head latent attention built from ``VariantConfig.from_dict(config)`` (with
    ``attention="mla"``). With ``use_latent_cache`` the input is fed through an empty latent KV
    cache, which runs the folded (absorbed-projection) path."""
    # BEGIN SOLUTION
    layer = latent_attention(
        VariantConfig.from_dict(config), device=in_features.device, dtype=in_features.dtype
    )
    layer.load_state_dict(weights)
    if not use_latent_cache:
        return layer(in_features, token_positions)
    with kv_caches(layer):
        return layer(in_features, token_positions)
    # END SOLUTION


def run_mixture_of_experts(
    d_model: int,
    d_ff: int,
    num_experts: int,
    top_k: int,
    weights: dict[str, Tensor],
    in_features: Float[Tensor, " ... d_model"],
    normalize_topk: bool = True,
    capacity_factor: float | None = None,
    scoring: str = "softmax",
) -> tuple[Float[Tensor, " ... d_model"], Float[Tensor, ""]]:
    """Top-k mixture of SwiGLU experts; ``weights`` has ``router.weight`` and
    ``experts.{e}.{w1,w2,w3}.weight``. Returns the output and the load-balancing loss.
    ``scoring="sigmoid"`` (DeepSeek-V3): sigmoid router scores, and ``weights`` also has
    ``score_correction_bias``, added to the scores to choose experts but not to weigh them."""
    # BEGIN SOLUTION
    moe = mixture_of_experts(
        d_model,
        d_ff,
        num_experts,
        top_k,
        normalize_topk,
        capacity_factor,
        device=in_features.device,
        dtype=in_features.dtype,
        scoring=scoring,
    )
    moe.load_state_dict(weights)
    output = moe(in_features)
    return output, moe.aux_loss()
    # END SOLUTION


def run_transformer_lm_variant(
    config: dict[str, Any],
    weights: dict[str, Tensor],
    in_indices: Int[Tensor, " batch_size sequence_length"],
) -> Float[Tensor, " batch_size sequence_length vocab_size"]:
    """Logits of the variant LM ``VariantConfig.from_dict(config)`` describes, loaded from ``weights``."""
    # BEGIN SOLUTION
    model = build_variant_model(VariantConfig.from_dict(config), device=in_indices.device)
    model.load_state_dict(weights)
    return model(in_indices)
    # END SOLUTION


def run_encoder_layer(
    d_model: int,
    num_heads: int,
    d_ff: int,
    eps: float,
    weights: dict[str, Tensor],
    in_features: Float[Tensor, " ... source d_model"],
) -> Float[Tensor, " ... source d_model"]:
    """Post-LN Transformer encoder layer (bidirectional self-attention, GELU MLP, biases)."""
    # BEGIN SOLUTION
    layer = EncoderLayer(
        d_model, num_heads, d_ff, eps, device=in_features.device, dtype=in_features.dtype
    )
    layer.load_state_dict(weights)
    return layer(in_features)
    # END SOLUTION


def run_decoder_layer(
    d_model: int,
    num_heads: int,
    d_ff: int,
    eps: float,
    weights: dict[str, Tensor],
    in_features: Float[Tensor, " ... target d_model"],
    memory: Float[Tensor, " ... source d_model"],
) -> Float[Tensor, " ... target d_model"]:
    """Post-LN Transformer decoder layer: causal self-attention, cross-attention to
    ``memory``, GELU MLP."""
    # BEGIN SOLUTION
    layer = DecoderLayer(
        d_model, num_heads, d_ff, eps, device=in_features.device, dtype=in_features.dtype
    )
    layer.load_state_dict(weights)
    return layer(in_features, memory)
    # END SOLUTION


def run_seq2seq(
    config: dict[str, Any],
    weights: dict[str, Tensor],
    source_ids: Int[Tensor, " batch_size source"],
    target_ids: Int[Tensor, " batch_size target"],
) -> Float[Tensor, " batch_size target vocab_size"]:
    """Next-token logits of a ``Seq2SeqTransformer(Seq2SeqConfig(**config))``."""
    # BEGIN SOLUTION
    model = Seq2SeqTransformer(Seq2SeqConfig(**config), device=source_ids.device)
    model.load_state_dict(weights)
    return model(source_ids, target_ids)
    # END SOLUTION


def get_variant_lm(config: dict[str, Any], seed: int = 0) -> torch.nn.Module:
    """A freshly initialised (``torch.manual_seed(seed)``) variant LM for ``VariantConfig.from_dict(config)``,
    in eval mode; ``model(token_ids)`` returns logits and ``model.state_dict()`` its weights."""
    # BEGIN SOLUTION
    torch.manual_seed(seed)
    return build_variant_model(VariantConfig.from_dict(config)).eval()
    # END SOLUTION


def run_transformer_lm_variant_with_aux_loss(
    config: dict[str, Any],
    weights: dict[str, Tensor],
    in_indices: Int[Tensor, " batch_size sequence_length"],
) -> tuple[Float[Tensor, " batch_size sequence_length vocab_size"], Float[Tensor, ""]]:
    """Logits of the variant LM and its auxiliary (MoE load-balancing) loss for that forward
    call: ``aux_loss_coef`` times the mean over MoE layers, zero without MoE, with gradients."""
    # BEGIN SOLUTION
    model = build_variant_model(VariantConfig.from_dict(config), device=in_indices.device)
    model.load_state_dict(weights)
    return model(in_indices), model.aux_loss()
    # END SOLUTION


def run_transformer_lm_variant_cached(
    model: torch.nn.Module,
    in_indices: Int[Tensor, " batch_size sequence_length"],
    prefix_length: int,
) -> tuple[Float[Tensor, " batch_size sequence_length vocab_size"], int]:
    """Logits of ``model`` (from ``get_variant_lm``) decoded with a KV cache: the first
    ``prefix_length`` tokens in one call, then one token per call. Returns the logits of every
    position and the bytes the cache held at the end."""
    # BEGIN SOLUTION
    with torch.no_grad(), kv_caches(model):
        pieces = [model(in_indices[:, :prefix_length])]
        pieces += [
            model(in_indices[:, t : t + 1]) for t in range(prefix_length, in_indices.shape[1])
        ]
        cache_bytes = kv_cache_num_bytes(model)
    return torch.cat(pieces, dim=1), cache_bytes
    # END SOLUTION


def run_generate_variant(
    model: torch.nn.Module,
    prompt_ids: list[int],
    max_new_tokens: int,
    use_kv_cache: bool,
    temperature: float = 0.0,
) -> list[int]:
    """New token ids continuing ``prompt_ids``, decoded with or without the KV cache."""
    # BEGIN SOLUTION
    decode = generate_cached if use_kv_cache else generate
    return decode(model, prompt_ids, max_new_tokens, temperature)
    # END SOLUTION


def run_generate_batch_variant(
    model: torch.nn.Module,
    prompts: list[list[int]],
    max_new_tokens: int,
    use_kv_cache: bool,
    eos_ids: int | list[int | None] | None = None,
) -> list[list[int]]:
    """Greedy continuations of several prompts (any lengths) decoded as one batch, each row
    stopping at its own stop token (``eos_ids``: one for all rows, or one or ``None`` per row)."""
    # BEGIN SOLUTION
    return generate_batch(
        model, prompts, max_new_tokens, 0.0, eos_ids=eos_ids, use_kv_cache=use_kv_cache
    )
    # END SOLUTION


def run_variant_accounting(
    config: dict[str, Any], batch_size: int, seq_len: int, bytes_per_value: int = 4
) -> dict[str, Any]:
    """Paper accounting of ``VariantConfig.from_dict(config)``: ``parameters`` and ``forward_flops`` (dicts
    by component), ``kv_cache_elements_per_token`` and ``kv_cache_bytes``."""
    # BEGIN SOLUTION
    variant = VariantConfig.from_dict(config)
    return {
        "parameters": parameter_counts(variant),
        "forward_flops": forward_flops(variant, batch_size, seq_len),
        "kv_cache_elements_per_token": kv_cache_elements_per_token(variant),
        "kv_cache_bytes": kv_cache_bytes(variant, batch_size, seq_len, bytes_per_value),
    }
    # END SOLUTION


def run_variant_config_json_round_trip(config: dict[str, Any]) -> dict[str, Any]:
    """``VariantConfig.from_dict(config)`` written as JSON and read back, as a dict in the flat
    form ``config`` has."""
    # BEGIN SOLUTION
    return ModelConfig.from_json(VariantConfig.from_dict(config).to_json()).flat_dict()
    # END SOLUTION


def run_config_from_hf(hf_config: Any, context_length: int | None = None) -> dict[str, Any]:
    """The variant config (as a dict) of a Hugging Face config object."""
    # BEGIN SOLUTION
    return _config_dict(config_from_hf(hf_config, context_length))
    # END SOLUTION


def run_from_hf(
    hf_state_dict: dict[str, Tensor], config: dict[str, Any], family: str
) -> dict[str, Tensor]:
    """An HF ``family`` model's state dict renamed and rearranged into ours."""
    # BEGIN SOLUTION
    return from_hf(hf_state_dict, VariantConfig.from_dict(config), family)
    # END SOLUTION


def run_to_hf(
    state_dict: dict[str, Tensor], config: dict[str, Any], family: str
) -> dict[str, Tensor]:
    """Our state dict as the state dict of the HF ``family`` model."""
    # BEGIN SOLUTION
    return to_hf(state_dict, VariantConfig.from_dict(config), family)
    # END SOLUTION


def run_load_pretrained(
    directory: str | os.PathLike,
) -> tuple[torch.nn.Module, dict[str, Any], str, Any]:
    """An HF checkpoint directory read as ``(model, config dict, family, tokenizer or None)``;
    the model is in eval mode, the tokenizer has ``encode``/``decode``. Bad directories raise
    ``ValueError`` or ``FileNotFoundError`` naming the file and field."""
    # BEGIN SOLUTION
    loaded = load_pretrained(directory)
    return loaded.model, _config_dict(loaded.config), loaded.family, loaded.tokenizer
    # END SOLUTION


def run_save_pretrained(
    model: torch.nn.Module, config: dict[str, Any], directory: str | os.PathLike, family: str
) -> None:
    """Write ``model`` as an HF ``family`` checkpoint directory ``from_pretrained`` loads."""
    # BEGIN SOLUTION
    save_pretrained(model, VariantConfig.from_dict(config), directory, family)
    # END SOLUTION


def get_deepseek_v3_2_config(**overrides: Any) -> dict[str, Any]:
    """The variant config (as a dict) of DeepSeek-V3.2's architecture: published sizes and
    structure (latent attention with DeepSeek Sparse Attention, sigmoid-routed MoE) unless
    ``overrides`` change them; ``get_variant_lm`` builds it."""
    # BEGIN SOLUTION
    published = _config_dict(NAMED_BUILDERS["deepseek_v3_2"].config())
    return _config_dict(VariantConfig.from_dict(published | overrides))
    # END SOLUTION


def get_named_variant_config(name: str, hf_config: Any = None, **overrides: Any) -> dict[str, Any]:
    """The config (as a dict) of a published family's named builder (``llama3_2_1b``,
    ``qwen3_0_6b``, ``qwen3_moe``, ``mixtral``, ``deepseek_v2_lite``, ``gpt2_small``,
    ``transformer_base``, ...): the published model's, or that of the model ``hf_config`` (an HF
    config object or a dict of its fields) and ``overrides`` (HF field names) describe."""
    # BEGIN SOLUTION
    return _config_dict(NAMED_BUILDERS[name].config(hf_config, **overrides))
    # END SOLUTION


def get_named_variant(
    name: str, hf_config: Any = None, seed: int = 0, **overrides: Any
) -> tuple[torch.nn.Module, dict[str, Any]]:
    """The model a named builder builds (see ``get_named_variant_config``), freshly initialised
    (``torch.manual_seed(seed)``) and in eval mode, and its config as a dict."""
    # BEGIN SOLUTION
    builder = NAMED_BUILDERS[name]
    config = builder.config(hf_config, **overrides)
    torch.manual_seed(seed)
    return builder.build(config).eval(), _config_dict(config)
    # END SOLUTION


def get_hf_tokenizer(path: str | os.PathLike, add_special_tokens: bool = False) -> Any:
    """The tokenizer of an HF ``tokenizers`` ``tokenizer.json`` file, with ``encode`` (ids as
    ``tokenizers``' ``encode(text, add_special_tokens=add_special_tokens)``) and ``decode``. A
    setting it does not implement raises ``ValueError`` naming the field."""
    # BEGIN SOLUTION
    tokenizer = tokenizer_from_json(path)
    return tokenizer.with_special_tokens() if add_special_tokens else tokenizer
    # END SOLUTION


# --- Static KV cache and compiled decoding ------------------------------------------------------


def run_transformer_lm_variant_static_cached(
    model: torch.nn.Module,
    in_indices: Int[Tensor, " batch_size sequence_length"],
    prefix_length: int,
    max_length: int,
) -> tuple[Float[Tensor, " batch_size sequence_length vocab_size"], int]:
    """As ``run_transformer_lm_variant_cached``, with static KV caches preallocated for
    ``max_length`` positions (fixed-size buffers written in place). Returns the logits of every
    position and the bytes the caches hold; more tokens than ``max_length`` raise ``ValueError``."""
    # BEGIN SOLUTION
    with torch.no_grad(), kv_caches(model, static_length=max_length):
        pieces = [model(in_indices[:, :prefix_length])]
        pieces += [
            model(in_indices[:, t : t + 1]) for t in range(prefix_length, in_indices.shape[1])
        ]
        cache_bytes = kv_cache_num_bytes(model)
    return torch.cat(pieces, dim=1), cache_bytes
    # END SOLUTION


def run_generate_batch_static(
    model: torch.nn.Module,
    prompts: list[list[int]],
    max_new_tokens: int,
    eos_ids: int | list[int | None] | None = None,
    compile_backend: Any = None,
    on_token: Any = None,
) -> list[list[int]]:
    """``run_generate_batch_variant`` (greedy, with the KV cache) over static KV caches; with
    ``compile_backend`` (a ``torch.compile`` backend: a name or a callable), every single-token
    step runs compiled with it. ``on_token(row, token)`` is called with each new token as it is
    chosen."""
    # BEGIN SOLUTION
    return generate_batch(
        model,
        prompts,
        max_new_tokens,
        0.0,
        eos_ids=eos_ids,
        static_cache=True,
        compile=compile_backend or False,
        on_token=on_token,
    )
    # END SOLUTION
