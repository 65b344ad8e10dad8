"""Generation benchmark on the CPU: tokens/s of greedy decoding at batch 1 over a static
(preallocated) KV cache, the growing KV cache and no cache, and HF ``generate`` on the same model;
and the throughput of ``generate_batch`` at batch 64 over batch 1.

The model has the TinyStories shape (d_model 512, 4 layers, 16 heads, d_ff 1344, vocab 10,000)
with random weights; the context is widened to 512 so a 16-token prompt plus 256 new tokens fit.
Without the cache every step re-runs the whole sequence, so its cost grows with the length;
with it a step runs one position. The static cache writes in place into buffers of the
context's size (512 slots, masked), where the growing one concatenates. HF's
``LlamaForCausalLM`` gets our weights (``to_hf``), so it computes the same function. Our three
must produce the same tokens; HF's are reported as equal or not (float32 rounding in another
order may flip a near-tie). The batch runs 64 different prompts of the same length, in lockstep
over growing KV caches; its first row must equal the batch-1 tokens of the same prompt.

    uv run python -m benchmarks.generation
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import torch

from benchmarks.harness import Timing, format_table, interleaved, machine, write_json
from benchmarks.training import llama_like
from cs336_basics.config import ModelConfig
from cs336_basics.generation import generate
from cs336_basics.variants.builders import build_variant_model
from cs336_basics.variants.config import VariantConfig
from cs336_basics.variants.decoding.generation import generate_batch, generate_cached
from cs336_basics.variants.hf.convert import to_hf

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
    batch: int = 64,
    repeats: int = 3,
    log=print,
) -> dict[str, Any]:
    torch.manual_seed(0)
    variant = VariantConfig(**config.to_dict())
    model = build_variant_model(variant).eval()
    peer = llama_like(config, "sdpa").eval()
    peer.load_state_dict(to_hf(model.state_dict(), variant, "llama"))
    prompts = torch.randint(1, config.vocab_size, (batch, prompt_length)).tolist()
    prompt = prompts[0]
    outputs: dict[str, list] = {}
    decoders = {
        "static cache": lambda n: generate_cached(model, prompt, n, 0.0, static_cache=True),
        "KV cache": lambda n: generate_cached(model, prompt, n, 0.0),
        "no cache": lambda n: generate(model, prompt, n, 0.0),
        "HF generate": lambda n: _hf_generate(peer, prompt, n),
        f"batch {batch}": lambda n: generate_batch(model, prompts, n, 0.0),
    }

    def timed(name: str):
        def decode() -> None:
            outputs[name] = decoders[name](new_tokens)

        return decode

    log(f"generation: {new_tokens} new tokens after {prompt_length}, {repeats} repeats")
    for decode in decoders.values():  # warm-up: a few steps suffice, a full uncached run is long
        decode(4)
    timings = interleaved({name: timed(name) for name in decoders}, repeats, warmup=0)
    ours = [outputs[name] for name in ("static cache", "KV cache", "no cache")]
    if any(tokens != ours[0] for tokens in ours) or len(ours[0]) != new_tokens:
        raise RuntimeError("greedy decoding with the static, the growing and no KV cache disagree")
    if outputs[f"batch {batch}"][0] != ours[0]:
        raise RuntimeError(f"the first row of batch {batch} differs from decoding it alone")
    same_as_hf = outputs["HF generate"] == ours[0]
    rows = [
        _row(new_tokens, config, timings, "static cache", "KV cache", None),
        _row(new_tokens, config, timings, "KV cache", "no cache", 5.0),
        _row(new_tokens, config, timings, "static cache", "HF generate", None),
    ]
    rows[-1]["peer"] += f", same tokens: {'yes' if same_as_hf else 'no'}"
    rows.append(_batch_row(new_tokens, config, timings, batch))
    return {
        "config": config.to_dict(),
        "new_tokens": new_tokens,
        "prompt_length": prompt_length,
        "timings": timings,
        "same_tokens_as_hf": same_as_hf,
        "rows": rows,
    }


@torch.no_grad()
def _hf_generate(peer: torch.nn.Module, prompt: list[int], new_tokens: int) -> list[int]:
    ids = torch.tensor([prompt])
    out = peer.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        max_new_tokens=new_tokens,
        min_new_tokens=new_tokens,
        do_sample=False,
        pad_token_id=0,
    )
    return out[0, len(prompt) :].tolist()


def _row(
    new_tokens: int,
    config: ModelConfig,
    timings: dict[str, Timing],
    ours: str,
    peer: str,
    target: float | None,
) -> dict[str, Any]:
    mine, theirs = timings[ours], timings[peer]
    row = {
        "benchmark": f"generate {new_tokens} tokens, batch 1",
        "input": f"d_model {config.d_model}, {config.num_layers} layers",
        "ours": f"{new_tokens / mine.median:.1f} tok/s ({ours})",
        "peer": f"{new_tokens / theirs.median:.1f} tok/s ({peer})",
        "speed ours/peer": f"{theirs.median / mine.median:.2f}x",
        "ratio": theirs.median / mine.median,
        "spread s (ours; peer)": f"{mine.low:.2f}-{mine.high:.2f}; {theirs.low:.2f}-{theirs.high:.2f}",
    }
    if target is not None:
        row["target"] = target
    return row


def _batch_row(
    new_tokens: int, config: ModelConfig, timings: dict[str, Timing], batch: int
) -> dict[str, Any]:
    """Tokens/s of all rows of the batch over tokens/s of one prompt alone (the KV cache)."""
    batched, alone = timings[f"batch {batch}"], timings["KV cache"]
    ratio = batch * alone.median / batched.median
    return {
        "benchmark": f"generate {new_tokens} tokens, batch {batch}",
        "input": f"d_model {config.d_model}, {config.num_layers} layers",
        "ours": f"{batch * new_tokens / batched.median:.1f} tok/s (batch {batch}, KV cache)",
        "peer": f"{new_tokens / alone.median:.1f} tok/s (ours, batch 1, KV cache)",
        "speed ours/peer": f"{ratio:.2f}x",
        "ratio": ratio,
        "spread s (ours; peer)": f"{batched.low:.2f}-{batched.high:.2f}; {alone.low:.2f}-{alone.high:.2f}",
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
