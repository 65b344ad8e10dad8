"""How a run starts: the programs that run in other processes, read from ``programs/`` by path
(``prepare`` on the host, ``launcher`` first inside the sandbox, ``probe`` as a test run), and
what each mode hands the prepare step (``Launch``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

PROGRAMS = Path(__file__).with_name("programs")
CONFINE = Path(__file__).parent.parent / "confine.py"


@cache
def program(name: str) -> str:
    """The source of ``programs/<name>.py``: run by ``python -S -c``, so that no command line
    names a host path and no ``.pth`` of the environment runs first."""
    return (PROGRAMS / f"{name}.py").read_text(encoding="utf-8")


@cache
def _confine_source() -> str:
    """course/grading/confine.py's definitions (not its command line: ``-c`` code runs as
    ``__main__``)."""
    source = CONFINE.read_text(encoding="utf-8")
    return source.split('\nif __name__ == "__main__":')[0] + "\n"


def launcher_argv(python: str, spec: dict) -> list[str]:
    """The launcher: course/grading/confine.py's functions, then ``programs/launcher.py``, run
    by ``python -S -c`` with its ``spec``."""
    return [python, "-S", "-c", _confine_source() + program("launcher"), json.dumps(spec)]


@dataclass(frozen=True)
class Launch:
    """How the prepare step (``programs/prepare.py``) starts one run: the command it execs (and that command's environment), the
    bind mounts it makes first, the descriptors the run inherits, the run's box (container)."""

    argv: list[str]
    env: dict[str, str]
    stage: list[tuple[str, str]]
    fds: tuple[int, ...]
    box: Path | None = None
