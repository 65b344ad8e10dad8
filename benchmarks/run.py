"""``make bench``: every benchmark in one run on one machine, one table of ratios, one JSON file.

* tokenizer (:mod:`benchmarks.tokenizer`): BPE training vs HF tokenizers, encoding (one process,
  and a file on all cores) vs tiktoken and HF tokenizers, on each ``--corpus`` (generated
  English-like text, :mod:`benchmarks.english`; real English, :mod:`benchmarks.dictionary`;
  generated stories) at each ``--sizes`` (MB), or on ``--input`` files;
* training (:mod:`benchmarks.training`, when present): tokens/s vs HF ``LlamaForCausalLM``, MFU;
* generation (:mod:`benchmarks.generation`): tokens/s with the KV cache vs without;
* gpu (:mod:`benchmarks.gpu`): train steps, the training loop and generation on a CUDA device
  vs HF Llama and HF ``generate``, MFU against the device's bf16 peak; skipped with a printed
  reason without CUDA (``--smoke`` runs its code paths on the CPU with tiny shapes);
* suite (:mod:`benchmarks.suite`): the whole test suite's wall time.

"speed ours/peer" is always ours' speed over the peer's (above 1: ours is faster); "target" is
the least acceptable value. Results go to ``benchmarks/results/bench-<time>.json`` (``--json``).

    uv run python -m benchmarks.run                          # everything (make bench)
    uv run python -m benchmarks.run --input owt_train.txt --only tokenizer
    uv run python -m benchmarks.run --smoke                  # tiny inputs, no timing asserted
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from benchmarks import tokenizer
from benchmarks.harness import format_table, machine, write_json

ROOT = Path(__file__).resolve().parent.parent
SECTIONS = ["tokenizer", "training", "generation", "gpu", "suite"]
COLUMNS = [
    "benchmark",
    "input",
    "ours",
    "peer",
    "speed ours/peer",
    "target",
    "spread s (ours; peer)",
    "peak MB ours/peer",
]


def log(message: str) -> None:
    print(message, flush=True)


def run_tokenizer(args: argparse.Namespace, scratch: str) -> list[dict[str, Any]]:
    inputs = [(path, Path(path).name) for path in args.input]
    corpora = [] if inputs else args.corpus
    for corpus, size in ((corpus, size) for corpus in corpora for size in args.sizes):
        path = os.path.join(scratch, f"{corpus}-{size:g}mb.txt")
        try:
            inputs.append((path, tokenizer.write_corpus(corpus, path, size)))
        except FileNotFoundError as error:  # the dictionary is a system package
            log(f"tokenizer on {corpus}: skipped, {error}")
    return [
        tokenizer.benchmark(path, label, args.vocab_size, args.workers, args.repeats, log)
        for path, label in inputs
    ]


def run_training(args: argparse.Namespace, scratch: str) -> dict[str, Any]:
    """``benchmarks/training.py`` in its own process; it writes its results (with ``rows``) as JSON."""
    if not (ROOT / "benchmarks" / "training.py").exists():
        log("training: skipped, benchmarks/training.py is not there yet")
        return {
            "rows": [
                {
                    "benchmark": "training tokens/s",
                    "ours": "not run: benchmarks/training.py missing",
                }
            ]
        }
    out = os.path.join(scratch, "training.json")
    command = [
        sys.executable,
        "-m",
        "benchmarks.training",
        "--json",
        out,
        "--repeats",
        str(args.repeats),
        "--eager",
    ]
    if args.smoke:
        command.append("--smoke")  # torch.compile takes minutes; the smoke run leaves it out
    else:
        command += ["--steps", "1", "--compile"]
    log(f"training: {' '.join(command[1:])}")
    subprocess.run(command, check=True, cwd=ROOT)
    return json.loads(Path(out).read_text())


# Sections that import torch do it when they run: the tokenizer's spawned children re-import this
# module, and torch would add its hundreds of MB to every peak they report.
def run_generation(args: argparse.Namespace, scratch: str) -> dict[str, Any]:
    from benchmarks import generation

    if args.smoke:
        return generation.benchmark(generation.TINY, new_tokens=8, repeats=1, log=log)
    return generation.benchmark(repeats=args.repeats, log=log)


def run_gpu(args: argparse.Namespace, scratch: str) -> dict[str, Any]:
    from benchmarks import gpu

    result = gpu.benchmark(smoke=args.smoke, repeats=args.repeats, log=log)
    if "skipped" in result:
        result["rows"] = [{"benchmark": "GPU section", "ours": f"skipped: {result['skipped']}"}]
    return result


def run_suite(args: argparse.Namespace, scratch: str) -> dict[str, Any]:
    from benchmarks import suite

    return suite.benchmark(
        ["--collect-only", "tests/test_schedule.py"] if args.smoke else [], log=log
    )


def with_verdict(row: dict[str, Any]) -> dict[str, Any]:
    """The row with its ``target`` column: the goal and whether this run met it."""
    row = dict(row)
    if "target" in row and "ratio" in row:
        goal, met = f">= {row['target']:g}x", row["ratio"] >= row["target"]
    elif "max_seconds" in row and "seconds" in row:
        goal, met = f"<= {row['max_seconds']:g} s", row["seconds"] <= row["max_seconds"]
    else:
        return row
    row["target"] = f"{goal} {'met' if met else 'MISSED'}"
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        type=float,
        nargs="+",
        default=[10],
        help="tokenizer corpus sizes, MB (default 10)",
    )
    parser.add_argument(
        "--corpus",
        nargs="+",
        choices=["english", "dictionary", "stories"],
        default=["english", "dictionary", "stories"],
        help="tokenizer texts (default all): generated English-like prose, real English (GCIDE, "
        "from Debian's dict-gcide package) and generated children's stories",
    )
    parser.add_argument(
        "--input",
        action="append",
        default=[],
        help="tokenizer input file (repeatable); replaces --sizes",
    )
    parser.add_argument(
        "--only", nargs="+", choices=SECTIONS, default=SECTIONS, help="run only these sections"
    )
    parser.add_argument("--vocab-size", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--torch-threads",
        type=int,
        help="torch intra-op threads for training and generation "
        "(default: torch's own; on a loaded machine 1 avoids threads waiting on each other)",
    )
    parser.add_argument(
        "--json", help="results file (default benchmarks/results/bench-<time>.json)"
    )
    parser.add_argument(
        "--smoke", action="store_true", help="tiny inputs, one repeat: checks the harness works"
    )
    args = parser.parse_args(argv)
    for path in args.input:
        if not os.path.isfile(path):
            parser.error(f"--input file not found: {path!r}")
    if args.smoke:
        args.sizes, args.vocab_size, args.repeats = [0.2], 400, 1
        args.torch_threads = (
            args.torch_threads or 1
        )  # tiny tensors: extra threads only wait on each other
    if args.torch_threads:
        os.environ["OMP_NUM_THREADS"] = str(args.torch_threads)  # for the training subprocess
        import torch

        torch.set_num_threads(args.torch_threads)

    report: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": machine(),
        "arguments": vars(args),
        "sections": {},
        "errors": {},
    }
    runners = {
        "tokenizer": run_tokenizer,
        "training": run_training,
        "generation": run_generation,
        "gpu": run_gpu,
        "suite": run_suite,
    }
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as scratch:
        for name in args.only:
            started = time.perf_counter()
            try:
                result = runners[name](args, scratch)
            except Exception as error:  # noqa: BLE001 -- one broken section must not lose the others
                traceback.print_exc()
                report["errors"][name] = f"{type(error).__name__}: {error}"
                rows.append(
                    {"benchmark": name, "ours": "not run", "peer": report["errors"][name][:100]}
                )
                continue
            report["sections"][name] = result
            log(f"{name}: done in {time.perf_counter() - started:.0f} s")
            for part in result if isinstance(result, list) else [result]:
                rows += [with_verdict(row) for row in part.get("rows", [])]
    report["machine"]["load_average_at_end"] = list(os.getloadavg())
    report["table"] = format_table(rows, COLUMNS)

    load = report["machine"]["load_average_1_5_15_min"]
    print(
        f"\n{report['machine']['cpu_model']}, {report['machine']['cpu_count']} cores, torch threads "
        f"{report['machine']['torch_threads']}; load average {load[0]:.1f} at start, "
        f"{report['machine']['load_average_at_end'][0]:.1f} at end"
    )
    print(report["table"])
    if args.json:
        out = args.json
    elif args.smoke:
        out = os.path.join(tempfile.gettempdir(), "cs336-bench-smoke.json")
    else:
        out = ROOT / "benchmarks" / "results" / time.strftime("bench-%Y%m%d-%H%M%S.json")
    write_json(out, report)
    print(f"wrote {out}")
    return 1 if report["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
