"""Resource accounting for a ``ModelConfig``: parameters, memory, FLOPs and MFU, on paper.

Conventions:

- FLOPs count matrix multiplies only (``2 m n k`` for an ``(m, k) @ (k, n)`` product); norms,
  activations, softmax and RoPE are lower order. Attention scores are counted over the full
  ``T x T`` matrix, as the reference implementation computes them (masking wastes half).
- Training costs three forward passes' worth: the backward pass computes gradients with
  respect to both activations and weights, two matmuls for every forward one.
- Memory is in bytes for ``bytes_per_value``-byte values (4 for float32). Activations follow
  the handout's itemisation of what the backward pass needs per layer; a real autograd graph
  saves somewhat different tensors, so treat it as an estimate.

The handout's architecture is covered with its common variants (norm placement and kind,
GQA/MQA, QK-norm, biases, tied embeddings, two-matrix MLPs, learned positions); mixtures of
experts and latent attention are not modelled here and raise ``ValueError``.
"""

from __future__ import annotations

from dataclasses import dataclass

from cs336_basics.config import ModelConfig

PRESETS: dict[str, ModelConfig] = {
    # GPT-2 shapes with the handout's architecture (SwiGLU, d_ff = 4 d_model), vocab 50,257.
    "gpt2-small": ModelConfig(50257, 1024, 768, 12, 12, 3072),
    "gpt2-medium": ModelConfig(50257, 1024, 1024, 24, 16, 4096),
    "gpt2-large": ModelConfig(50257, 1024, 1280, 36, 20, 5120),
    "gpt2-xl": ModelConfig(50257, 1024, 1600, 48, 25, 6400),
    # The handout's TinyStories model.
    "tinystories": ModelConfig(10000, 256, 512, 4, 16, 1344, rope_theta=10000.0),
}


def _check_supported(config: ModelConfig) -> None:
    if config.ffn == "moe" or config.attention == "mla":
        raise ValueError(
            "accounting does not model mixture-of-experts or latent attention yet "
            f"(ffn={config.ffn!r}, attention={config.attention!r})"
        )


def _ffn_matrices(config: ModelConfig) -> int:
    return 3 if config.ffn == "swiglu" else 2


def _kv_width(config: ModelConfig) -> int:
    """Output width of the key (and of the value) projection."""
    return config.kv_heads * config.d_head


def parameter_counts(config: ModelConfig) -> dict[str, int]:
    """Trainable parameters by component; ``sum(...)`` equals ``model.num_parameters()``."""
    _check_supported(config)
    # BEGIN SOLUTION
    d, d_ff, kv = config.d_model, config.d_ff, _kv_width(config)
    norm_size = d * (2 if config.norm == "layernorm" else 1)  # gain, plus a bias for LayerNorm
    layer_norms = 0 if config.norm_placement == "none" else 2 * norm_size
    attention = d * d + 2 * d * kv + d * d
    ffn = _ffn_matrices(config) * d * d_ff
    if config.bias:  # attention projections and the two-matrix MLPs (SwiGLU stays bias-free)
        attention += d + 2 * kv + d
        ffn += 0 if config.ffn == "swiglu" else d_ff + d
    if config.qk_norm:
        attention += 2 * config.d_head
    counts = {
        "token_embeddings": config.vocab_size * d,
        "position_embeddings": config.context_length * d if config.position_encoding == "learned" else 0,
        "attention": config.num_layers * attention,
        "ffn": config.num_layers * ffn,
        "norms": config.num_layers * layer_norms + (norm_size if config.norm_placement == "pre" else 0),
        "lm_head": 0 if config.tie_embeddings else d * config.vocab_size,
    }
    return counts
    # END SOLUTION


