"""Tokenizer benchmark: our BPE trainer and encoder beside Hugging Face tokenizers and tiktoken.

On the same input (a generated story corpus, or ``--input FILE``) it times, each in a fresh
child process so peak memory (``ru_maxrss`` of the child and its workers) is measured too:

* BPE training to ``--vocab-size``: ``cs336_basics.bpe.train_bpe`` vs HF ``BpeTrainer`` with a
  byte-level pre-tokenizer (both using all cores);
* encoding, single-threaded: ``Tokenizer.encode`` vs a tiktoken ``Encoding`` built from our
  vocab and merges;
* encoding, parallel with ``--workers``: our file encoder (text file to ``.npy``) vs tiktoken's
  ``encode_batch`` over the documents.

Repetitions are interleaved (ours, theirs, ours, theirs...) so load changes hit both alike; the
table shows the median, the spread (min-max) and ours/peer ratios. Results go to ``--json``.

    uv run python benchmarks/tokenizer.py --size-mb 40          # the full comparison
    uv run python benchmarks/tokenizer.py --smoke               # seconds; for CI
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EOT = "<|endoftext|>"
ROOT = Path(__file__).resolve().parent.parent


def child(task: str, input_path: str, tokenizer_dir: str, vocab_size: int, workers: int) -> dict:
    """Run one measurement in this (child) process."""
    sys.path.insert(0, str(ROOT))
    from cs336_basics.tokenizer import Tokenizer

    result: dict = {}
    if task in ("ours_train", "hf_train"):
        start = time.perf_counter()
        if task == "ours_train":
            from cs336_basics.bpe import train_bpe
            from cs336_basics.tokenizer_files import save_merges, save_vocab

            timings: dict[str, float] = {}
            vocab, merges = train_bpe(input_path, vocab_size, [EOT], num_workers=workers, timings=timings)
            result["phases"] = timings
            seconds = time.perf_counter() - start
            save_vocab(vocab, Path(tokenizer_dir) / "vocab.json")
            save_merges(merges, Path(tokenizer_dir) / "merges.txt")
        else:
            from tokenizers import Tokenizer as HFTokenizer
            from tokenizers import models, pre_tokenizers, trainers

            hf = HFTokenizer(models.BPE())
            hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
            trainer = trainers.BpeTrainer(
                vocab_size=vocab_size, special_tokens=[EOT], show_progress=False,
                initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            )
            hf.train([input_path], trainer)
            seconds = time.perf_counter() - start
        result["seconds"] = seconds
    else:
        tokenizer = Tokenizer.from_files(Path(tokenizer_dir) / "vocab.json", Path(tokenizer_dir) / "merges.txt", [EOT])
        text = Path(input_path).read_bytes().decode("utf-8")
        if task.startswith("tiktoken"):
            import tiktoken

            from cs336_basics.pretokenization import GPT2_PRETOKENIZER_PATTERN

            special = EOT.encode()
            encoding = tiktoken.Encoding(
                name="bench", pat_str=GPT2_PRETOKENIZER_PATTERN,
                mergeable_ranks={t: i for i, t in tokenizer.vocab.items() if t != special},
                special_tokens=dict(tokenizer.special_ids),
            )
        start = time.perf_counter()
        if task == "ours_encode":
            count = len(tokenizer.encode(text))
        elif task == "tiktoken_encode":
            count = len(encoding.encode(text, allowed_special="all"))
        elif task == "ours_encode_parallel":
            from cs336_basics.encode_file import encode_file

            with tempfile.TemporaryDirectory() as scratch:
                count = encode_file(tokenizer, input_path, Path(scratch) / "ids.npy", num_workers=workers)
        elif task == "tiktoken_encode_batch":
            documents = text.split(EOT)
            count = sum(map(len, encoding.encode_batch(documents, num_threads=workers, allowed_special="all")))
        else:
            raise ValueError(f"unknown task {task!r}")
        result["seconds"] = time.perf_counter() - start
        result["tokens"] = count
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    workers_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss is bytes on macOS, KiB on Linux
    result["peak_mb"] = max(own, workers_peak) * scale / 2**20
    return result


PAIRS = [
    ("BPE training (s)", "ours_train", "hf_train", "HF tokenizers"),
    ("encode, 1 thread (MB/s)", "ours_encode", "tiktoken_encode", "tiktoken"),
    ("encode, parallel (MB/s)", "ours_encode_parallel", "tiktoken_encode_batch", "tiktoken batch"),
]


def run_child(task: str, args: argparse.Namespace, input_path: str, tokenizer_dir: str) -> dict:
    command = [
        sys.executable, __file__, "--child", task, "--input", input_path, "--tokenizer-dir", tokenizer_dir,
        "--vocab-size", str(args.vocab_size), "--workers", str(args.workers),
    ]
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(output.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, default=40.0, help="generated corpus size (default 40)")
    parser.add_argument("--input", help="benchmark on this text file instead of a generated corpus")
    parser.add_argument("--vocab-size", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "tokenizer.json"))
    parser.add_argument("--smoke", action="store_true", help="tiny run (0.2 MB, vocab 400, 1 repeat)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--tokenizer-dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.input, args.tokenizer_dir, args.vocab_size, args.workers)))
        return 0
    if args.smoke:
        args.size_mb, args.vocab_size, args.repeats = 0.2, 400, 1

    with tempfile.TemporaryDirectory() as scratch:
        input_path = args.input
        if input_path is None:
            sys.path.insert(0, str(ROOT))
            from cs336_basics.stories import write_story_corpus

            input_path = os.path.join(scratch, "stories.txt")
            write_story_corpus(input_path, int(args.size_mb * 1e6), seed=0)
        size_mb = os.path.getsize(input_path) / 1e6
        print(f"input: {input_path if args.input else 'generated stories'} ({size_mb:.1f} MB), "
              f"vocab {args.vocab_size}, {args.workers} workers, {args.repeats} repeats", flush=True)
        runs: dict[str, list[dict]] = {task: [] for _, ours, theirs, _ in PAIRS for task in (ours, theirs)}
        for _ in range(args.repeats):
            for _, ours, theirs, _ in PAIRS:  # interleaved; ours_train first writes the tokenizer
                for task in (ours, theirs):
                    runs[task].append(run_child(task, args, input_path, scratch))
                    print(f"  {task:24s} {runs[task][-1]['seconds']:8.2f}s", flush=True)

    report = {"input_mb": size_mb, "vocab_size": args.vocab_size, "workers": args.workers, "repeats": args.repeats,
              "input": args.input or "generated stories", "tasks": {}}
    for task, results in runs.items():
        seconds = [r["seconds"] for r in results]
        report["tasks"][task] = {
            "median_s": statistics.median(seconds), "min_s": min(seconds), "max_s": max(seconds),
            "mb_per_s": size_mb / statistics.median(seconds), "peak_mb": max(r["peak_mb"] for r in results),
            "runs": results,
        }
    print(f"\n{'measure':26s} {'ours':>16s} {'peer':>16s} {'ours/peer':>10s}  peak MB ours/peer")
    for label, ours, theirs, peer in PAIRS:
        a, b = report["tasks"][ours], report["tasks"][theirs]
        if label.endswith("(s)"):
            cell = lambda t: f"{t['median_s']:.2f} ({t['min_s']:.2f}-{t['max_s']:.2f})"
            ratio = a["median_s"] / b["median_s"]
        else:
            cell = lambda t: f"{t['mb_per_s']:.2f} ({size_mb / t['max_s']:.1f}-{size_mb / t['min_s']:.1f})"
            ratio = a["mb_per_s"] / b["mb_per_s"]
        report.setdefault("ratios", {})[label] = ratio
        print(f"{label:26s} {cell(a):>16s} {cell(b):>16s} {ratio:10.2f}  {a['peak_mb']:.0f} / {b['peak_mb']:.0f}  (peer: {peer})")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
