"""``cs336 pipeline``: corpus -> tokenizer -> token arrays -> model -> sampled stories, in one go.

With no arguments it runs the embedded default (``cs336_basics/configs/pipeline.toml``): about
five minutes on two CPU cores. ``--tiny`` runs a seconds-long version. Every stage takes user
data instead, e.g. real TinyStories with the handout's model::

    cs336 pipeline --preset tinystories --train-text data/TinyStoriesV2-GPT4-train.txt \\
        --val-text data/TinyStoriesV2-GPT4-valid.txt
"""

from __future__ import annotations

import argparse
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from cs336_basics.pipeline import PRESETS

    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--config", help="a pipeline TOML/JSON file (see cs336_basics/configs/pipeline.toml)"
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
    parser.add_argument("--seed", type=int)
    data = parser.add_argument_group("user data (each replaces a stage's default input)")
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
    sizes = parser.add_argument_group("common settings (the config file holds the rest)")
    sizes.add_argument(
        "--corpus-bytes",
        metavar="BYTES",
        dest="corpus.train_bytes",
        type=int,
        help="generated training text size",
    )
    sizes.add_argument(
        "--vocab-size",
        metavar="N",
        dest="tokenizer.vocab_size",
        type=int,
        help="BPE vocabulary size",
    )
    sizes.add_argument(
        "--max-steps", metavar="N", dest="train.max_steps", type=int, help="optimizer steps"
    )
    sizes.add_argument(
        "--max-seconds",
        metavar="SECONDS",
        dest="train.max_seconds",
        type=float,
        help="training wall-clock budget",
    )
    sizes.add_argument(
        "--batch-size", metavar="N", dest="train.batch_size", type=int, help="sequences per step"
    )
    sizes.add_argument(
        "--device", metavar="DEVICE", dest="train.device", help="cpu, cuda, mps or auto"
    )
    sizes.add_argument(
        "--workers", type=int, help="processes for BPE and encoding (default: all cores)"
    )
    sizes.add_argument("--no-progress", action="store_true", help="hide the training progress bar")


def run(args: argparse.Namespace) -> int:
    from cs336_basics.pipeline import PipelineConfig, embedded_config, print_summary, run_pipeline
    from cs336_basics.training import load_config_file

    try:
        settings = load_config_file(args.config) if args.config else embedded_config(args.preset)
        overrides = {
            key: value
            for key, value in vars(args).items()
            if key not in ("config", "preset", "no_progress", "run", "command")
        }
        config = PipelineConfig.from_dict(settings).with_overrides(**overrides)
        summary = run_pipeline(config, progress=not args.no_progress)
    except (ValueError, FileNotFoundError) as error:
        print(f"cs336 pipeline: {error}", file=sys.stderr)
        return 2
    print_summary(summary)
    return 0 if summary["stopped"] != "non-finite loss" else 1
