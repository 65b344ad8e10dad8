"""Training benchmark: tokens/s of our TransformerLM beside HF transformers' LlamaForCausalLM.

Both models have the TinyStories shape (vocab 10,000, context 256, d_model 512, 4 layers,
16 heads, SwiGLU d_ff 1344, RoPE theta 10,000, untied embeddings, no biases); the Llama is
built locally from a ``LlamaConfig`` (nothing is downloaded). A step is forward, float32
cross-entropy over the same token batch, backward and an AdamW update: ours with our AdamW,
the peer with ``torch.optim.AdamW`` (its defaults). Contenders alternate (harness.interleaved);
medians and spreads are reported, with MFU against the machine's measured matmul peak.

    uv run python -m benchmarks.training [--batch-size 8] [--steps 3] [--repeats 5] [--json out.json]
    uv run python -m benchmarks.training --smoke
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import torch
import torch.nn.functional as F

from benchmarks.harness import format_table, interleaved, machine, matmul_peak_flops, write_json
from cs336_basics.accounting import PRESETS, model_flops_utilization
from cs336_basics.adamw import AdamW
from cs336_basics.config import ModelConfig
from cs336_basics.losses import cross_entropy
from cs336_basics.model import TransformerLM

TINY = ModelConfig(vocab_size=256, context_length=32, d_model=32, num_layers=2, num_heads=2, d_ff=64)


def llama_like(config: ModelConfig, attn_implementation: str = "sdpa") -> torch.nn.Module:
    """A randomly initialised ``LlamaForCausalLM`` with exactly our model's shape."""
    from transformers import LlamaConfig, LlamaForCausalLM

    hf_config = LlamaConfig(
        vocab_size=config.vocab_size, hidden_size=config.d_model, intermediate_size=config.d_ff,
        num_hidden_layers=config.num_layers, num_attention_heads=config.num_heads,
        num_key_value_heads=config.num_heads, max_position_embeddings=config.context_length,
        rope_theta=config.rope_theta, rms_norm_eps=config.norm_eps, tie_word_embeddings=False,
        attention_bias=False, mlp_bias=False, attn_implementation=attn_implementation,
    )
    return LlamaForCausalLM(hf_config)


def benchmark(config: ModelConfig = PRESETS["tinystories"], batch_size: int = 8, steps: int = 3,
              repeats: int = 5, log=print) -> dict[str, Any]:
    torch.manual_seed(0)
    ours = TransformerLM(config)
    peer = llama_like(config)
    ours_parameters = sum(p.numel() for p in ours.parameters())
    peer_parameters = sum(p.numel() for p in peer.parameters())
    if ours_parameters != peer_parameters:
        raise RuntimeError(f"shapes differ: ours has {ours_parameters} parameters, Llama {peer_parameters}")
    ours_optimizer = AdamW(ours.parameters(), lr=1e-4)
    peer_optimizer = torch.optim.AdamW(peer.parameters(), lr=1e-4)
    tokens = torch.randint(0, config.vocab_size, (batch_size, config.context_length + 1))
    inputs, targets = tokens[:, :-1], tokens[:, 1:]

    def ours_steps() -> None:
        for _ in range(steps):
            loss = cross_entropy(ours(inputs), targets)
            ours_optimizer.zero_grad(set_to_none=True)
            loss.backward()
            ours_optimizer.step()

    def peer_steps() -> None:
        for _ in range(steps):
            logits = peer(input_ids=inputs).logits
            loss = F.cross_entropy(logits.float().reshape(-1, config.vocab_size), targets.reshape(-1))
            peer_optimizer.zero_grad(set_to_none=True)
            loss.backward()
            peer_optimizer.step()

    log(f"training: batch {batch_size} x {config.context_length} tokens, {steps} steps per round, "
        f"{repeats} rounds, {ours_parameters:,} parameters, {torch.get_num_threads()} threads")
    timings = interleaved({"ours": ours_steps, "HF Llama": peer_steps}, repeats)
    tokens_per_round = batch_size * config.context_length * steps
    ours_rate = tokens_per_round / timings["ours"].median
    peer_rate = tokens_per_round / timings["HF Llama"].median
    peak = matmul_peak_flops()
    row = {
        "benchmark": "training tokens/s",
        "input": f"TinyStories shape, batch {batch_size}x{config.context_length}",
        "ours": f"{ours_rate:,.0f} tok/s (MFU {100 * model_flops_utilization(config, ours_rate, peak):.0f}%)",
        "peer": f"{peer_rate:,.0f} tok/s (HF LlamaForCausalLM, sdpa)",
        "speed ours/peer": f"{ours_rate / peer_rate:.2f}x",
        "ratio": ours_rate / peer_rate,
        "target": 0.8,
        "spread s (ours; peer)": f"{timings['ours'].low:.2f}-{timings['ours'].high:.2f}; "
                                 f"{timings['HF Llama'].low:.2f}-{timings['HF Llama'].high:.2f}",
    }
    return {
        "config": config.to_dict(), "batch_size": batch_size, "steps_per_round": steps,
        "ours_tokens_per_s": ours_rate, "peer_tokens_per_s": peer_rate, "ratio": ours_rate / peer_rate,
        "matmul_peak_flops": peak, "timings": timings, "rows": [row],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--steps", type=int, default=3, help="optimizer steps per timed round")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved rounds per contender")
    parser.add_argument("--smoke", action="store_true", help="a tiny model, one round: checks the script runs")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args(argv)
    if args.smoke:
        report = benchmark(TINY, batch_size=2, steps=1, repeats=1)
    else:
        report = benchmark(batch_size=args.batch_size, steps=args.steps, repeats=args.repeats)
    print(format_table(report["rows"], list(report["rows"][0])))
    if args.json:
        write_json(args.json, {"machine": machine(), "training": report, "rows": report["rows"]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
