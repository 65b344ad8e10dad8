"""Resource accounting for a ``ModelConfig``: parameters, memory, FLOPs and MFU, on paper.

Conventions:

- FLOPs count matrix multiplies only (``2 m n k`` for an ``(m, k) @ (k, n)`` product); norms,
  activations, softmax and RoPE are lower order. Attention scores are counted over the full
  ``T x T`` matrix, as plain causal attention computes them (masking wastes half).
- Training costs three forward passes' worth: the backward pass computes gradients with
  respect to both activations and weights, two matmuls for every forward one.
- Memory is in bytes for ``bytes_per_value``-byte values (4 for float32). Activations follow
  the handout's itemisation of what the backward pass needs per layer; a real autograd graph
  saves somewhat different tensors, so treat it as an estimate.

The functions account for the handout's architecture.
"""

from __future__ import annotations

from dataclasses import dataclass

from cs336_basics.config import ModelConfig
from cs336_basics.registry import Accounting, model_kind_of

PRESETS: dict[str, ModelConfig] = {
    # GPT-2 shapes with the handout's architecture (SwiGLU, d_ff = 4 d_model), vocab 50,257.
    "gpt2-small": ModelConfig(50257, 1024, 768, 12, 12, 3072),
    "gpt2-medium": ModelConfig(50257, 1024, 1024, 24, 16, 4096),
    "gpt2-large": ModelConfig(50257, 1024, 1280, 36, 20, 5120),
    "gpt2-xl": ModelConfig(50257, 1024, 1600, 48, 25, 6400),
    # The handout's TinyStories model.
    "tinystories": ModelConfig(10000, 256, 512, 4, 16, 1344, rope_theta=10000.0),
}


def _extension_accounting(config: ModelConfig) -> Accounting | None:
    """The accounting an extension registered for ``config``'s class (an architecture variant's);
    ``None`` for the handout's ``ModelConfig``, which the functions below account for."""
    kind = model_kind_of(config)
    return kind.accounting if kind else None


def parameter_counts(config: ModelConfig) -> dict[str, int]:
    """Trainable parameters by component; ``sum(...)`` equals ``model.num_parameters()``."""
    if extension := _extension_accounting(config):
        return extension.parameter_counts(config)
    # BEGIN SOLUTION
    d, d_ff = config.d_model, config.d_ff
    return {
        "token_embeddings": config.vocab_size * d,
        "attention": config.num_layers * 4 * d * d,
        "ffn": config.num_layers * 3 * d * d_ff,
        "norms": config.num_layers * 2 * d + d,  # ln1 and ln2 per layer, then ln_final
        "lm_head": d * config.vocab_size,
    }
    # END SOLUTION


def forward_flops(
    config: ModelConfig, batch_size: int = 1, seq_len: int | None = None
) -> dict[str, int]:
    """Matmul FLOPs of one forward pass over ``batch_size`` sequences of ``seq_len`` tokens,
    by component (summed over layers)."""
    T = config.context_length if seq_len is None else seq_len
    if extension := _extension_accounting(config):
        return extension.forward_flops(config, batch_size, T)
    tokens = batch_size * T
    d, layers = config.d_model, config.num_layers
    # BEGIN SOLUTION
    flops = {
        "q_proj": 2 * tokens * d * d,
        "k_proj": 2 * tokens * d * d,
        "v_proj": 2 * tokens * d * d,
        "output_proj": 2 * tokens * d * d,
        "attention_scores": 2 * batch_size * T * T * d,  # Q K^T: every head, every (query, key)
        "attention_values": 2 * batch_size * T * T * d,  # softmax(...) V
        "ffn": 2 * tokens * d * config.d_ff * 3,
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
    if extension := _extension_accounting(config):
        return extension.activation_counts(config, batch_size, T)
    tokens, d, h, d_ff = batch_size * T, config.d_model, config.num_heads, config.d_ff
    per_layer = {
        "norms": 2 * tokens * d,
        "qkv_projections": tokens * 3 * d,
        "attention_scores": batch_size * h * T * T,
        "attention_softmax": batch_size * h * T * T,
        "attention_values": tokens * d,
        "output_proj": tokens * d,
        # W1 x and its SiLU, W3 x and the gate product, then W2's output
        "ffn": tokens * d_ff * 4 + tokens * d,
    }
    counts = {name: config.num_layers * value for name, value in per_layer.items()}
    counts["final_norm"] = tokens * d
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
    if extension := _extension_accounting(config):
        per_token = extension.kv_cache_elements_per_token(config)
    else:
        per_token = config.num_layers * 2 * config.d_model  # a key and a value per head
    return batch_size * T * per_token * bytes_per_value


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
    from cs336_basics.builder import build_model
    from cs336_basics.losses import cross_entropy

    T = config.context_length if seq_len is None else seq_len
    model = build_model(config, device=device)
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
