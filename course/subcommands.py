"""One entry point per part: ``python -m course.<part> [command] [options]``.

Each part's ``__main__`` names its commands and the module that runs each one; the command's own
options follow it (``python -m course.handout verify --extensions``). Without a command, the part's
default runs with every argument given.
"""

import runpy
import sys


def run_part(part: str, commands: dict[str, tuple[str, str]], default: str) -> None:
    """Run the command named by ``sys.argv[1]`` (or ``default``) as its module's ``__main__``.

    ``commands`` maps a command to (module, what it does), the text ``--help`` prints.
    """
    args = sys.argv[1:]
    if args and args[0] in ("-h", "--help") and default not in commands:
        args = ["help"]
    if args and args[0] == "help":
        print(usage(part, commands, default))
        return
    name = args[0] if args and args[0] in commands else default
    rest = args[1:] if args and args[0] == name else args
    module = commands[name][0]
    sys.argv = [f"python -m course.{part} {name}", *rest]
    runpy.run_module(module, run_name="__main__")


def usage(part: str, commands: dict[str, tuple[str, str]], default: str) -> str:
    lines = [
        f"usage: python -m course.{part} [command] [options]   (default command: {default})",
        "",
    ]
    width = max(map(len, commands))
    lines += [f"  {name:<{width}}  {purpose}" for name, (_, purpose) in commands.items()]
    lines += ["", f"python -m course.{part} <command> --help: that command's options"]
    return "\n".join(lines)
