"""``cs336 encode``: turn a text file into a ``.npy`` array of token ids, on all cores.

The tokenizer is a ``vocab.json`` + ``merges.txt`` pair (from ``cs336 train-bpe`` or any GPT-2
format tokenizer). Example::

    cs336 encode data/TinyStoriesV2-GPT4-valid.txt --tokenizer tokenizers/tinystories --out valid.npy
"""

from __future__ import annotations

import argparse
import json
import os
import time

from cs336_basics.encode_file import encode_file
from cs336_basics.tokenizer import Tokenizer


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", help="UTF-8 text file to encode")
    parser.add_argument(
        "--tokenizer", required=True, metavar="DIR", help="directory with vocab.json and merges.txt"
    )
    parser.add_argument(
        "--out",
        required=True,
        help="output .npy file (uint16, or uint32 for vocabularies over 65536)",
    )
    parser.add_argument(
        "--special-token",
        dest="special_tokens",
        action="append",
        default=None,
        metavar="TOKEN",
        help="a special token; repeat for several (default: those saved by train-bpe, else <|endoftext|>)",
    )
    parser.add_argument(
        "--workers", type=int, default=None, help="encoding processes (default: all cores)"
    )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def run(args: argparse.Namespace) -> int:
    special_tokens = args.special_tokens
    saved = os.path.join(args.tokenizer, "special_tokens.json")
    if special_tokens is None:
        if os.path.exists(saved):
            with open(saved, encoding="utf-8") as file:
                special_tokens = json.load(file)
        else:
            special_tokens = ["<|endoftext|>"]
    tokenizer = Tokenizer.from_files(
        os.path.join(args.tokenizer, "vocab.json"),
        os.path.join(args.tokenizer, "merges.txt"),
        special_tokens,
    )
    started = time.perf_counter()
    count = encode_file(
        tokenizer, args.input, args.out, num_workers=args.workers, progress=not args.no_progress
    )
    seconds = time.perf_counter() - started
    size = os.path.getsize(args.input)
    print(
        f"encoded {size / 1e6:.1f} MB into {count} tokens ({size / max(count, 1):.2f} bytes/token) "
        f"in {seconds:.2f}s ({size / 1e6 / seconds:.1f} MB/s); wrote {args.out}"
    )
    return 0
