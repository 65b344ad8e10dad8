"""``cs336 encode``: turn a text file into a ``.npy`` array of token ids, on all cores.

The tokenizer is a ``vocab.json`` + ``merges.txt`` pair (from ``cs336 train-bpe`` or any GPT-2
format tokenizer). An existing output is only replaced with ``--force``; Ctrl-C stops every
worker at once and leaves no partial output. Example::

    cs336 encode data/TinyStoriesV2-GPT4-valid.txt --tokenizer tokenizers/tinystories --out valid.npy
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from cs336_basics.errors import InputError
from cs336_basics.runner.commands.arguments import add_force_flag, add_workers_flag
from cs336_basics.runner.commands.inputs import (
    load_tokenizer_dir,
    reading,
    refuse_existing,
    require_file,
)


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
    add_workers_flag(parser, "encoding")
    add_force_flag(parser, "the --out file")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def run(args: argparse.Namespace) -> int:
    from cs336_basics.atomic_write import remove_stale_temp_files
    from cs336_basics.runner.encode_file import encode_file, with_compiled_merges

    source = require_file(args.input, "text file")
    out = Path(args.out)
    if out.is_dir():
        raise InputError(f"--out {out} is a directory; give the path of a .npy file to write")
    if not args.force:
        refuse_existing([out])
    for stale in remove_stale_temp_files(out):
        print(f"note: removed {stale}, left by an interrupted encode", file=sys.stderr)
    size = os.path.getsize(source)
    tokenizer = with_compiled_merges(
        load_tokenizer_dir(args.tokenizer, args.special_tokens), size, args.workers
    )
    started = time.perf_counter()
    with reading(f"text file {source}"):
        count = encode_file(
            tokenizer, source, out, num_workers=args.workers, progress=not args.no_progress
        )
    seconds = time.perf_counter() - started
    print(
        f"encoded {size / 1e6:.1f} MB into {count} tokens ({size / max(count, 1):.2f} bytes/token) "
        f"in {seconds:.2f}s ({size / 1e6 / seconds:.1f} MB/s); wrote {out}"
    )
    return 0
