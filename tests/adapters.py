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
    # imported here, so that the handout's stub imports nothing unused
    from cs336_basics.generation import generate

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
