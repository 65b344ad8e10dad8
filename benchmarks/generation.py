"""Generation benchmark: tokens/s of greedy decoding with the KV cache against without it.

The model has the TinyStories shape (d_model 512, 4 layers, 16 heads, d_ff 1344, vocab 10,000)
with random weights; the context is widened to 512 so a 16-token prompt plus 256 new tokens fit.
Without the cache every step re-runs the whole sequence, so its cost grows with the length;
with it a step runs one position. Both must produce the same tokens.

    uv run python -m benchmarks.generation
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import torch

from benchmarks.harness import format_table, interleaved, machine, write_json
from cs336_basics.builder import build_model
from cs336_basics.config import ModelConfig
from cs336_basics.generation import generate
from cs336_basics.variants.config import VariantConfig
from cs336_basics.variants.generation import generate_cached

TINYSTORIES = ModelConfig(
    vocab_size=10_000, context_length=512, d_model=512, num_layers=4, num_heads=16, d_ff=1344
)
TINY = ModelConfig(
    vocab_size=256, context_length=64, d_model=32, num_layers=2, num_heads=2, d_ff=64
)


def benchmark(
    config: ModelConfig = TINYSTORIES,
    new_tokens: int = 256,
    prompt_length: int = 16,
    repeats: int = 3,
    log=print,
) -> dict[str, Any]:
    torch.manual_seed(0)
    # A VariantConfig builds the cache-capable attention (same weights, same function).
    model = build_model(VariantConfig(**config.to_dict())).eval()
    prompt = torch.randint(config.vocab_size, (prompt_length,)).tolist()
    outputs: dict[str, list[int]] = {}

    def decoder(use_kv_cache: bool):
        def decode() -> None:
            decode = generate_cached if use_kv_cache else generate
            outputs[str(use_kv_cache)] = decode(model, prompt, new_tokens, temperature=0)

        return decode

    log(f"generation: {new_tokens} new tokens after {prompt_length}, {repeats} repeats")
    for use_kv_cache in (True, False):  # warm-up: a few steps suffice, a full uncached run is long
        (generate_cached if use_kv_cache else generate)(model, prompt, 4, temperature=0)
    timings = interleaved(
        {"KV cache": decoder(True), "no cache": decoder(False)}, repeats, warmup=0
    )
    if outputs["True"] != outputs["False"] or len(outputs["True"]) != new_tokens:
        raise RuntimeError("greedy decoding with and without the KV cache disagree")
    cached, uncached = timings["KV cache"], timings["no cache"]
    row = {
        "benchmark": f"generate {new_tokens} tokens",
        "input": f"d_model {config.d_model}, {config.num_layers} layers",
        "ours": f"{new_tokens / cached.median:.1f} tok/s (KV cache)",
        "peer": f"{new_tokens / uncached.median:.1f} tok/s (ours, no cache)",
        "speed ours/peer": f"{uncached.median / cached.median:.2f}x",
        "ratio": uncached.median / cached.median,
        "target": 5.0,
        "spread s (ours; peer)": f"{cached.low:.2f}-{cached.high:.2f}; {uncached.low:.2f}-{uncached.high:.2f}",
    }
    return {
        "config": config.to_dict(),
        "new_tokens": new_tokens,
        "prompt_length": prompt_length,
        "cached": cached,
        "uncached": uncached,
        "rows": [row],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args(argv)
    report = benchmark(new_tokens=args.new_tokens, repeats=args.repeats)
    print(format_table(report["rows"], list(report["rows"][0])))
    if args.json:
        write_json(args.json, {"machine": machine(), "generation": report})
    return 0


if __name__ == "__main__":
    sys.exit(main())
