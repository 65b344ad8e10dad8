"""GPU benchmark: training steps, the real training loop and generation on one CUDA device,
each beside HF transformers' ``LlamaForCausalLM`` of the same shape in the same run.

* **train step** at the TinyStories shape (batch 128 x 256, the handout's 17M model) and the
  GPT-2-small shape (batch 16 x 1024), bf16 autocast: ours (fused attention) eager, compiled,
  and compiled with the multi-tensor ``ForeachAdamW``, against the Llama eager (sdpa),
  compiled, and compiled with ``torch.optim.AdamW(fused=True)``. MFU is against the device's
  dense bf16 peak from ``BF16_PEAK_FLOPS`` ("unknown" for a device not in the table).
* **loop vs step**: ``cs336_basics.training.train`` (compiled, ``adamw_foreach``) on random
  tokens at the TinyStories shape, its logged tokens/s over the same model's step-only rate.
* **generation**: greedy decoding of 256 new tokens after 16 at batch 1 (``generate_cached``)
  and batch 64 (``generate_batch``; batch 4 in the smoke run) against HF ``generate`` at the same
  batch sizes. Ours decodes over static (preallocated) KV caches with the single-token step
  compiled by ``torch.compile(mode="reduce-overhead")``, i.e. replayed as a CUDA graph.

Without CUDA the section is skipped with one printed line. ``--smoke`` runs every code path
on the CPU with tiny shapes, ``torch.compile(backend="eager")`` and float32, timing nothing
that matters: it exists so CI covers this file.

    uv run python -m benchmarks.gpu [--repeats 3] [--json out.json]
    uv run python -m benchmarks.gpu --smoke
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from benchmarks.harness import format_table, interleaved, machine, write_json
from benchmarks.training import llama_like
from cs336_basics.accounting import PRESETS, model_flops_utilization
from cs336_basics.adamw import AdamW
from cs336_basics.config import ModelConfig
from cs336_basics.losses import cross_entropy
from cs336_basics.variants.builders import build_variant_model
from cs336_basics.variants.config import AttentionConfig, VariantConfig
from cs336_basics.variants.decoding.generation import generate_batch, generate_cached
from cs336_basics.variants.foreach_adamw import ForeachAdamW

# Dense bf16 tensor-core peaks (FLOP/s) from the vendors' data sheets, matched by device name
# in this order (the first fragment found wins).
BF16_PEAK_FLOPS = [
    ("H100 PCIe", 756e12),
    ("H100", 989e12),
    ("H200", 989e12),
    ("GH200", 989e12),
    ("A100", 312e12),
    ("L40S", 362e12),
    ("L40", 181e12),
    ("L4", 121e12),
]


@dataclass(frozen=True)
class Shape:
    name: str
    config: ModelConfig
    batch_size: int


FULL_SHAPES = [
    Shape("TinyStories", PRESETS["tinystories"], 128),
    Shape("GPT-2 small", PRESETS["gpt2-small"], 16),
]
SMOKE_SHAPES = [
    Shape(
        "tiny",
        ModelConfig(
            vocab_size=64, context_length=16, d_model=32, num_layers=2, num_heads=2, d_ff=64
        ),
        4,
    ),
]


def bf16_peak(device: torch.device) -> float | None:
    """The device's dense bf16 peak FLOP/s, or ``None`` when it is not in the table."""
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((peak for fragment, peak in BF16_PEAK_FLOPS if fragment in name), None)


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _autocast(device: torch.device):
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


class Bench:
    """One run's device and settings, and the step functions of its contenders."""

    def __init__(self, device: torch.device, smoke: bool, steps: int, repeats: int) -> None:
        self.device, self.smoke, self.steps, self.repeats = device, smoke, steps, repeats
        # Inductor on the GPU; in the smoke run the same torch.compile path, minus code generation.
        self.backend = "eager" if smoke else "inductor"
        # the decoding step: inductor with CUDA graphs (generate_batch's compile=True)
        self.decode_compile: bool | str = "eager" if smoke else True

    def _batch(self, shape: Shape) -> tuple[torch.Tensor, torch.Tensor]:
        generator = torch.Generator().manual_seed(0)
        size = (shape.batch_size, shape.config.context_length + 1)
        tokens = torch.randint(0, shape.config.vocab_size, size, generator=generator)
        tokens = tokens.to(self.device)
        return tokens[:, :-1], tokens[:, 1:]

    def ours_step(self, shape: Shape, compiled: bool, foreach: bool):
        config = VariantConfig(
            **shape.config.to_dict(), attention=AttentionConfig(fused_attention=True)
        )
        model = build_variant_model(config, device=self.device)
        optimizer = (ForeachAdamW if foreach else AdamW)(model.parameters(), lr=1e-4)
        forward = torch.compile(model, backend=self.backend) if compiled else model
        inputs, targets = self._batch(shape)

        def loss() -> torch.Tensor:
            return cross_entropy(forward(inputs).float(), targets)

        return model, self._stepper(loss, optimizer)

    def llama_step(self, shape: Shape, compiled: bool, fused_adamw: bool):
        model = llama_like(shape.config, "sdpa").to(self.device)
        # fused=True is CUDA's one-kernel AdamW; on the CPU (smoke) torch's foreach path stands in.
        fused = fused_adamw and self.device.type == "cuda"
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=fused or None)
        forward = torch.compile(model, backend=self.backend) if compiled else model
        inputs, targets = self._batch(shape)
        vocab = shape.config.vocab_size

        def loss() -> torch.Tensor:
            logits = forward(input_ids=inputs).logits
            return F.cross_entropy(logits.float().reshape(-1, vocab), targets.reshape(-1))

        return model, self._stepper(loss, optimizer)

    def _stepper(self, loss_fn, optimizer):
        def run() -> None:
            for _ in range(self.steps):
                with _autocast(self.device):
                    loss = loss_fn()
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
            _synchronize(self.device)

        return run


