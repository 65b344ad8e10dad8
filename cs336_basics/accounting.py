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
GQA/MQA, QK-norm, biases, tied embeddings, two-matrix MLPs, learned positions). Mixtures of
experts and latent attention are accounted for as a dense model whose ``ffn`` / attention
entries are then replaced: an MoE layer costs the router plus ``top_k`` experts per token
(assuming none is dropped) but holds all ``num_experts``; MLA is counted along its training
path, which expands keys and values from the latent (cached decoding folds them instead).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from cs336_basics.config import ModelConfig
from cs336_basics.kv_cache import kv_cache_elements_per_token

PRESETS: dict[str, ModelConfig] = {
    # GPT-2 shapes with the handout's architecture (SwiGLU, d_ff = 4 d_model), vocab 50,257.
    "gpt2-small": ModelConfig(50257, 1024, 768, 12, 12, 3072),
    "gpt2-medium": ModelConfig(50257, 1024, 1024, 24, 16, 4096),
    "gpt2-large": ModelConfig(50257, 1024, 1280, 36, 20, 5120),
    "gpt2-xl": ModelConfig(50257, 1024, 1600, 48, 25, 6400),
    # The handout's TinyStories model.
    "tinystories": ModelConfig(10000, 256, 512, 4, 16, 1344, rope_theta=10000.0),
}


def _is_variant(config: ModelConfig) -> bool:
    return config.ffn == "moe" or config.attention == "mla"


def _dense_mha(config: ModelConfig) -> ModelConfig:
    """The same model with one dense SwiGLU per layer and plain attention: the base whose
    accounting the MoE and MLA entries then replace."""
    return dataclasses.replace(
        config,
        ffn="swiglu" if config.ffn == "moe" else config.ffn,
        attention="mha",
        position_encoding="none" if config.attention == "mla" else config.position_encoding,
    )


def _mla_query_width(config: ModelConfig) -> int:
    return config.num_heads * (config.mla_nope_dim + config.qk_rope_head_dim)


def _mla_projection_sizes(config: ModelConfig) -> dict[str, int]:
    """Weight count of each MLA projection (each weight is used once per token)."""
    d, h, r = config.d_model, config.num_heads, config.kv_lora_rank
    q = _mla_query_width(config)
    sizes = (
        {"q_proj": d * q}
        if config.q_lora_rank is None
        else {"q_down_proj": d * config.q_lora_rank, "q_up_proj": config.q_lora_rank * q}
    )
    return sizes | {
        "kv_down_proj": d * r,
        "k_rope_proj": d * config.qk_rope_head_dim,
        "k_up_proj": r * h * config.mla_nope_dim,
        "v_up_proj": r * h * config.mla_v_dim,
        "output_proj": h * config.mla_v_dim * d,
    }


def _variant_parameter_counts(config: ModelConfig) -> dict[str, int]:
    counts = parameter_counts(_dense_mha(config))
    layers, d = config.num_layers, config.d_model
    if config.attention == "mla":
        norms = config.kv_lora_rank + (config.q_lora_rank or 0)  # kv_norm and q_norm gains
        counts["attention"] = layers * (sum(_mla_projection_sizes(config).values()) + norms)
    if config.ffn == "moe":
        counts["ffn"] = layers * config.num_experts * 3 * d * config.d_ff
        counts["router"] = layers * config.num_experts * d
    return counts


def _variant_forward_flops(config: ModelConfig, batch_size: int, seq_len: int) -> dict[str, int]:
    flops = forward_flops(_dense_mha(config), batch_size, seq_len)
    layers, tokens, d = config.num_layers, batch_size * seq_len, config.d_model
    if config.attention == "mla":
        for name in (
            "q_proj",
            "k_proj",
            "v_proj",
            "output_proj",
            "attention_scores",
            "attention_values",
        ):
            del flops[name]
        per_layer = {
            name: 2 * tokens * size for name, size in _mla_projection_sizes(config).items()
        }
        pairs = batch_size * seq_len * seq_len * config.num_heads
        per_layer["attention_scores"] = 2 * pairs * (config.mla_nope_dim + config.qk_rope_head_dim)
        per_layer["attention_values"] = 2 * pairs * config.mla_v_dim
        flops |= {name: layers * value for name, value in per_layer.items()}
    if config.ffn == "moe":
        flops["ffn"] = layers * 2 * tokens * config.top_k * 3 * d * config.d_ff
        flops["router"] = layers * 2 * tokens * d * config.num_experts
    return flops