def forward_flops(config: ModelConfig, batch_size: int = 1, seq_len: int | None = None) -> dict[str, int]:
    """Matmul FLOPs of one forward pass over ``batch_size`` sequences of ``seq_len`` tokens,
    by component (summed over layers)."""
    _check_supported(config)
    T = config.context_length if seq_len is None else seq_len
    tokens = batch_size * T
    d, layers = config.d_model, config.num_layers
    # BEGIN SOLUTION
    flops = {
        "q_proj": 2 * tokens * d * d,
        "k_proj": 2 * tokens * d * _kv_width(config),
        "v_proj": 2 * tokens * d * _kv_width(config),
        "output_proj": 2 * tokens * d * d,
        "attention_scores": 2 * batch_size * T * T * d,  # Q K^T: every head, every (query, key)
        "attention_values": 2 * batch_size * T * T * d,  # softmax(...) V
        "ffn": 2 * tokens * d * config.d_ff * _ffn_matrices(config),
    }
    flops = {name: layers * value for name, value in flops.items()}
    flops["lm_head"] = 2 * tokens * d * config.vocab_size
    return flops
    # END SOLUTION


def training_flops_per_token(config: ModelConfig, seq_len: int | None = None) -> float:
    """Forward plus backward matmul FLOPs per trained token (3x the forward pass)."""
    T = config.context_length if seq_len is None else seq_len
    return 3 * sum(forward_flops(config, 1, T).values()) / T


def activation_counts(config: ModelConfig, batch_size: int = 1, seq_len: int | None = None) -> dict[str, int]:
    """Values kept for the backward pass, by component, after the handout's itemisation."""
    _check_supported(config)
    T = config.context_length if seq_len is None else seq_len
    tokens, d, h, d_ff = batch_size * T, config.d_model, config.num_heads, config.d_ff
    gated = config.ffn == "swiglu"
    per_layer = {
        "norms": 0 if config.norm_placement == "none" else 2 * tokens * d,
        "qkv_projections": tokens * (d + 2 * _kv_width(config)),
        "attention_scores": batch_size * h * T * T,
        "attention_softmax": batch_size * h * T * T,
        "attention_values": tokens * d,
        "output_proj": tokens * d,
        # W1 x and its activation, W3 x and the gate product when gated, then W2's output
        "ffn": tokens * d_ff * (4 if gated else 2) + tokens * d,
    }
    counts = {name: config.num_layers * value for name, value in per_layer.items()}
    counts["final_norm"] = tokens * d if config.norm_placement == "pre" else 0
    counts["logits"] = tokens * config.vocab_size
    counts["cross_entropy"] = tokens * config.vocab_size  # the softmax over the logits
    return counts


@dataclass
class MemoryEstimate:
    parameters: int
    gradients: int
    optimizer_state: int
    activations: int

    @property
    def total(self) -> int:
        return self.parameters + self.gradients + self.optimizer_state + self.activations


def training_memory(
    config: ModelConfig, batch_size: int = 1, seq_len: int | None = None, bytes_per_value: int = 4
) -> MemoryEstimate:
    """Bytes for parameters, gradients, AdamW's two moments and activations."""
    num_parameters = sum(parameter_counts(config).values())
    return MemoryEstimate(
        parameters=num_parameters * bytes_per_value,
        gradients=num_parameters * bytes_per_value,
        optimizer_state=2 * num_parameters * bytes_per_value,
        activations=sum(activation_counts(config, batch_size, seq_len).values()) * bytes_per_value,
    )


def max_batch_size(config: ModelConfig, memory_bytes: float, bytes_per_value: int = 4) -> int:
    """The largest batch whose estimated training memory fits in ``memory_bytes``."""
    fixed = training_memory(config, 0, bytes_per_value=bytes_per_value).total
    per_sequence = training_memory(config, 1, bytes_per_value=bytes_per_value).activations
    return max(0, int((memory_bytes - fixed) // per_sequence))


def model_flops_utilization(
    config: ModelConfig, tokens_per_second: float, peak_flops_per_second: float, seq_len: int | None = None
) -> float:
    """MFU: achieved training FLOP/s (from measured throughput) over the hardware's peak."""
    if peak_flops_per_second <= 0:
        raise ValueError(f"peak FLOP/s must be positive; got {peak_flops_per_second}")
    return tokens_per_second * training_flops_per_token(config, seq_len) / peak_flops_per_second
