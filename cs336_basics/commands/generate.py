"""``cs336 generate``: sample completions of one or many prompts from a trained checkpoint.

Example::

    cs336 generate --checkpoint runs/pipeline/checkpoints/latest.pt --tokenizer runs/pipeline/tokenizer \
        --prompt "Once upon a time" --prompt "Tom had a red ball." --temperature 0.8 --top-p 0.9
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--checkpoint", required=True, help="a checkpoint written by cs336 train or pipeline"
    )
    parser.add_argument(
        "--tokenizer", required=True, metavar="DIR", help="directory with vocab.json and merges.txt"
    )
    parser.add_argument(
        "--prompt",
        action="append",
        default=None,
        help="text to continue; repeat for several (default: one empty prompt)",
    )
    parser.add_argument("--prompts-file", help="a text file with one prompt per line")
    parser.add_argument("--max-new-tokens", type=int, default=256, help="(default: 256)")
    parser.add_argument(
        "--temperature", type=float, default=0.8, help="0 means greedy (default: 0.8)"
    )
    parser.add_argument(
        "--top-p", type=float, default=0.95, help="nucleus sampling mass (default: 0.95)"
    )
    parser.add_argument("--seed", type=int, default=0, help="(default: 0)")
    parser.add_argument("--device", default="auto", help="cpu, cuda, cuda:1, mps or auto (default)")
    parser.add_argument(
        "--no-kv-cache", action="store_true", help="recompute the whole sequence each step"
    )
    parser.add_argument(
        "--end-token", default="<|endoftext|>", help="stop after this special token"
    )


def load_tokenizer_dir(directory: str | os.PathLike, special_tokens: list[str] | None = None):
    """A ``Tokenizer`` from a ``cs336 train-bpe`` output directory."""
    from cs336_basics.tokenizer import Tokenizer

    saved = os.path.join(directory, "special_tokens.json")
    if special_tokens is None and os.path.exists(saved):
        with open(saved, encoding="utf-8") as file:
            special_tokens = json.load(file)
    return Tokenizer.from_files(
        os.path.join(directory, "vocab.json"),
        os.path.join(directory, "merges.txt"),
        special_tokens if special_tokens is not None else ["<|endoftext|>"],
    )


def run(args: argparse.Namespace) -> int:
    from cs336_basics.builder import generate_function
    from cs336_basics.checkpoint import CheckpointError, model_from_checkpoint
    from cs336_basics.generation import complete_prompts
    from cs336_basics.training import auto_device

    prompts = list(args.prompt or [])
    if args.prompts_file:
        with open(args.prompts_file, encoding="utf-8") as file:
            prompts += [line.rstrip("\n") for line in file if line.strip()]
    prompts = prompts or [""]
    device = auto_device() if args.device == "auto" else args.device
    try:
        model = model_from_checkpoint(args.checkpoint, device=device)
    except CheckpointError as error:
        print(f"cs336 generate: {error}", file=sys.stderr)
        return 2
    tokenizer = load_tokenizer_dir(args.tokenizer)
    if len(tokenizer.vocab) > model.lm_head.weight.shape[0]:
        print(
            f"cs336 generate: the tokenizer has {len(tokenizer.vocab)} tokens but the model only "
            f"{model.lm_head.weight.shape[0]}; were they trained together?",
            file=sys.stderr,
        )
        return 2
    completions = complete_prompts(
        model,
        tokenizer,
        prompts,
        args.max_new_tokens,
        args.temperature,
        args.top_p,
        args.seed,
        args.end_token,
        generate_function(use_kv_cache=not args.no_kv_cache),
    )
    for index, text in enumerate(completions):
        print(f"--- sample {index + 1} ---\n{text}")
    return 0