# (ours, its peer): each ratio compares like with like
TRAIN_PAIRS = [
    ("ours eager", "HF Llama eager"),
    ("ours compiled", "HF Llama compiled"),
    ("ours compiled + foreach AdamW", "HF Llama compiled + fused AdamW"),
]


def train_steps(bench: Bench, shape: Shape, log) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Rows comparing train-step tokens/s at ``shape``, and every contender's rate."""
    contenders = {
        "ours eager": bench.ours_step(shape, compiled=False, foreach=False),
        "ours compiled": bench.ours_step(shape, compiled=True, foreach=False),
        "ours compiled + foreach AdamW": bench.ours_step(shape, compiled=True, foreach=True),
        "HF Llama eager": bench.llama_step(shape, compiled=False, fused_adamw=False),
        "HF Llama compiled": bench.llama_step(shape, compiled=True, fused_adamw=False),
        "HF Llama compiled + fused AdamW": bench.llama_step(shape, compiled=True, fused_adamw=True),
    }
    sizes = {
        name: sum(p.numel() for p in model.parameters()) for name, (model, _) in contenders.items()
    }
    if len(set(sizes.values())) != 1:
        raise RuntimeError(f"shapes differ: parameters {sizes}")
    log(f"gpu: train step, {shape.name} batch {shape.batch_size}x{shape.config.context_length}")
    timings = interleaved({name: run for name, (_, run) in contenders.items()}, bench.repeats)
    tokens = shape.batch_size * shape.config.context_length * bench.steps
    rates = {name: tokens / timing.median for name, timing in timings.items()}
    peak = bf16_peak(bench.device)

    def described(name: str) -> str:
        mfu = (
            "unknown"
            if peak is None
            else f"{100 * model_flops_utilization(shape.config, rates[name], peak):.0f}%"
        )
        return f"{rates[name]:,.0f} tok/s ({name}, MFU {mfu})"

    rows = [
        {
            "benchmark": f"GPU train step, {ours.removeprefix('ours ')}",
            "input": f"{shape.name}, batch {shape.batch_size}x{shape.config.context_length}",
            "ours": described(ours),
            "peer": described(peer),
            "speed ours/peer": f"{rates[ours] / rates[peer]:.2f}x",
            "ratio": rates[ours] / rates[peer],
            "target": 1.1 if peer.endswith("fused AdamW") else 1.0,
        }
        for ours, peer in TRAIN_PAIRS
    ]
    return rows, rates


def loop_vs_step(bench: Bench, shape: Shape, step_rates: dict[str, float], log) -> dict[str, Any]:
    """The trainer's logged tokens/s over the step-only rate of the same model and optimizer."""
    from cs336_basics.train_config import TrainConfig
    from cs336_basics.training import train

    compiled = not bench.smoke  # the trainer compiles with inductor: minutes on a CPU
    steps = 8 if bench.smoke else 40
    with tempfile.TemporaryDirectory() as scratch:
        count = 20_000 if bench.smoke else 2_000_000
        tokens = np.random.default_rng(0).integers(0, shape.config.vocab_size, count)
        np.save(Path(scratch) / "train.npy", tokens.astype(np.uint16))
        config = TrainConfig(
            model=VariantConfig(
                **shape.config.to_dict(), attention=AttentionConfig(fused_attention=True)
            ),
            train_data=str(Path(scratch) / "train.npy"),
            out_dir=str(Path(scratch) / "run"),
            batch_size=shape.batch_size,
            max_steps=steps,
            log_interval=steps // 4,
            checkpoint_interval=steps,
            device=str(bench.device),
            precision="bf16" if bench.device.type == "cuda" else "fp32",
            compile=compiled,
            # the optimizer of the step-only contender it is compared with
            optimizer="adamw_foreach" if compiled else "adamw",
            progress=False,
        )
        log(f"gpu: training loop, {steps} steps, compile={compiled}")
        history = train(config).history
    logged = [r["tokens_per_s"] for r in history if r["split"] == "train" and r["tokens_per_s"]]
    loop_rate = statistics.median(logged[1:])  # the first window holds the compilation
    step_name = "ours compiled + foreach AdamW" if compiled else "ours eager"
    ratio = loop_rate / step_rates[step_name]
    return {
        "benchmark": "GPU training loop / its step",
        "input": f"{shape.name}, batch {shape.batch_size}x{shape.config.context_length}",
        "ours": f"{loop_rate:,.0f} tok/s (cs336 train loop)",
        "peer": f"{step_rates[step_name]:,.0f} tok/s ({step_name}, step only)",
        "speed ours/peer": f"{ratio:.2f}x",
        "ratio": ratio,
        "target": 0.95,
    }


