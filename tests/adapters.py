"""The adapter shim: the only place the tests touch ``cs336_basics``.

Each ``run_*`` function builds your component, loads the given weights into it and returns its
output. The names and parameters are exactly those of the course's spring-2025 adapters, so
this file drops into either copy of the test suite. It imports only ``cs336_basics`` and
third-party packages.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import IO, Any, BinaryIO

import numpy.typing as npt
import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from cs336_basics.adamw import AdamW
from cs336_basics.attention import MultiHeadSelfAttention, scaled_dot_product_attention
from cs336_basics.block import TransformerBlock
from cs336_basics.bpe import train_bpe
from cs336_basics.checkpoint import load_checkpoint, save_checkpoint
from cs336_basics.config import ModelConfig
from cs336_basics.data import get_batch
from cs336_basics.embedding import Embedding
from cs336_basics.feedforward import SwiGLU
from cs336_basics.functional import silu, softmax
from cs336_basics.gradient_clipping import clip_gradients
from cs336_basics.linear import Linear
from cs336_basics.losses import cross_entropy
from cs336_basics.model import TransformerLM
from cs336_basics.rmsnorm import RMSNorm
from cs336_basics.rope import RotaryPositionalEmbedding
from cs336_basics.schedule import get_lr_cosine_schedule
from cs336_basics.tokenizer import Tokenizer


def run_linear(
    d_in: int,
    d_out: int,
    weights: Float[Tensor, " d_out d_in"],
    in_features: Float[Tensor, " ... d_in"],
) -> Float[Tensor, " ... d_out"]:
    """Apply a ``Linear(d_in, d_out)`` whose weight is ``weights`` to ``in_features``."""
    # BEGIN SOLUTION
    linear = Linear(d_in, d_out, device=weights.device, dtype=weights.dtype)
    linear.load_state_dict({"weight": weights})
    return linear(in_features)
    # END SOLUTION


def run_embedding(
    vocab_size: int,
    d_model: int,
    weights: Float[Tensor, " vocab_size d_model"],
    token_ids: Int[Tensor, " ..."],
) -> Float[Tensor, " ... d_model"]:
    """Look up ``token_ids`` in an ``Embedding(vocab_size, d_model)`` with weight ``weights``."""
    # BEGIN SOLUTION
    embedding = Embedding(vocab_size, d_model, device=weights.device, dtype=weights.dtype)
    embedding.load_state_dict({"weight": weights})
    return embedding(token_ids)
    # END SOLUTION


def run_swiglu(
    d_model: int,
    d_ff: int,
    w1_weight: Float[Tensor, " d_ff d_model"],
    w2_weight: Float[Tensor, " d_model d_ff"],
    w3_weight: Float[Tensor, " d_ff d_model"],
    in_features: Float[Tensor, " ... d_model"],
) -> Float[Tensor, " ... d_model"]:
    """Apply a SwiGLU feed-forward ``w2(silu(w1 x) * w3 x)`` with the given weights."""
    # BEGIN SOLUTION
    swiglu = SwiGLU(d_model, d_ff, device=w1_weight.device, dtype=w1_weight.dtype)
    swiglu.load_state_dict({"w1.weight": w1_weight, "w2.weight": w2_weight, "w3.weight": w3_weight})
    return swiglu(in_features)
    # END SOLUTION


def run_scaled_dot_product_attention(
    Q: Float[Tensor, " ... queries d_k"],
    K: Float[Tensor, " ... keys d_k"],
    V: Float[Tensor, " ... keys d_v"],
    mask: Bool[Tensor, " ... queries keys"] | None = None,
) -> Float[Tensor, " ... queries d_v"]:
    """Scaled dot-product attention; ``mask`` True means "may attend"."""
    # BEGIN SOLUTION
    return scaled_dot_product_attention(Q, K, V, mask)
    # END SOLUTION


def run_multihead_self_attention(
    d_model: int,
    num_heads: int,
    q_proj_weight: Float[Tensor, " d_k d_in"],
    k_proj_weight: Float[Tensor, " d_k d_in"],
    v_proj_weight: Float[Tensor, " d_v d_in"],
    o_proj_weight: Float[Tensor, " d_model d_v"],
    in_features: Float[Tensor, " ... sequence_length d_in"],
) -> Float[Tensor, " ... sequence_length d_out"]:
    """Causal multi-head self-attention without position encoding."""
    # BEGIN SOLUTION
    attention = MultiHeadSelfAttention(
        d_model, num_heads, device=in_features.device, dtype=q_proj_weight.dtype
    )
    attention.load_state_dict(
        _attention_weights(q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight)
    )
    return attention(in_features)
    # END SOLUTION


def run_multihead_self_attention_with_rope(
    d_model: int,
    num_heads: int,
    max_seq_len: int,
    theta: float,
    q_proj_weight: Float[Tensor, " d_k d_in"],
    k_proj_weight: Float[Tensor, " d_k d_in"],
    v_proj_weight: Float[Tensor, " d_v d_in"],
    o_proj_weight: Float[Tensor, " d_model d_v"],
    in_features: Float[Tensor, " ... sequence_length d_in"],
    token_positions: Int[Tensor, " ... sequence_length"] | None = None,
) -> Float[Tensor, " ... sequence_length d_out"]:
    """Causal multi-head self-attention with RoPE on queries and keys."""
    # BEGIN SOLUTION
    device = in_features.device
    rope = RotaryPositionalEmbedding(theta, d_model // num_heads, max_seq_len, device=device)
    attention = MultiHeadSelfAttention(
        d_model, num_heads, rope=rope, device=device, dtype=q_proj_weight.dtype
    )
    attention.load_state_dict(
        _attention_weights(q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight)
    )
    return attention(in_features, token_positions)
    # END SOLUTION


def _attention_weights(q: Tensor, k: Tensor, v: Tensor, o: Tensor) -> dict[str, Tensor]:
    return {"q_proj.weight": q, "k_proj.weight": k, "v_proj.weight": v, "output_proj.weight": o}


def run_rope(
    d_k: int,
    theta: float,
    max_seq_len: int,
    in_query_or_key: Float[Tensor, " ... sequence_length d_k"],
    token_positions: Int[Tensor, " ... sequence_length"],
) -> Float[Tensor, " ... sequence_length d_k"]:
    """Rotate a query or key tensor by RoPE at ``token_positions``."""
    # BEGIN SOLUTION
    rope = RotaryPositionalEmbedding(theta, d_k, max_seq_len, device=in_query_or_key.device)
    return rope(in_query_or_key, token_positions)
    # END SOLUTION


def run_transformer_block(
    d_model: int,
    num_heads: int,
    d_ff: int,
    max_seq_len: int,
    theta: float,
    weights: dict[str, Tensor],
    in_features: Float[Tensor, " batch sequence_length d_model"],
) -> Float[Tensor, " batch sequence_length d_model"]:
    """A pre-norm Transformer block; ``weights`` uses the block's state-dict names
    (``attn.q_proj.weight``, ``ln1.weight``, ``ffn.w1.weight``, ...)."""
    # BEGIN SOLUTION
    return run_transformer_block_ablation(
        d_model, num_heads, d_ff, max_seq_len, theta, weights, in_features
    )
    # END SOLUTION


def run_transformer_lm(
    vocab_size: int,
    context_length: int,
    d_model: int,
    num_layers: int,
    num_heads: int,
    d_ff: int,
    rope_theta: float,
    weights: dict[str, Tensor],
    in_indices: Int[Tensor, " batch_size sequence_length"],
) -> Float[Tensor, " batch_size sequence_length vocab_size"]:
    """Next-token logits of a ``TransformerLM`` loaded from ``weights``."""
    # BEGIN SOLUTION
    config = ModelConfig(
        vocab_size=vocab_size,
        context_length=context_length,
        d_model=d_model,
        num_layers=num_layers,
        num_heads=num_heads,
        d_ff=d_ff,
        rope_theta=rope_theta,
    )
    dtype = weights["token_embeddings.weight"].dtype
    model = TransformerLM(config, device=in_indices.device, dtype=dtype)
    model.load_state_dict(weights)
    return model(in_indices)
    # END SOLUTION


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
    config = ModelConfig(
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
    )
    block = TransformerBlock(config, device=in_features.device, dtype=in_features.dtype)
    block.load_state_dict(weights)
    return block(in_features)
    # END SOLUTION


def run_rmsnorm(
    d_model: int,
    eps: float,
    weights: Float[Tensor, " d_model"],
    in_features: Float[Tensor, " ... d_model"],
) -> Float[Tensor, " ... d_model"]:
    """RMSNorm with gain ``weights``."""
    # BEGIN SOLUTION
    norm = RMSNorm(d_model, eps, device=weights.device, dtype=weights.dtype)
    norm.load_state_dict({"weight": weights})
    return norm(in_features)
    # END SOLUTION


def run_silu(in_features: Float[Tensor, " ..."]) -> Float[Tensor, " ..."]:
    """SiLU, elementwise."""
    # BEGIN SOLUTION
    return silu(in_features)
    # END SOLUTION


def run_softmax(in_features: Float[Tensor, " ..."], dim: int) -> Float[Tensor, " ..."]:
    """Softmax of ``in_features`` along ``dim``."""
    # BEGIN SOLUTION
    return softmax(in_features, dim)
    # END SOLUTION


# --- Training (issue 4 fills these in) -------------------------------------------------------


def run_get_batch(
    dataset: npt.NDArray, batch_size: int, context_length: int, device: str
) -> tuple[Tensor, Tensor]:
    """Sample ``batch_size`` windows of ``context_length`` tokens and their next-token targets."""
    # BEGIN SOLUTION
    return get_batch(dataset, batch_size, context_length, device)
    # END SOLUTION


def run_cross_entropy(
    inputs: Float[Tensor, " batch_size vocab_size"], targets: Int[Tensor, " batch_size"]
) -> Float[Tensor, ""]:
    """Mean cross-entropy of unnormalised logits ``inputs`` against ``targets``."""
    # BEGIN SOLUTION
    return cross_entropy(inputs, targets)
    # END SOLUTION


def run_gradient_clipping(parameters: Iterable[torch.nn.Parameter], max_l2_norm: float) -> None:
    """Scale the gradients in place so their global L2 norm is at most ``max_l2_norm``."""
    # BEGIN SOLUTION
    clip_gradients(parameters, max_l2_norm)
    # END SOLUTION


def get_adamw_cls() -> Any:
    """Return your ``torch.optim.Optimizer`` subclass implementing AdamW."""
    # BEGIN SOLUTION
    return AdamW
    # END SOLUTION


def run_get_lr_cosine_schedule(
    it: int,
    max_learning_rate: float,
    min_learning_rate: float,
    warmup_iters: int,
    cosine_cycle_iters: int,
) -> float:
    """Learning rate at iteration ``it`` of linear warmup then cosine decay."""
    # BEGIN SOLUTION
    return get_lr_cosine_schedule(
        it, max_learning_rate, min_learning_rate, warmup_iters, cosine_cycle_iters
    )
    # END SOLUTION


def run_save_checkpoint(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    iteration: int,
    out: str | os.PathLike | BinaryIO | IO[bytes],
) -> None:
    """Save model, optimizer and iteration to ``out``."""
    # BEGIN SOLUTION
    save_checkpoint(model, optimizer, iteration, out)
    # END SOLUTION


def run_load_checkpoint(
    src: str | os.PathLike | BinaryIO | IO[bytes],
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
) -> int:
    """Restore model and optimizer from ``src``; return the saved iteration."""
    # BEGIN SOLUTION
    return load_checkpoint(src, model, optimizer)
    # END SOLUTION


# --- Tokenizer (issue 3 fills these in) ------------------------------------------------------


def get_tokenizer(
    vocab: dict[int, bytes],
    merges: list[tuple[bytes, bytes]],
    special_tokens: list[str] | None = None,
) -> Any:
    """A BPE tokenizer with ``encode``, ``encode_iterable`` and ``decode``."""
    # BEGIN SOLUTION
    return Tokenizer(vocab, merges, special_tokens)
    # END SOLUTION


def run_train_bpe(
    input_path: str | os.PathLike,
    vocab_size: int,
    special_tokens: list[str],
    **kwargs,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Train byte-level BPE on ``input_path``; return ``(vocab, merges)``."""
    # BEGIN SOLUTION
    return train_bpe(input_path, vocab_size, special_tokens, **kwargs)
    # END SOLUTION


