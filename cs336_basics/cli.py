"""The cs336 command: one entry point, one subcommand per stage of building a language model.

Each stage lives in ``cs336_basics.commands.<name>`` and exposes two functions:
``add_arguments(parser)`` declares its flags and ``run(args) -> int`` does the work.
Modules are imported only when their subcommand runs, so ``cs336 --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys

SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "train-bpe": ("train_bpe", "train a byte-level BPE tokenizer on a text file"),
    "encode": ("encode", "encode a text file into a .npy array of token ids"),
    "train": ("train", "train a Transformer LM on token arrays"),
    "generate": ("generate", "sample completions from a checkpoint"),
    "accounting": ("accounting", "parameters, memory and FLOPs of a model config"),
    "pipeline": ("pipeline", "end to end: corpus -> tokenizer -> tokens -> model -> samples"),
}


def build_parser(argv: list[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cs336", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    requested = next((a for a in argv if not a.startswith("-")), None)
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        sub = subparsers.add_parser(name, help=help_text, description=help_text)
        # Only the chosen subcommand's module is imported (torch is slow to import).
        if name == requested:
            module = importlib.import_module(f"cs336_basics.commands.{module_name}")
            module.add_arguments(sub)
            sub.set_defaults(run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv).parse_args(argv)
    return int(args.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
