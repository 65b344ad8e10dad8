"""``cs336 train``: train a Transformer LM on token arrays.

Settings come from ``--config FILE`` (JSON or TOML: training settings at the top level and a
``model`` table), then from flags, which override the file. Every ``TrainConfig`` setting has
a flag (``--lr-max``) and so does every ``ModelConfig`` field (``--d-model``). An ``--out-dir``
that holds a run is continued with ``--resume`` or replaced with ``--overwrite``, never
silently; Ctrl-C or SIGTERM saves a checkpoint and prints the command that resumes. Launch with
``torchrun --nproc-per-node N -m cs336_basics.runner.cli train ...`` for data-parallel training.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import types
import typing
from typing import Any

from cs336_basics.errors import RunFailedError
from cs336_basics.runner.cli import INTERRUPTED_EXIT_CODE
from cs336_basics.runner.commands.inputs import require_file


def add_dataclass_flags(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, cls: type, dest_prefix: str = ""
) -> None:
    """One ``--kebab-name`` flag per dataclass field, typed from its annotation, default unset."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        kind = hints[f.name]
        if dataclasses.is_dataclass(kind):
            continue
        args = [a for a in typing.get_args(kind) if a is not type(None)]
        if typing.get_origin(kind) in (typing.Union, types.UnionType) and len(args) == 1:
            kind = args[0]
        flag = "--" + f.name.replace("_", "-")
        dest = dest_prefix + f.name
        default = f.default if f.default is not dataclasses.MISSING else "required"
        help_text = f"(default: {default})"
        if kind is bool:
            parser.add_argument(
                flag, dest=dest, action=argparse.BooleanOptionalAction, default=None, help=help_text
            )
        elif typing.get_origin(kind) is typing.Literal:
            parser.add_argument(
                flag, dest=dest, choices=typing.get_args(kind), default=None, help=help_text
            )
        else:
            parser.add_argument(
                flag, dest=dest, type=kind, default=None, metavar=f.name.upper(), help=help_text
            )


def flag_overrides(args: argparse.Namespace, cls: type, dest_prefix: str = "") -> dict[str, Any]:
    """The flags the user actually gave, as ``{dest: value}``."""
    names = (dest_prefix + f.name for f in dataclasses.fields(cls))
    return {name: getattr(args, name) for name in names if getattr(args, name, None) is not None}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from cs336_basics.runner.extensions import model_config_class
    from cs336_basics.train_config import TrainConfig

    parser.add_argument(
        "--config", help="JSON or TOML file with training settings and a model table"
    )
    replace = parser.add_mutually_exclusive_group()
    replace.add_argument(
        "--resume",
        nargs="?",
        const=True,
        default=None,
        metavar="CHECKPOINT",
        help="continue from CHECKPOINT (default: <out-dir>/checkpoints/latest.pt)",
    )
    replace.add_argument(
        "--overwrite",
        action="store_true",
        help="start afresh in an --out-dir that already holds a run, replacing it",
    )
    add_dataclass_flags(parser.add_argument_group("training settings"), TrainConfig)
    add_dataclass_flags(
        parser.add_argument_group("model settings"),
        model_config_class().flag_class(),
        dest_prefix="model.",
    )


def run(args: argparse.Namespace) -> int:
    from cs336_basics.run_folder import RunFolder
    from cs336_basics.runner.extensions import model_config_class
    from cs336_basics.token_arrays import load_checked_tokens
    from cs336_basics.train_config import TrainConfig, load_config_file, merge_overrides

    settings = load_config_file(args.config) if args.config else {}
    overrides = {
        **flag_overrides(args, TrainConfig),
        **flag_overrides(args, model_config_class().flag_class(), "model."),
    }
    config = TrainConfig.from_dict(merge_overrides(settings, overrides))
    is_main = int(os.environ.get("RANK", "0")) == 0  # under torchrun, rank 0 speaks for all
    folder = RunFolder(config.out_dir)
    # Everything that can be checked without torch is checked first: bad input fails at once.
    if is_main:
        folder.check(resume=args.resume or False, overwrite=args.overwrite)
    if args.resume not in (None, True):
        require_file(args.resume, "checkpoint to resume from (--resume)")
    for path in filter(None, (config.train_data, config.val_data)):
        shape = config.model.vocab_size, config.model.context_length
        load_checked_tokens(path, config.data_dtype, *shape)

    from cs336_basics.training import train

    result = train(config, resume=args.resume, overwrite=args.overwrite)
    if result.stopped == "non-finite loss":
        if not is_main:
            return 1  # rank 0 reports it
        raise RunFailedError(
            result.failure or f"the training loss became NaN/inf after step {result.step}"
        )
    if result.stopped == "interrupted":
        if not is_main:
            return INTERRUPTED_EXIT_CODE
        print(
            f"cs336 train: interrupted at step {result.step}; checkpoint {result.checkpoint}; "
            f"resume with: {folder.resume_command()}",
            file=sys.stderr,
        )
        return INTERRUPTED_EXIT_CODE
    if not is_main:
        return 0
    summary = f"{result.stopped} at step {result.step}"
    if result.val_loss is not None:
        summary += f"; validation loss {result.val_loss:.4f}"
    print(
        f"{summary}; checkpoint {result.checkpoint}; metrics {result.metrics}; plot {result.plot}"
    )
    return 0