# --- Architecture variants (issue 6): beyond the assignment ----------------------------------
# Imported here rather than at the top so this section can be dropped as a unit.

from cs336_basics.encoder_decoder import (  # noqa: E402
    DecoderLayer,
    EncoderLayer,
    Seq2SeqConfig,
    Seq2SeqTransformer,
)
from cs336_basics.feedforward import FeedForward  # noqa: E402
from cs336_basics.kv_cache import LatentKVCache  # noqa: E402
from cs336_basics.layernorm import LayerNorm  # noqa: E402
from cs336_basics.mla import MultiHeadLatentAttention  # noqa: E402
from cs336_basics.moe import MixtureOfExperts  # noqa: E402
from cs336_basics.positional import SinusoidalPositionalEncoding  # noqa: E402


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
    attention = MultiHeadSelfAttention(
        d_model,
        num_heads,
        rope=rope,
        device=device,
        dtype=dtype,
        num_kv_heads=num_kv_heads,
        qk_norm=qk_norm,
        norm_eps=eps,
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
    """DeepSeek-V2 multi-head latent attention built from ``ModelConfig(**config)`` (with
    ``attention="mla"``). With ``use_latent_cache`` the input is fed through an empty latent KV
    cache, which runs the folded (absorbed-projection) path."""
    # BEGIN SOLUTION
    layer = MultiHeadLatentAttention(
        ModelConfig(**config), device=in_features.device, dtype=in_features.dtype
    )
    layer.load_state_dict(weights)
    return layer(in_features, token_positions, LatentKVCache() if use_latent_cache else None)
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
) -> tuple[Float[Tensor, " ... d_model"], Float[Tensor, ""]]:
    """Top-k mixture of SwiGLU experts; ``weights`` has ``router.weight`` and
    ``experts.{e}.{w1,w2,w3}.weight``. Returns the output and the load-balancing loss."""
    # BEGIN SOLUTION
    moe = MixtureOfExperts(
        d_model,
        d_ff,
        num_experts,
        top_k,
        normalize_topk,
        capacity_factor,
        device=in_features.device,
        dtype=in_features.dtype,
    )
    moe.load_state_dict(weights)
    output = moe(in_features)
    return output, moe.aux_loss
    # END SOLUTION


