"""``cs336 accounting``: parameters, memory, FLOPs and MFU of a model config, on paper.

Examples::

    cs336 accounting --preset gpt2-xl
    cs336 accounting --config runs/pipeline/config.json --batch-size 32
    cs336 accounting --preset tinystories --batch-size 32 --tokens-per-second 2.5e5 --peak-tflops 989
    cs336 accounting --all-presets
    cs336 accounting --preset tinystories --batch-size 8 --measure 3 --peak-tflops 1.5   # MFU here
"""

from __future__ import annotations

import argparse
import json

from cs336_basics.errors import InputError
from cs336_basics.runner.commands.arguments import positive_float, positive_int
from cs336_basics.runner.commands.inputs import reading


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from cs336_basics.accounting import PRESETS

    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--preset", choices=sorted(PRESETS), default="tinystories", help="(default: tinystories)"
    )
    source.add_argument(
        "--config", help="a ModelConfig JSON, or a training config (JSON/TOML) with a model table"
    )
    source.add_argument(
        "--all-presets", action="store_true", help="compare every preset in one table"
    )
    parser.add_argument(
        "--batch-size", type=positive_int, default=1, help="sequences per step (default: 1)"
    )
    parser.add_argument(
        "--seq-len",
        type=positive_int,
        default=None,
        help="tokens per sequence (default: context length)",
    )
    parser.add_argument(
        "--bytes-per-value",
        type=positive_int,
        default=4,
        help="4 for float32, 2 for bf16 (default: 4)",
    )
    parser.add_argument(
        "--tokens-per-second", type=positive_float, help="measured training throughput, for MFU"
    )
    parser.add_argument(
        "--measure",
        type=positive_int,
        metavar="STEPS",
        help="measure the throughput here: time STEPS training steps of a random model",
    )
    parser.add_argument("--device", default="auto", help="device for --measure (default: auto)")
    parser.add_argument(
        "--peak-tflops", type=positive_float, help="the accelerator's peak TFLOP/s, for MFU"
    )
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object instead of tables"
    )


def _load_model_config(path: str):
    from cs336_basics.config import ModelConfig
    from cs336_basics.train_config import load_config_file

    settings = load_config_file(path)
    try:
        return ModelConfig.from_dict(settings.get("model", settings))
    except (TypeError, ValueError) as error:
        raise InputError(f"config file {path} has no usable model config: {error}") from error


def report(
    config,
    batch_size: int,
    seq_len: int | None,
    bytes_per_value: int,
    tokens_per_second: float | None = None,
    peak_tflops: float | None = None,
) -> dict:
    from cs336_basics import accounting

    flops = accounting.forward_flops(config, batch_size, seq_len)
    memory = accounting.training_memory(config, batch_size, seq_len, bytes_per_value)
    result = {
        "config": config.to_dict(),
        "batch_size": batch_size,
        "seq_len": seq_len or config.context_length,
        "parameters": accounting.parameter_counts(config),
        "total_parameters": sum(accounting.parameter_counts(config).values()),
        "memory_bytes": {**vars(memory), "total": memory.total},
        "forward_flops": flops,
        "total_forward_flops": sum(flops.values()),
        "training_flops_per_step": 3 * sum(flops.values()),
        "training_flops_per_token": accounting.training_flops_per_token(config, seq_len),
        "kv_cache_bytes_per_token": accounting.kv_cache_bytes(config, 1, 1, bytes_per_value),
        "kv_cache_bytes": accounting.kv_cache_bytes(config, batch_size, seq_len, bytes_per_value),
    }
    if tokens_per_second:
        result["tokens_per_second"] = tokens_per_second
        result["achieved_flops_per_second"] = tokens_per_second * result["training_flops_per_token"]
    if tokens_per_second and peak_tflops:
        result["mfu"] = accounting.model_flops_utilization(
            config, tokens_per_second, peak_tflops * 1e12, seq_len
        )
    return result


def _print_report(name: str, result: dict) -> None:
    total = result["total_parameters"]
    print(
        f"{name}: {total:,} parameters ({total / 1e6:.1f}M), batch {result['batch_size']} x "
        f"{result['seq_len']} tokens"
    )
    for component, count in result["parameters"].items():
        if count:
            print(f"  params  {component:<20} {count:>15,}  {100 * count / total:5.1f}%")
    for component, value in result["memory_bytes"].items():
        print(f"  memory  {component:<20} {value / 2**30:>12.3f} GiB")
    flops_total = result["total_forward_flops"]
    for component, value in result["forward_flops"].items():
        print(
            f"  forward {component:<20} {value / 1e9:>12.2f} GFLOPs  {100 * value / flops_total:5.1f}%"
        )
    print(
        f"  forward total {flops_total / 1e12:.3f} TFLOPs; training step {result['training_flops_per_step'] / 1e12:.3f} "
        f"TFLOPs ({result['training_flops_per_token'] / 1e9:.3f} GFLOPs/token)"
    )
    print(
        f"  kv cache {result['kv_cache_bytes_per_token']:,} bytes/token; "
        f"{result['kv_cache_bytes'] / 2**20:.2f} MiB for the batch"
    )
    if "tokens_per_second" in result:
        print(
            f"  throughput {result['tokens_per_second']:,.0f} tokens/s = "
            f"{result['achieved_flops_per_second'] / 1e12:.3f} TFLOP/s"
        )
    if "mfu" in result:
        print(f"  MFU {100 * result['mfu']:.1f}%")


def run(args: argparse.Namespace) -> int:
    from cs336_basics.accounting import PRESETS

    if args.all_presets:
        configs = dict(PRESETS)
    elif args.config:
        configs = {args.config: _load_model_config(args.config)}
    else:
        configs = {args.preset: PRESETS[args.preset]}
    results = {}
    for name, config in configs.items():
        tokens_per_second = args.tokens_per_second
        if args.measure:
            from cs336_basics.accounting import measure_training_throughput
            from cs336_basics.devices import auto_device

            device = auto_device() if args.device == "auto" else args.device
            tokens_per_second = measure_training_throughput(
                config, args.batch_size, args.measure, device, args.seq_len
            )
        with reading(f"model {name}"):
            results[name] = report(
                config,
                args.batch_size,
                args.seq_len,
                args.bytes_per_value,
                tokens_per_second,
                args.peak_tflops,
            )
    if args.json:
        print(json.dumps(results if len(results) > 1 else next(iter(results.values())), indent=2))
        return 0
    for name, result in results.items():
        _print_report(name, result)
    return 0
