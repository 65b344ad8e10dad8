"""``cs336 pipeline``: corpus -> tokenizer -> token arrays -> model -> sampled stories, in one go.

With no arguments it runs the embedded default (``cs336_basics/runner/configs/pipeline.toml``): about
five minutes on two CPU cores. ``--tiny`` runs a seconds-long version. Every stage takes user
data instead, e.g. real TinyStories with the handout's model::

    cs336 pipeline --preset tinystories --train-text data/TinyStoriesV2-GPT4-train.txt \\
        --val-text data/TinyStoriesV2-GPT4-valid.txt
"""

from __future__ import annotations

import argparse
import sys

from cs336_basics.errors import RunFailedError
from cs336_basics.runner.cli import INTERRUPTED_EXIT_CODE
from cs336_basics.runner.commands.arguments import add_workers_flag, positive_float, positive_int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from cs336_basics.runner.pipeline import PRESETS

    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--config", help="a pipeline TOML/JSON file (see cs336_basics/runner/configs/pipeline.toml)"
    )
    source.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        default="default",
        help="an embedded config: default (stories, ~5 min on CPU), tiny (seconds), "
        "tinystories (the handout's model; needs --train-text/--val-text)",
    )
    source.add_argument(
        "--tiny", action="store_const", dest="preset", const="tiny", help="same as --preset tiny"
    )
    parser.add_argument("--run-dir", help="where everything is written (default: runs/pipeline)")
    parser.add_argument(
        "--overwrite", action="store_true", help="replace a run already in --run-dir"
    )
    parser.add_argument("--seed", type=int)
    _add_user_data_flags(
        parser.add_argument_group("user data (each replaces a stage's default input)")
    )
    _add_common_settings(
        parser.add_argument_group("common settings (the config file holds the rest)")
    )


def _add_user_data_flags(data: argparse._ArgumentGroup) -> None:
    data.add_argument(
        "--train-text", help="training corpus (UTF-8 text) instead of generated stories"
    )
    data.add_argument("--val-text", help="validation corpus, required with --train-text")
    data.add_argument(
        "--tokenizer",
        dest="tokenizer_dir",
        metavar="DIR",
        help="an existing vocab.json + merges.txt directory instead of training BPE",
    )
    data.add_argument("--train-tokens", help="a ready .npy token array (skips corpus encoding)")
    data.add_argument("--val-tokens", help="a ready validation .npy token array")


def _add_common_settings(sizes: argparse._ArgumentGroup) -> None:
    sizes.add_argument(
        "--corpus-bytes",
        metavar="BYTES",
        dest="corpus.train_bytes",
        type=positive_int,
        help="generated training text size",
    )
    sizes.add_argument(
        "--vocab-size",
        metavar="N",
        dest="tokenizer.vocab_size",
        type=positive_int,
        help="BPE vocabulary size",
    )
    sizes.add_argument(
        "--max-steps",
        metavar="N",
        dest="train.max_steps",
        type=positive_int,
        help="optimizer steps",
    )
    sizes.add_argument(
        "--max-seconds",
        metavar="SECONDS",
        dest="train.max_seconds",
        type=positive_float,
        help="training wall-clock budget",
    )
    sizes.add_argument(
        "--batch-size",
        metavar="N",
        dest="train.batch_size",
        type=positive_int,
        help="sequences per step",
    )
    sizes.add_argument(
        "--device", metavar="DEVICE", dest="train.device", help="cpu, cuda, mps or auto"
    )
    add_workers_flag(sizes, "BPE and encoding")
    sizes.add_argument("--no-progress", action="store_true", help="hide the training progress bar")


def run(args: argparse.Namespace) -> int:
    from cs336_basics.run_folder import RunFolder
    from cs336_basics.runner.pipeline import (
        PipelineConfig,
        embedded_config,
        print_summary,
        run_pipeline,
    )
    from cs336_basics.train_config import load_config_file

    settings = load_config_file(args.config) if args.config else embedded_config(args.preset)
    ignored = (
        "config",
        "preset",
        "no_progress",
        "overwrite",
        "run",
        "command",
        "debug",
        "subparsers",
    )
    overrides = {key: value for key, value in vars(args).items() if key not in ignored}
    config = PipelineConfig.from_dict(settings).with_overrides(**overrides)
    summary = run_pipeline(config, progress=not args.no_progress, overwrite=args.overwrite)
    if summary["stopped"] == "interrupted":
        print(
            f"cs336 pipeline: interrupted while training, at step {summary['steps']}; resume the "
            f"training with: {RunFolder(config.run_dir).resume_command()}",
            file=sys.stderr,
        )
        return INTERRUPTED_EXIT_CODE
    print_summary(summary)
    if summary["stopped"] == "non-finite loss":
        raise RunFailedError(summary["failure"] or "the training loss became NaN/inf")
    return 0