def run_transformer_lm_variant(
    config: dict[str, Any],
    weights: dict[str, Tensor],
    in_indices: Int[Tensor, " batch_size sequence_length"],
) -> Float[Tensor, " batch_size sequence_length vocab_size"]:
    """Logits of a ``TransformerLM(ModelConfig(**config))`` loaded from ``weights``."""
    # BEGIN SOLUTION
    model = TransformerLM(ModelConfig(**config), device=in_indices.device)
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


# --- Fresh modules and decoding boundaries (issue 14) -----------------------------------------
# Initialisation and sampling are specified by the handout but never reached by loading weights.
# Imported here rather than at the top so this section can be merged and moved as a unit.

from cs336_basics.generation import sample_next_token, top_p_filter  # noqa: E402


def run_init_linear(d_in: int, d_out: int) -> Float[Tensor, " d_out d_in"]:
    """The weight of a freshly constructed ``Linear(d_in, d_out)`` (no weights loaded)."""
    # BEGIN SOLUTION
    return Linear(d_in, d_out).weight.detach()
    # END SOLUTION


def run_init_embedding(vocab_size: int, d_model: int) -> Float[Tensor, " vocab_size d_model"]:
    """The table of a freshly constructed ``Embedding(vocab_size, d_model)``."""
    # BEGIN SOLUTION
    return Embedding(vocab_size, d_model).weight.detach()
    # END SOLUTION


def run_init_rmsnorm(d_model: int) -> Float[Tensor, " d_model"]:
    """The gain of a freshly constructed ``RMSNorm(d_model)``."""
    # BEGIN SOLUTION
    return RMSNorm(d_model).weight.detach()
    # END SOLUTION


def run_top_p_filter(
    probabilities: Float[Tensor, " vocab_size"], top_p: float
) -> Float[Tensor, " vocab_size"]:
    """Nucleus truncation: keep the smallest set of most likely tokens whose mass reaches
    ``top_p``, zero the rest, renormalise."""
    # BEGIN SOLUTION
    return top_p_filter(probabilities, top_p)
    # END SOLUTION


def run_sample_next_token(
    logits: Float[Tensor, " vocab_size"],
    temperature: float,
    top_p: float,
    generator: torch.Generator | None = None,
) -> int:
    """One token id from ``softmax(logits / temperature)`` cut to its top-p nucleus;
    temperature 0 is greedy (argmax)."""
    # BEGIN SOLUTION
    return sample_next_token(logits, temperature, top_p, generator)
    # END SOLUTION
