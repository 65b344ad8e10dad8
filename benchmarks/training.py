"""Training benchmark: tokens/s of our TransformerLM beside HF transformers' LlamaForCausalLM.

Both models have the TinyStories shape (vocab 10,000, context 256, d_model 512, 4 layers,
16 heads, SwiGLU d_ff 1344, RoPE theta 10,000, untied embeddings, no biases); the Llama is
built locally from a ``LlamaConfig`` (nothing is downloaded). A step is forward, float32
cross-entropy over the same token batch, backward and an AdamW update: ours with our AdamW,
the peer with ``torch.optim.AdamW`` (its defaults). Contenders alternate (harness.interleaved);
medians and spreads are reported, with MFU against the machine's measured matmul peak.
Ours runs twice: with the reference attention (the handout's code) and with
``fused_attention=True`` (PyTorch's fused kernel, as the Llama's sdpa uses). ``--eager`` adds
the Llama with eager attention, ``--compile`` both models under ``torch.compile`` (ours with
the fused kernel; compiled in the warm-up round, so compilation is not timed).

    uv run python -m benchmarks.training [--batch-size 8] [--steps 3] [--repeats 5] [--eager] [--compile] [--json out.json]
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
from cs336_basics.builder import build_model
from cs336_basics.config import ModelConfig
from cs336_basics.losses import cross_entropy
from cs336_basics.variants.builders import build_variant_model
from cs336_basics.variants.config import AttentionConfig, VariantConfig

TINY = ModelConfig(
    vocab_size=256, context_length=32, d_model=32, num_layers=2, num_heads=2, d_ff=64
)


def llama_like(config: ModelConfig, attn_implementation: str = "sdpa") -> torch.nn.Module:
    """A randomly initialised ``LlamaForCausalLM`` with exactly our model's shape."""
    from transformers import LlamaConfig, LlamaForCausalLM

    hf_config = LlamaConfig(
        vocab_size=config.vocab_size,
        hidden_size=config.d_model,
        intermediate_size=config.d_ff,
        num_hidden_layers=config.num_layers,
        num_attention_heads=config.num_heads,
        num_key_value_heads=config.num_heads,
        max_position_embeddings=config.context_length,
        rope_theta=config.rope_theta,
        rms_norm_eps=config.norm_eps,
        tie_word_embeddings=False,
        attention_bias=False,
        mlp_bias=False,
        attn_implementation=attn_implementation,
    )
    return LlamaForCausalLM(hf_config)


