"""Tokenizer benchmark: our BPE trainer and encoder beside Hugging Face tokenizers and tiktoken.

On one text file (by default generated English-like prose with a long tail of distinct words,
see :mod:`benchmarks.english`), each run in a fresh process (so peak memory is its own and
caches start cold), repetitions interleaved:

* BPE training to ``vocab_size`` with ``<|endoftext|>``: ``cs336_basics.bpe.train_bpe`` vs HF
  ``BpeTrainer`` splitting on ``<|endoftext|>`` (removed, as ours) before a byte-level
  pre-tokenizer (both on all ``workers``): time, and peak memory of the whole process tree;
* encoding in one process: ``Tokenizer.encode`` vs a tiktoken ``Encoding`` and an HF
  ``tokenizers`` BPE built from the same vocab and merges, one thread each (text in memory);
* encoding a file on all cores: our ``encode_file`` (text file to ``.npy``, ``workers``
  processes) vs tiktoken on one thread (the issue's bar) and tiktoken's and HF's batch encoders
  over the documents on ``workers`` threads, also from reading the file to writing the ``.npy``.

Every contender's token ids must agree in number with ours (they are checked for equality in the
tests). "target" is the least acceptable speed of ours relative to that peer.

    uv run python -m benchmarks.tokenizer --size-mb 10        # or --input FILE, --corpus stories
    uv run python -m benchmarks.tokenizer --training-only --size-mb 100 --vocab-size 32000
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness import format_table, interleaved_isolated, machine, write_json

EOT = "<|endoftext|>"
# Our contenders: the readable reference, and the same tokenizer with compiled merges.
OURS = "ours"
OURS_COMPILED = "ours compiled"


def ours_train(input_path: str, vocab_size: int, workers: int, tokenizer_dir: str) -> dict:
    from cs336_basics.bpe import train_bpe
    from cs336_basics.tokenizer_files import save_merges, save_vocab

    start = time.perf_counter()
    vocab, merges = train_bpe(input_path, vocab_size, [EOT], num_workers=workers)
    seconds = time.perf_counter() - start
    save_vocab(vocab, Path(tokenizer_dir) / "vocab.json")
    save_merges(merges, Path(tokenizer_dir) / "merges.txt")
    return {"seconds": seconds}


def hf_train(input_path: str, vocab_size: int, workers: int) -> dict:
    os.environ["RAYON_NUM_THREADS"] = str(workers)
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    start = time.perf_counter()
    hf = Tokenizer(models.BPE())
    # As ours: the text is split on the special token, which is removed (not counted as text),
    # then cut by GPT-2's pattern into bytes.
    hf.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(EOT, behavior="removed"),
            pre_tokenizers.ByteLevel(add_prefix_space=False),
        ]
    )
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOT],
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    hf.train([input_path], trainer)
    return {"seconds": time.perf_counter() - start}


def _our_tokenizer(tokenizer_dir: str, compiled: bool = False):
    """The readable ``Tokenizer``, or with ``compiled`` the ``FastTokenizer`` (numba merges; its
    one-time kernel load happens here, before the clock starts, like tiktoken's set-up)."""
    from cs336_basics.runner.compiled.fast_tokenizer import FastTokenizer
    from cs336_basics.tokenizer import Tokenizer

    return (FastTokenizer if compiled else Tokenizer).from_files(
        Path(tokenizer_dir) / "vocab.json", Path(tokenizer_dir) / "merges.txt", [EOT]
    )


def _tiktoken_encoding(tokenizer_dir: str):
    """A tiktoken ``Encoding`` with our vocab (ids are the merge ranks) and GPT-2 pattern."""
    import tiktoken

    from cs336_basics.pretokenization import GPT2_PRETOKENIZER_PATTERN

    tokenizer = _our_tokenizer(tokenizer_dir)
    specials = {token.encode() for token in tokenizer.special_tokens}
    return tiktoken.Encoding(
        name="bench",
        pat_str=GPT2_PRETOKENIZER_PATTERN,
        mergeable_ranks={token: i for i, token in tokenizer.vocab.items() if token not in specials},
        special_tokens=dict(tokenizer.special_ids),
    )


def _hf_tokenizer(tokenizer_dir: str, threads: int):
    """HF ``tokenizers`` byte-level BPE from our ``vocab.json`` and ``merges.txt`` (GPT-2 format)."""
    os.environ["RAYON_NUM_THREADS"] = str(threads)  # read when the thread pool starts
    from tokenizers import Tokenizer, models, pre_tokenizers

    hf = Tokenizer(
        models.BPE.from_file(
            str(Path(tokenizer_dir) / "vocab.json"), str(Path(tokenizer_dir) / "merges.txt")
        )
    )
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.add_special_tokens([EOT])
    return hf


def ours_encode(input_path: str, tokenizer_dir: str, compiled: bool) -> dict:
    tokenizer = _our_tokenizer(tokenizer_dir, compiled)
    text = Path(input_path).read_text(encoding="utf-8")
    start = time.perf_counter()
    ids = tokenizer.encode(text)
    return {"seconds": time.perf_counter() - start, "tokens": len(ids)}


def tiktoken_encode(input_path: str, tokenizer_dir: str) -> dict:
    encoding = _tiktoken_encoding(tokenizer_dir)
    text = Path(input_path).read_text(encoding="utf-8")
    start = time.perf_counter()
    ids = encoding.encode(text, allowed_special="all")
    return {"seconds": time.perf_counter() - start, "tokens": len(ids)}


def hf_encode(input_path: str, tokenizer_dir: str) -> dict:
    # One sequence per document: HF is slow on a single multi-megabyte sequence.
    hf = _hf_tokenizer(tokenizer_dir, threads=1)
    documents = Path(input_path).read_text(encoding="utf-8").split(EOT)
    start = time.perf_counter()
    encodings = hf.encode_batch(documents, add_special_tokens=False)
    tokens = sum(len(encoding.ids) for encoding in encodings) + len(documents) - 1
    return {"seconds": time.perf_counter() - start, "tokens": tokens}


def ours_encode_file(input_path: str, tokenizer_dir: str, workers: int, compiled: bool) -> dict:
    from cs336_basics.runner.encode_file import encode_file

    tokenizer = _our_tokenizer(tokenizer_dir, compiled)
    with tempfile.TemporaryDirectory() as scratch:
        start = time.perf_counter()
        count = encode_file(tokenizer, input_path, Path(scratch) / "ids.npy", num_workers=workers)
        return {"seconds": time.perf_counter() - start, "tokens": count}


def tiktoken_encode_file(input_path: str, tokenizer_dir: str, workers: int) -> dict:
    from cs336_basics.runner.encode_file import token_dtype

    encoding = _tiktoken_encoding(tokenizer_dir)
    dtype = token_dtype(encoding.n_vocab)
    separator = np.array([encoding.encode_single_token(EOT)], dtype=dtype)
    with tempfile.TemporaryDirectory() as scratch:
        start = time.perf_counter()
        documents = Path(input_path).read_text(encoding="utf-8").split(EOT)
        pieces = []
        for batch in encoding.encode_ordinary_batch(documents, num_threads=workers):
            pieces += [separator, np.array(batch, dtype=dtype)]
        ids = np.concatenate(pieces[1:])
        np.save(Path(scratch) / "ids.npy", ids)
        return {"seconds": time.perf_counter() - start, "tokens": len(ids)}


def hf_encode_file(input_path: str, tokenizer_dir: str, workers: int) -> dict:
    from cs336_basics.runner.encode_file import token_dtype

    hf = _hf_tokenizer(tokenizer_dir, threads=workers)
    dtype = token_dtype(hf.get_vocab_size())
    separator = np.array([hf.token_to_id(EOT)], dtype=dtype)
    with tempfile.TemporaryDirectory() as scratch:
        start = time.perf_counter()
        documents = Path(input_path).read_text(encoding="utf-8").split(EOT)
        pieces = []
        for encoding in hf.encode_batch(documents, add_special_tokens=False):
            pieces += [separator, np.array(encoding.ids, dtype=dtype)]
        ids = np.concatenate(pieces[1:])
        np.save(Path(scratch) / "ids.npy", ids)
        return {"seconds": time.perf_counter() - start, "tokens": len(ids)}


def _summary(runs: list[dict[str, Any]], megabytes: float) -> dict[str, Any]:
    seconds = [run["seconds"] for run in runs]
    return {
        "median_s": statistics.median(seconds),
        "min_s": min(seconds),
        "max_s": max(seconds),
        "mb_per_s": megabytes / statistics.median(seconds),
        "peak_mb": max(run["peak_bytes"] for run in runs) / 2**20,
        "tree_peak_mb": max(run["tree_peak_bytes"] for run in runs) / 2**20,
        "median_cpu_s": statistics.median(run["cpu_seconds"] for run in runs),
        "tokens": runs[0].get("tokens"),
        "runs": runs,
    }


def _comparisons(input_path: str, vocab_size: int, workers: int, tokenizer_dir: str) -> list:
    """``(name, contenders, targets)``: ours (names starting "ours"), then the peers; ``targets``
    maps a peer, or a pair (one of ours, a peer), to the least acceptable speed of ours relative
    to it (the issues' bars)."""
    encode_args = (input_path, tokenizer_dir)
    file_args = (input_path, tokenizer_dir, workers)
    return [
        (
            "BPE training",
            {
                OURS: (ours_train, (input_path, vocab_size, workers, tokenizer_dir)),
                f"HF tokenizers BpeTrainer, {workers} threads": (
                    hf_train,
                    (input_path, vocab_size, workers),
                ),
            },
            # Issue 42: at most half HF's time (and at most its memory, ``_memory_row``).
            {f"HF tokenizers BpeTrainer, {workers} threads": 2.0},
        ),
        (
            "encode, 1 process",
            {
                OURS: (ours_encode, (*encode_args, False)),
                OURS_COMPILED: (ours_encode, (*encode_args, True)),
                "tiktoken, 1 thread": (tiktoken_encode, encode_args),
                "HF tokenizers, 1 thread": (hf_encode, encode_args),
            },
            # The readable encoder's bar, and the compiled one's (issue 42, on GCIDE and the
            # stories: ``--corpus dictionary stories``, which ``make bench`` runs by default).
            {"tiktoken, 1 thread": 0.5, (OURS_COMPILED, "tiktoken, 1 thread"): 1.5},
        ),
        (
            f"encode file, {workers} processes",
            {
                OURS: (ours_encode_file, (*file_args, False)),
                OURS_COMPILED: (ours_encode_file, (*file_args, True)),
                "tiktoken, 1 thread": (tiktoken_encode_file, (input_path, tokenizer_dir, 1)),
                f"tiktoken batch, {workers} threads": (tiktoken_encode_file, file_args),
                f"HF tokenizers batch, {workers} threads": (hf_encode_file, file_args),
            },
            {"tiktoken, 1 thread": 1.0},
        ),
    ]


def _row(name: str, label: str, ours: dict, peer: dict, peer_name: str, target) -> dict:
    def unit(summary: dict) -> str:
        if name == "BPE training":
            return f"{summary['median_s']:.2f} s"
        return f"{summary['mb_per_s']:.1f} MB/s"

    row = {
        "benchmark": name,
        "input": label,
        "ours": unit(ours),
        "peer": f"{unit(peer)} ({peer_name})",
        "speed ours/peer": f"{peer['median_s'] / ours['median_s']:.2f}x",
        "ratio": peer["median_s"] / ours["median_s"],
        "spread s (ours; peer)": f"{ours['min_s']:.2f}-{ours['max_s']:.2f}; "
        f"{peer['min_s']:.2f}-{peer['max_s']:.2f}",
        "peak MB ours/peer": f"{ours['tree_peak_mb']:.0f}/{peer['tree_peak_mb']:.0f}",
    }
    if target is not None:
        row["target"] = target
    return row


def _memory_row(name: str, label: str, ours: dict, peer: dict, peer_name: str) -> dict:
    """Peak memory of the whole process tree (workers included), as the peer's over ours: at
    least 1 when ours needs no more than the peer."""
    return {
        "benchmark": f"{name}, peak memory (peer's/ours)",
        "input": label,
        "ours": f"{ours['tree_peak_mb']:.0f} MB",
        "peer": f"{peer['tree_peak_mb']:.0f} MB ({peer_name})",
        "speed ours/peer": f"{peer['tree_peak_mb'] / ours['tree_peak_mb']:.2f}x",
        "ratio": peer["tree_peak_mb"] / ours["tree_peak_mb"],
        "target": 1.0,
        "peak MB ours/peer": f"{ours['tree_peak_mb']:.0f}/{peer['tree_peak_mb']:.0f}",
    }


def benchmark(
    input_path: str,
    label: str,
    vocab_size: int,
    workers: int,
    repeats: int,
    log=print,
    training_only: bool = False,
) -> dict[str, Any]:
    """Run the comparisons on ``input_path`` (with ``training_only``, BPE training's alone); the
    summaries and table rows."""
    megabytes = os.path.getsize(input_path) / 1e6
    log(
        f"tokenizer on {label} ({megabytes:.1f} MB): vocab {vocab_size}, {workers} workers, {repeats} repeats"
    )
    results: dict[str, Any] = {}
    rows = []
    with tempfile.TemporaryDirectory() as tokenizer_dir:
        # Training goes first: its first run writes the vocab and merges the encoders use.
        comparisons = _comparisons(input_path, vocab_size, workers, tokenizer_dir)
        for name, contenders, targets in comparisons[:1] if training_only else comparisons:
            log(f" {name}")
            runs = interleaved_isolated(contenders, repeats, log)
            summaries = {who: _summary(measured, megabytes) for who, measured in runs.items()}
            ours = {who: summaries.pop(who) for who in list(summaries) if who.startswith(OURS)}
            results[name] = {**ours, "peers": summaries}
            for our_name, our_summary in ours.items():
                for peer_name, peer in summaries.items():
                    if our_summary["tokens"] != peer["tokens"]:
                        raise RuntimeError(
                            f"{name}: {our_name} made {our_summary['tokens']} tokens, "
                            f"{peer_name} {peer['tokens']}"
                        )
                    row_name = name if our_name == OURS else f"{name}, {our_name}"
                    target = targets.get((our_name, peer_name), targets.get(peer_name))
                    rows.append(_row(row_name, label, our_summary, peer, peer_name, target))
                    if name == "BPE training":
                        rows.append(_memory_row(row_name, label, our_summary, peer, peer_name))
    return {"input": label, "megabytes": megabytes, "results": results, "rows": rows}


def write_corpus(corpus: str, path: str, size_mb: float) -> str:
    """Write ``size_mb`` MB of ``corpus`` text: "english" (generated English-like prose),
    "stories" (generated children's stories) or "dictionary" (GCIDE, real English); its label."""
    if corpus == "dictionary":
        from benchmarks.dictionary import write_dictionary_text

        size_mb = write_dictionary_text(path, int(size_mb * 1e6)) / 1e6
        return f"dictionary (GCIDE) {size_mb:.3g} MB"
    if corpus == "english":
        from benchmarks.english import write_english_corpus as write
    else:
        from cs336_basics.runner.stories import write_story_corpus as write
    write(path, int(size_mb * 1e6), seed=0)
    return f"{corpus} {size_mb:g} MB"


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--size-mb", type=float, default=10.0, help="generated corpus size (default 10)"
    )
    parser.add_argument(
        "--corpus",
        choices=["english", "stories", "dictionary"],
        default="english",
        help="generated English-like prose (default), generated stories, or real English "
        "(GCIDE, from Debian's dict-gcide package)",
    )
    parser.add_argument(
        "--input", help="benchmark on this UTF-8 text file instead of a generated corpus"
    )
    parser.add_argument("--vocab-size", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument(
        "--training-only", action="store_true", help="BPE training alone, no encoding"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        if args.input:
            path, label = args.input, Path(args.input).name
        else:
            path = os.path.join(scratch, f"{args.corpus}.txt")
            label = write_corpus(args.corpus, path, args.size_mb)
        report = benchmark(
            path,
            label,
            args.vocab_size,
            args.workers,
            args.repeats,
            training_only=args.training_only,
        )
    print(format_table(report["rows"], COLUMNS))
    if args.json:
        write_json(args.json, {"machine": machine(), "tokenizer": [report]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
