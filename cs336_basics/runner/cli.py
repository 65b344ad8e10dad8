"""The cs336 command: one entry point, one subcommand per stage of building a language model.

Each stage lives in ``cs336_basics.runner.commands.<name>`` and exposes two functions:
``add_arguments(parser)`` declares its flags and ``run(args) -> int`` does the work.
Modules are imported only when their subcommand runs, so ``cs336 --help`` stays fast; the
subcommands that read or build models load the installed extensions first (the architecture
variants, see ``cs336_basics.runner.extensions``).

Every failure a user can fix ends the same way: one line on stderr,
``cs336 <command>: error: <what went wrong and what to do>``, and exit status 2 (bad input or
usage) or 1 (a run that failed by itself); Ctrl-C (or SIGTERM) prints one line and exits 130.
``--debug`` or ``CS336_DEBUG=1`` adds the traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading
import traceback

from cs336_basics.errors import CS336Error

SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "train-bpe": ("train_bpe", "train a byte-level BPE tokenizer on a text file"),
    "encode": ("encode", "encode a text file into a .npy array of token ids"),
    "train": ("train", "train a Transformer LM on token arrays"),
    "generate": ("generate", "sample completions from a checkpoint"),
    "export-hf": ("export_hf", "write a checkpoint as a Hugging Face model directory"),
    "accounting": ("accounting", "parameters, memory and FLOPs of a model config"),
    "pipeline": ("pipeline", "end to end: corpus -> tokenizer -> tokens -> model -> samples"),
}

# The subcommands that only read and write text and token arrays: no torch, no extensions.
TEXT_ONLY = ("train-bpe", "encode")

INTERRUPTED_EXIT_CODE = 130  # the shell's code for a process stopped by SIGINT


class OneLineErrorParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors are one line, like every other cs336 error."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser(argv: list[str]) -> argparse.ArgumentParser:
    parser = OneLineErrorParser(prog="cs336", description=__doc__.splitlines()[0])
    parser.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    parser.set_defaults(subparsers=subparsers.choices)
    requested = next((a for a in argv if not a.startswith("-")), None)
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        sub = subparsers.add_parser(name, help=help_text, description=help_text)
        sub.add_argument(
            "--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks"
        )
        # Only the chosen subcommand's module is imported (torch is slow to import).
        if name == requested:
            if name not in TEXT_ONLY:
                from cs336_basics.runner.extensions import load_extensions

                load_extensions()
            module = importlib.import_module(f"cs336_basics.runner.commands.{module_name}")
            module.add_arguments(sub)
            sub.set_defaults(run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args, unknown = build_parser(argv).parse_known_args(argv)
    if unknown:  # reported by the subcommand, whose --help lists the flags it has
        args.subparsers[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    debug = args.debug or os.environ.get("CS336_DEBUG", "") not in ("", "0")
    name = f"cs336 {args.command}"
    try:
        with _sigterm_as_interrupt():
            return int(args.run(args) or 0)
    except CS336Error as error:
        return _report(name, str(error), error.exit_code, debug)
    except KeyboardInterrupt:
        return _report(name, "interrupted; partial outputs were removed", 130, debug)
    except OSError as error:  # disk full, permission denied, ...: the machine, not the code
        where = f" ({error.filename})" if error.filename else ""
        return _report(name, f"{error.strerror or error}{where}", 1, debug)
    except (MemoryError, RuntimeError) as error:
        if not isinstance(error, MemoryError) and "out of memory" not in str(error):
            raise  # a bug: its traceback is what a report needs
        advice = "lower --batch-size (raising --grad-accum-steps keeps the tokens per step)"
        return _report(name, f"out of memory ({str(error)[:120]}); {advice}", 1, debug)


def _report(name: str, message: str, exit_code: int, debug: bool) -> int:
    if debug:
        traceback.print_exc()
    first_line = " ".join(message.split())  # messages from deeper code may span lines
    label = "error: " if exit_code != INTERRUPTED_EXIT_CODE else ""
    print(f"{name}: {label}{first_line}", file=sys.stderr)
    return exit_code


class _sigterm_as_interrupt:
    """Treat SIGTERM like Ctrl-C, so ``kill`` also cleans up partial outputs on the way out.

    Forked worker processes inherit the handler; in them SIGTERM keeps its default meaning
    (a pool's ``terminate`` must end them quietly).
    """

    def __enter__(self) -> None:
        self.previous = None
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGTERM, _interrupt_in(os.getpid()))

    def __exit__(self, *exc_info) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGTERM, self.previous)


def _interrupt_in(main_pid: int):
    def handler(number: int, frame) -> None:
        if os.getpid() != main_pid:  # a forked worker: die as SIGTERM normally does
            signal.signal(number, signal.SIG_DFL)
            os.kill(os.getpid(), number)
            return
        raise KeyboardInterrupt

    return handler


if __name__ == "__main__":
    sys.exit(main())