def benchmark(
    config: ModelConfig = PRESETS["tinystories"],
    batch_size: int = 8,
    steps: int = 3,
    repeats: int = 5,
    eager: bool = False,
    compile: bool = False,
    log=print,
) -> dict[str, Any]:
    torch.manual_seed(0)
    tokens = torch.randint(0, config.vocab_size, (batch_size, config.context_length + 1))
    inputs, targets = tokens[:, :-1], tokens[:, 1:]

    def ours_steps(compiled: bool, fused: bool = False):
        # The handout's model, or the variant with the fused attention kernel (same weights).
        variant = VariantConfig(**config.to_dict(), attention=AttentionConfig(fused_attention=True))
        model = build_variant_model(variant) if fused else build_model(config)
        optimizer = AdamW(model.parameters(), lr=1e-4)
        forward = torch.compile(model) if compiled else model

        def run() -> None:
            for _ in range(steps):
                loss = cross_entropy(forward(inputs), targets)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()

        return model, run

    def peer_steps(attention: str, compiled: bool):
        model = llama_like(config, attention)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        forward = torch.compile(model) if compiled else model

        def run() -> None:
            for _ in range(steps):
                logits = forward(input_ids=inputs).logits
                loss = F.cross_entropy(
                    logits.float().reshape(-1, config.vocab_size), targets.reshape(-1)
                )
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()

        return model, run

    # name: (ours or peer, its baseline for the ratio)
    contenders = {
        "ours": ours_steps(False),
        "ours fused attention": ours_steps(False, fused=True),
        "HF Llama sdpa": peer_steps("sdpa", False),
    }
    pairs = [("ours", "HF Llama sdpa"), ("ours fused attention", "HF Llama sdpa")]
    if eager:
        contenders["HF Llama eager"] = peer_steps("eager", False)
        pairs.append(("ours", "HF Llama eager"))
    if compile:
        contenders["ours compiled"] = ours_steps(True, fused=True)
        contenders["HF Llama sdpa compiled"] = peer_steps("sdpa", True)
        pairs.append(("ours compiled", "HF Llama sdpa compiled"))
    sizes = {
        name: sum(p.numel() for p in model.parameters()) for name, (model, _) in contenders.items()
    }
    if len(set(sizes.values())) != 1:
        raise RuntimeError(f"shapes differ: parameters {sizes}")
    ours_parameters = sizes["ours"]

    log(
        f"training: batch {batch_size} x {config.context_length} tokens, {steps} steps per round, "
        f"{repeats} rounds, {ours_parameters:,} parameters, {torch.get_num_threads()} threads, "
        f"contenders {', '.join(contenders)}"
    )
    timings = interleaved({name: run for name, (_, run) in contenders.items()}, repeats)
    tokens_per_round = batch_size * config.context_length * steps
    rates = {name: tokens_per_round / timing.median for name, timing in timings.items()}
    peak = matmul_peak_flops()
    mfu = {name: model_flops_utilization(config, rate, peak) for name, rate in rates.items()}
    rows = []
    for ours_name, peer_name in pairs:
        ours_rate, peer_rate = rates[ours_name], rates[peer_name]
        rows.append(
            {
                "benchmark": "training tokens/s"
                + ours_name.removeprefix("ours").replace(" ", ", ", 1),
                "input": f"TinyStories shape, batch {batch_size}x{config.context_length}",
                "ours": f"{ours_rate:,.0f} tok/s (MFU {100 * mfu[ours_name]:.0f}%)",
                "peer": f"{peer_rate:,.0f} tok/s ({peer_name}, MFU {100 * mfu[peer_name]:.0f}%)",
                "speed ours/peer": f"{ours_rate / peer_rate:.2f}x",
                "ratio": ours_rate / peer_rate,
                "target": 1.0,
                "spread s (ours; peer)": f"{timings[ours_name].low:.2f}-{timings[ours_name].high:.2f}; "
                f"{timings[peer_name].low:.2f}-{timings[peer_name].high:.2f}",
            }
        )
    best = max((name for name in rates if not name.startswith("HF")), key=rates.get)
    rows.append(
        {
            "benchmark": "training MFU",
            "input": f"matmul peak {peak / 1e9:.1f} GFLOP/s (same run)",
            "ours": f"{100 * mfu[best]:.0f}% ({best})",
            "peer": "the float32 matmul peak",
            "speed ours/peer": f"{mfu[best]:.2f}x",
            "ratio": mfu[best],
            "target": 0.85,
        }
    )
    return {
        "config": config.to_dict(),
        "batch_size": batch_size,
        "steps_per_round": steps,
        "tokens_per_s": rates,
        "mfu": mfu,
        "ours_tokens_per_s": rates["ours"],
        "peer_tokens_per_s": rates["HF Llama sdpa"],
        "ratio": rates["ours"] / rates["HF Llama sdpa"],
        "matmul_peak_flops": peak,
        "timings": timings,
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--steps", type=int, default=3, help="optimizer steps per timed round")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved rounds per contender")
    parser.add_argument("--eager", action="store_true", help="also the Llama with eager attention")
    parser.add_argument(
        "--compile", action="store_true", help="also both models under torch.compile"
    )
    parser.add_argument(
        "--smoke", action="store_true", help="a tiny model, one round: checks the script runs"
    )
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args(argv)
    if args.smoke:
        report = benchmark(
            TINY, batch_size=2, steps=1, repeats=1, eager=args.eager, compile=args.compile
        )
    else:
        report = benchmark(
            batch_size=args.batch_size,
            steps=args.steps,
            repeats=args.repeats,
            eager=args.eager,
            compile=args.compile,
        )
    print(format_table(report["rows"], list(report["rows"][0])))
    if args.json:
        write_json(args.json, {"machine": machine(), "training": report, "rows": report["rows"]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
