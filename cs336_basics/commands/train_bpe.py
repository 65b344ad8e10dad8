"""``cs336 train-bpe``: train a byte-level BPE tokenizer on a text file and save it.

Writes ``vocab.json`` and ``merges.txt`` (GPT-2 format) into ``--out-dir``; load them with
``Tokenizer.from_files``. Example::

    cs336 train-bpe data/TinyStoriesV2-GPT4-train.txt --vocab-size 10000 --out-dir tokenizers/tinystories
"""

from __future__ import annotations

import argparse
import json
import os

from cs336_basics.bpe import train_bpe
from cs336_basics.tokenizer_files import save_merges, save_vocab


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", help="UTF-8 text file to train on")
    parser.add_argument(
        "--vocab-size", type=int, default=10_000, help="final vocabulary size (default: 10000)"
    )
    parser.add_argument(
        "--special-token",
        dest="special_tokens",
        action="append",
        default=None,
        metavar="TOKEN",
        help="a special token; repeat for several (default: <|endoftext|>)",
    )
    parser.add_argument(
        "--out-dir",
        default="tokenizer",
        help="where vocab.json and merges.txt go (default: ./tokenizer)",
    )
    parser.add_argument(
        "--workers", type=int, default=None, help="pre-tokenization processes (default: all cores)"
    )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bars")


def run(args: argparse.Namespace) -> int:
    special_tokens = args.special_tokens if args.special_tokens is not None else ["<|endoftext|>"]
    timings: dict[str, float] = {}
    vocab, merges = train_bpe(
        args.input,
        args.vocab_size,
        special_tokens,
        num_workers=args.workers,
        progress=not args.no_progress,
        timings=timings,
    )
    os.makedirs(args.out_dir, exist_ok=True)
    vocab_path = os.path.join(args.out_dir, "vocab.json")
    merges_path = os.path.join(args.out_dir, "merges.txt")
    save_vocab(vocab, vocab_path)
    save_merges(merges, merges_path)
    with open(os.path.join(args.out_dir, "special_tokens.json"), "w", encoding="utf-8") as file:
        json.dump(special_tokens, file, ensure_ascii=False)
    longest = max((a + b for a, b in merges), key=len, default=b"")
    print(
        f"trained {len(vocab)} tokens ({len(merges)} merges) in {timings['total']:.2f}s "
        f"(pre-tokenize {timings['pretokenize']:.2f}s, merge {timings['merge']:.2f}s); "
        f"longest learned token {longest.decode('utf-8', errors='replace')!r}"
    )
    print(f"wrote {vocab_path} and {merges_path}")
    return 0
