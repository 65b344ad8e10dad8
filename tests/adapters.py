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
from cs336_basics.block import transformer_block
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
from cs336_basics.model import transformer_lm
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
    device, dtype = in_features.device, in_features.dtype
    rope = RotaryPositionalEmbedding(theta, d_model // num_heads, max_seq_len, device=device)
    block = transformer_block(d_model, num_heads, d_ff, rope, device=device, dtype=dtype)
    block.load_state_dict(weights)
    return block(in_features)
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
    model = transformer_lm(config, device=in_indices.device, dtype=dtype)
    model.load_state_dict(weights)
    return model(in_indices)
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


# --- Training: batches, loss, optimizer, schedule, clipping, checkpoints -----------------------


def run_get_batch(
    dataset: npt.NDArray, batch_size: int, context_length: int, device: str
) -> tuple[Tensor, Tensor]:
    """Sample ``batch_size`` windows of ``context_length`` tokens and their next-token targets."""
    # BEGIN SOLUTION
    return get_batch(dataset, batch_size, context_length, device)
    # END SOLUTION


def run_cross_entropy(
    inputs: Float[Tensor, " ... vocab_size"], targets: Int[Tensor, " ..."]
) -> Float[Tensor, ""]:
    """Mean cross-entropy of unnormalised logits ``inputs`` against ``targets``, averaged over
    every leading (batch) dimension."""
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


# --- Tokenizer -------------------------------------------------------------------------------


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


# --- Beyond the course's adapters: decoding, the training loop, accounting ------------------
# These parts of the assignment are not graded by the tests (your experiments and write-up
# show them); these adapters let the advice tests reach them without knowing your module names.
# Their imports sit here, next to the adapters that use them.

from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from cs336_basics import accounting as _accounting  # noqa: E402
from cs336_basics import training as _training  # noqa: E402
from cs336_basics.checkpoint import model_from_checkpoint  # noqa: E402


def get_transformer_lm(
    vocab_size: int,
    context_length: int,
    d_model: int,
    num_layers: int,
    num_heads: int,
    d_ff: int,
    rope_theta: float,
    weights: dict[str, Tensor] | None = None,
) -> torch.nn.Module:
    """Your ``TransformerLM`` as a module whose ``forward(in_indices)`` returns logits of shape
    ``(batch, sequence_length, vocab_size)``. Loaded from ``weights`` (the names of
    ``run_transformer_lm``) when given; otherwise freshly initialised from torch's global RNG."""
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
    model = transformer_lm(config)
    if weights is not None:
        model.load_state_dict(weights)
    return model
    # END SOLUTION


def run_generate(
    model: torch.nn.Module,
    prompt_ids: list[int],
    max_new_tokens: int,
    temperature: float,
    top_p: float,
    eos_id: int | None,
) -> list[int]:
    """Sample a continuation of ``prompt_ids`` from ``model`` (one built by
    ``get_transformer_lm``): each step draws from ``softmax(logits / temperature)`` truncated to
    its top-``top_p`` nucleus, using torch's global RNG. Return only the new ids (at most
    ``max_new_tokens``); stop after ``eos_id`` is drawn (whether it is included is up to you).
    The tests keep ``len(prompt_ids) + max_new_tokens`` within the model's context length."""
    # BEGIN SOLUTION
    return generate(model, prompt_ids, max_new_tokens, temperature, top_p, eos_id)
    # END SOLUTION


def run_train(
    train_tokens: npt.NDArray,
    vocab_size: int,
    context_length: int,
    d_model: int,
    num_layers: int,
    num_heads: int,
    d_ff: int,
    rope_theta: float,
    batch_size: int,
    num_steps: int,
    max_learning_rate: float,
    min_learning_rate: float,
    warmup_iters: int,
    weight_decay: float,
    max_l2_norm: float,
    out_dir: str | os.PathLike,
    device: str,
) -> torch.nn.Module:
    """Run your training loop: a fresh ``TransformerLM`` trained on ``train_tokens`` for
    ``num_steps`` AdamW steps of ``batch_size`` random windows, the cosine schedule (warmup
    ``warmup_iters``, decaying to ``min_learning_rate`` at ``num_steps``), gradient clipping at
    ``max_l2_norm``. It may write anything under ``out_dir``. Return the trained model, whose
    ``forward(in_indices)`` returns logits."""
    # BEGIN SOLUTION
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    np.save(out / "train_tokens.npy", np.asarray(train_tokens, dtype=np.uint16))
    model = ModelConfig(
        vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta=rope_theta
    )
    config = _training.TrainConfig(
        model=model,
        train_data=str(out / "train_tokens.npy"),
        out_dir=str(out),
        batch_size=batch_size,
        max_steps=num_steps,
        lr_max=max_learning_rate,
        lr_min=min_learning_rate,
        warmup_steps=warmup_iters,
        weight_decay=weight_decay,
        grad_clip=max_l2_norm,
        checkpoint_interval=num_steps,
        log_interval=num_steps,
        eval_interval=num_steps,
        device=device,
        progress=False,
    )
    return model_from_checkpoint(_training.train(config).checkpoint)
    # END SOLUTION


def run_count_parameters(
    vocab_size: int, context_length: int, d_model: int, num_layers: int, num_heads: int, d_ff: int
) -> int:
    """Trainable parameters of the handout's ``TransformerLM`` with these hyperparameters
    (untied embeddings and LM head, bias-free linears, RMSNorm gains, SwiGLU)."""
    # BEGIN SOLUTION
    config = ModelConfig(vocab_size, context_length, d_model, num_layers, num_heads, d_ff)
    return sum(_accounting.parameter_counts(config).values())
    # END SOLUTION


def run_forward_flops(
    vocab_size: int,
    context_length: int,
    d_model: int,
    num_layers: int,
    num_heads: int,
    d_ff: int,
    batch_size: int,
    sequence_length: int,
) -> int:
    """Matrix-multiply FLOPs (``2 m n k`` per ``(m, k) @ (k, n)``) of one forward pass of that
    model over ``batch_size`` sequences of ``sequence_length`` tokens, attention scores counted
    over the full ``sequence_length x sequence_length`` matrix."""
    # BEGIN SOLUTION
    config = ModelConfig(vocab_size, context_length, d_model, num_layers, num_heads, d_ff)
    return sum(_accounting.forward_flops(config, batch_size, sequence_length).values())
    # END SOLUTION


# --- Fresh modules, decoding boundaries, the training step ----------------------------------
# Initialisation, sampling, gradient accumulation and evaluation are specified by the handout
# but never reached by loading weights or by ``run_train`` (advice, not graded).

from types import SimpleNamespace  # noqa: E402

from cs336_basics.devices import Distributed  # noqa: E402
from cs336_basics.generation import sample_next_token, top_p_filter  # noqa: E402
from cs336_basics.training import accumulate_gradients, evaluate  # noqa: E402


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


def run_accumulate_gradients(
    model: torch.nn.Module,
    micro_batches: list[
        tuple[
            Int[Tensor, " batch_size sequence_length"], Int[Tensor, " batch_size sequence_length"]
        ]
    ],
) -> Float[Tensor, ""]:
    """One optimizer step's gradients by accumulation: zero ``model``'s gradients, then for each
    ``(inputs, targets)`` micro-batch backpropagate its training loss (next-token cross-entropy,
    plus the model's auxiliary loss if it reports one) divided by the number of micro-batches,
    so the gradients are those of the mean loss. A ``DistributedDataParallel``-wrapped ``model``
    all-reduces gradients once, in the last micro-batch's backward (``no_sync`` for the others).
    Return the mean loss as a 0-d tensor."""
    # BEGIN SOLUTION
    config = SimpleNamespace(grad_accum_steps=len(micro_batches), precision="fp32")
    batches = SimpleNamespace(next=iter(micro_batches).__next__)
    env = Distributed(device=micro_batches[0][0].device)
    return accumulate_gradients(model, batches, config, env)
    # END SOLUTION


def run_evaluate(
    model: torch.nn.Module,
    dataset: npt.NDArray,
    batch_size: int,
    context_length: int,
    num_batches: int,
    device: str,
) -> float:
    """The validation loss your training loop reports: the mean next-token cross-entropy of
    ``model`` over ``num_batches`` batches of ``batch_size`` random windows of ``dataset`` (the
    same batches at every call), without gradients; ``model`` is left in the mode it was in."""
    # BEGIN SOLUTION
    config = SimpleNamespace(
        model=SimpleNamespace(context_length=context_length),
        batch_size=batch_size,
        eval_batches=num_batches,
        seed=0,
        precision="fp32",
    )
    return evaluate(model, dataset, config, Distributed(device=torch.device(device)))
    # END SOLUTION


# BEGIN EXTENSION
# --- Architecture variants: beyond the assignment ---------------------------------------------
# Imported here rather than at the top so this section can be dropped as a unit.

from cs336_basics.accounting import forward_flops, kv_cache_bytes, parameter_counts  # noqa: E402
from cs336_basics.generation import generate  # noqa: E402
from cs336_basics.variants.accounting import kv_cache_elements_per_token  # noqa: E402
from cs336_basics.variants.attention import self_attention  # noqa: E402
from cs336_basics.variants.builders import build_variant_model, latent_attention  # noqa: E402
from cs336_basics.variants.config import VariantConfig  # noqa: E402
from cs336_basics.variants.decoding.generation import generate_batch, generate_cached  # noqa: E402
from cs336_basics.variants.decoding.kv_cache import kv_cache_num_bytes, kv_caches  # noqa: E402
from cs336_basics.variants.encoder_decoder import (  # noqa: E402
    DecoderLayer,
    EncoderLayer,
    Seq2SeqConfig,
    Seq2SeqTransformer,
)
from cs336_basics.variants.feedforward import FeedForward  # noqa: E402
from cs336_basics.variants.hf.checkpoint import load_pretrained, save_pretrained  # noqa: E402
from cs336_basics.variants.hf.convert import from_hf, to_hf  # noqa: E402
from cs336_basics.variants.hf.named_builders import NAMED_BUILDERS, config_from_hf  # noqa: E402
from cs336_basics.variants.hf.tokenizer import tokenizer_from_json  # noqa: E402
from cs336_basics.variants.layernorm import LayerNorm  # noqa: E402
from cs336_basics.variants.moe import mixture_of_experts  # noqa: E402
from cs336_basics.variants.positional import SinusoidalPositionalEncoding  # noqa: E402


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


# END EXTENSION