def _variant_activation_counts(
    config: ModelConfig, batch_size: int, seq_len: int
) -> dict[str, int]:
    counts = activation_counts(_dense_mha(config), batch_size, seq_len)
    layers, tokens = config.num_layers, batch_size * seq_len
    if config.attention == "mla":
        h = config.num_heads
        latents = config.kv_lora_rank + config.qk_rope_head_dim + (config.q_lora_rank or 0)
        expanded = _mla_query_width(config) + h * (config.mla_nope_dim + config.mla_v_dim)
        counts["qkv_projections"] = layers * tokens * (latents + expanded)
        counts["attention_values"] = layers * tokens * h * config.mla_v_dim
    if config.ffn == "moe":
        routed = tokens * config.top_k
        counts["ffn"] = layers * (
            routed * (4 * config.d_ff + config.d_model) + tokens * config.num_experts
        )
    return counts


def _ffn_matrices(config: ModelConfig) -> int:
    return 3 if config.ffn == "swiglu" else 2


def _kv_width(config: ModelConfig) -> int:
    """Output width of the key (and of the value) projection."""
    return config.kv_heads * config.d_head


def parameter_counts(config: ModelConfig) -> dict[str, int]:
    """Trainable parameters by component; ``sum(...)`` equals ``model.num_parameters()``."""
    if _is_variant(config):
        return _variant_parameter_counts(config)
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
        "position_embeddings": config.context_length * d
        if config.position_encoding == "learned"
        else 0,
        "attention": config.num_layers * attention,
        "ffn": config.num_layers * ffn,
        "norms": config.num_layers * layer_norms
        + (norm_size if config.norm_placement == "pre" else 0),
        "lm_head": 0 if config.tie_embeddings else d * config.vocab_size,
    }
    return counts
    # END SOLUTION


def forward_flops(
    config: ModelConfig, batch_size: int = 1, seq_len: int | None = None
) -> dict[str, int]:
    """Matmul FLOPs of one forward pass over ``batch_size`` sequences of ``seq_len`` tokens,
    by component (summed over layers)."""
    T = config.context_length if seq_len is None else seq_len
    if _is_variant(config):
        return _variant_forward_flops(config, batch_size, T)
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


def activation_counts(
    config: ModelConfig, batch_size: int = 1, seq_len: int | None = None
) -> dict[str, int]:
    """Values kept for the backward pass, by component, after the handout's itemisation."""
    T = config.context_length if seq_len is None else seq_len
    if _is_variant(config):
        return _variant_activation_counts(config, batch_size, T)
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


def kv_cache_bytes(
    config: ModelConfig, batch_size: int = 1, seq_len: int | None = None, bytes_per_value: int = 4
) -> int:
    """Bytes a KV cache holds for ``batch_size`` sequences of ``seq_len`` tokens: MHA keeps a
    key and a value per head, GQA/MQA per shared head, MLA one latent plus one RoPE key."""
    T = config.context_length if seq_len is None else seq_len
    return batch_size * T * kv_cache_elements_per_token(config) * bytes_per_value


def max_batch_size(config: ModelConfig, memory_bytes: float, bytes_per_value: int = 4) -> int:
    """The largest batch whose estimated training memory fits in ``memory_bytes``."""
    fixed = training_memory(config, 0, bytes_per_value=bytes_per_value).total
    per_sequence = training_memory(config, 1, bytes_per_value=bytes_per_value).activations
    return max(0, int((memory_bytes - fixed) // per_sequence))


def model_flops_utilization(
    config: ModelConfig,
    tokens_per_second: float,
    peak_flops_per_second: float,
    seq_len: int | None = None,
) -> float:
    """MFU: achieved training FLOP/s (from measured throughput) over the hardware's peak."""
    if peak_flops_per_second <= 0:
        raise ValueError(f"peak FLOP/s must be positive; got {peak_flops_per_second}")
    return tokens_per_second * training_flops_per_token(config, seq_len) / peak_flops_per_second


def measure_training_throughput(
    config: ModelConfig,
    batch_size: int,
    steps: int = 3,
    device: str = "cpu",
    seq_len: int | None = None,
) -> float:
    """Training tokens/s of a randomly initialised model on ``device``: forward, loss, backward
    and an AdamW step on random tokens, timed over ``steps`` steps after one warm-up step."""
    import time

    import torch

    from cs336_basics.adamw import AdamW
    from cs336_basics.losses import cross_entropy
    from cs336_basics.model import TransformerLM

    T = config.context_length if seq_len is None else seq_len
    model = TransformerLM(config, device=device)
    optimizer = AdamW(model.parameters())
    tokens = torch.randint(0, config.vocab_size, (batch_size, T + 1), device=device)

    def step() -> None:
        loss = cross_entropy(model(tokens[:, :-1]), tokens[:, 1:])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    step()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(steps):
        step()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return steps * batch_size * T / (time.perf_counter() - started)
