"""``cs336 train-bpe``: train a byte-level BPE tokenizer on a text file and save it.

Writes ``vocab.json`` and ``merges.txt`` (GPT-2 format) and ``special_tokens.json`` into
``--out-dir`` (an existing tokenizer there is only replaced with ``--force``); load them with
``Tokenizer.from_files``. Example::

    cs336 train-bpe data/TinyStoriesV2-GPT4-train.txt --vocab-size 10000 --out-dir tokenizers/tinystories
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from cs336_basics.errors import InputError
from cs336_basics.runner.commands.arguments import add_force_flag, add_workers_flag, positive_int
from cs336_basics.runner.commands.inputs import reading, refuse_existing, require_file


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", help="UTF-8 text file to train on")
    parser.add_argument(
        "--vocab-size",
        type=positive_int,
        default=10_000,
        help="final vocabulary size, at least 256 + the special tokens (default: 10000)",
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
    add_workers_flag(parser, "pre-tokenization")
    add_force_flag(parser, "a tokenizer already in --out-dir")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bars")


def run(args: argparse.Namespace) -> int:
    from cs336_basics.bpe import train_bpe
    from cs336_basics.tokenizer_files import save_merges, save_vocab

    source = require_file(args.input, "training text")
    special_tokens = args.special_tokens if args.special_tokens is not None else ["<|endoftext|>"]
    smallest = 256 + len(set(special_tokens))
    if args.vocab_size < smallest:
        raise InputError(
            f"--vocab-size {args.vocab_size} is too small: the 256 byte tokens and "
            f"{len(set(special_tokens))} special token(s) need at least {smallest}"
        )
    out_dir = Path(args.out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"--out-dir {out_dir} is a file; give a directory")
    outputs = [out_dir / name for name in ("vocab.json", "merges.txt", "special_tokens.json")]
    if not args.force:
        refuse_existing(outputs)
    timings: dict[str, float] = {}
    with reading(f"training text {source}"):
        vocab, merges = train_bpe(
            source,
            args.vocab_size,
            special_tokens,
            num_workers=args.workers,
            progress=not args.no_progress,
            timings=timings,
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    vocab_path, merges_path, specials_path = outputs
    save_vocab(vocab, vocab_path)
    save_merges(merges, merges_path)
    specials_path.write_text(json.dumps(special_tokens, ensure_ascii=False), encoding="utf-8")
    longest = max((a + b for a, b in merges), key=len, default=b"")
    print(
        f"trained {len(vocab)} tokens ({len(merges)} merges) in {timings['total']:.2f}s "
        f"(pre-tokenize {timings['pretokenize']:.2f}s, merge {timings['merge']:.2f}s); "
        f"longest learned token {longest.decode('utf-8', errors='replace')!r}"
    )
    print(f"wrote {vocab_path} and {merges_path}")
    return 0