def generation(
    bench: Bench, config: ModelConfig, new_tokens: int, batches: tuple[int, int], log
) -> list[dict[str, Any]]:
    """Greedy decoding tokens/s at batch 1 and a large batch, ours (static KV cache, compiled
    step) against HF ``generate``, and how much the large batch multiplies ours' throughput."""
    prompt_length, wide = 16, ModelConfig(**{**config.to_dict(), "context_length": 512})
    torch.manual_seed(0)
    ours = build_variant_model(
        VariantConfig(**wide.to_dict(), attention=AttentionConfig(fused_attention=True)),
        device=bench.device,
    )
    peer = llama_like(wide, "sdpa").to(bench.device)
    rates, large = {}, batches[-1]
    for batch in batches:
        # ids from 1: HF takes a trailing 0 (its pad id here) for right padding
        prompts = torch.randint(1, wide.vocab_size, (batch, prompt_length), device=bench.device)
        log(f"gpu: generation, batch {batch}, {new_tokens} new tokens")
        decoders = _decoders(bench, ours, peer, prompts, new_tokens)
        timings = interleaved(decoders, bench.repeats)
        for name, timing in timings.items():
            rates[name, batch] = batch * new_tokens / timing.median
    rows_out = [
        _generation_row(
            f"GPU generate, batch {batch}",
            rates["ours", batch],
            f"HF generate, batch {batch}",
            rates["HF", batch],
            3.0 if batch == 1 else 1.0,
        )
        for batch in batches
    ]
    rows_out.append(
        _generation_row(
            f"GPU generate, batch {large} / batch 1",
            rates["ours", large],
            "ours, batch 1",
            rates["ours", 1],
            20.0,
        )
    )
    return rows_out


def _decoders(bench: Bench, ours, peer, prompts: torch.Tensor, new_tokens: int):
    """Greedy decoding of ``prompts`` by ours (one row: ``generate_cached``; static caches and
    the compiled step) and by HF."""
    rows = prompts.tolist()

    def ours_decode() -> None:
        with _autocast(bench.device):
            if len(rows) == 1:
                generate_cached(ours, rows[0], new_tokens, 0.0, compile=bench.decode_compile)
            else:
                generate_batch(ours, rows, new_tokens, 0.0, compile=bench.decode_compile)
        _synchronize(bench.device)

    def peer_decode() -> None:
        with _autocast(bench.device), torch.no_grad():
            peer.generate(
                prompts,
                attention_mask=torch.ones_like(prompts),
                max_new_tokens=new_tokens,
                min_new_tokens=new_tokens,
                do_sample=False,
                pad_token_id=0,
            )
        _synchronize(bench.device)

    return {"ours": ours_decode, "HF": peer_decode}


def _generation_row(benchmark: str, ours: float, peer_name: str, peer: float, target: float):
    return {
        "benchmark": benchmark,
        "input": "16 + new tokens, greedy",
        "ours": f"{ours:,.1f} tok/s",
        "peer": f"{peer:,.1f} tok/s ({peer_name})",
        "speed ours/peer": f"{ours / peer:.2f}x",
        "ratio": ours / peer,
        "target": target,
    }


def benchmark(smoke: bool = False, repeats: int = 3, log=print) -> dict[str, Any]:
    """Every GPU row, or a ``skipped`` reason when there is no CUDA device (outside ``smoke``)."""
    if not smoke and not torch.cuda.is_available():
        reason = "no CUDA device" + ("" if torch.backends.cuda.is_built() else " (CPU-only torch)")
        log(f"gpu: skipped, {reason}")
        return {"skipped": reason, "rows": []}
    device = torch.device("cuda" if torch.cuda.is_available() and not smoke else "cpu")
    bench = Bench(device, smoke, steps=1 if smoke else 5, repeats=1 if smoke else repeats)
    shapes = SMOKE_SHAPES if smoke else FULL_SHAPES
    rows, rates_by_shape = [], {}
    for shape in shapes:
        shape_rows, rates_by_shape[shape.name] = train_steps(bench, shape, log)
        rows += shape_rows
    rows.append(loop_vs_step(bench, shapes[0], rates_by_shape[shapes[0].name], log))
    rows += generation(bench, shapes[0].config, 4 if smoke else 256, (1, 4 if smoke else 64), log)
    return {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu (smoke)",
        "bf16_peak_flops": bf16_peak(device),
        "train_tokens_per_s": rates_by_shape,
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds per contender")
    parser.add_argument("--smoke", action="store_true", help="every code path on the CPU, tiny")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args(argv)
    report = benchmark(args.smoke, args.repeats)
    if report["rows"]:
        print(format_table(report["rows"], list(report["rows"][0])))
    if args.json:
        write_json(args.json, {"machine": machine(), "gpu": report, "rows": report["rows"]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
