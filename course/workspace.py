"""A workspace: a staged copy of (part of) a tree, edits made in it, pytest run in it.

Mutation testing, the check of the independent solutions, the handout's verification and the
grader all work in copies: ``stage`` copies the files they need, ``apply_edits`` makes exact
before/after edits (the bugs of the mutation catalogues and the alternative solutions are both
lists of ``Edit``), and ``run_pytest`` runs pytest there with the outcomes plugin
(``course/pytest_outcomes.py``) and reads back what happened to each test.

A shared module: it imports nothing of the parts (the grader's staging uses it too).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from course.paths import PYTEST_OUTCOMES, REPO_ROOT
from course.pytest_outcomes import summarize

# The scratch folder of a workspace (plugin, outcome files, pytest's basetemp), when the caller
# names none: inside the copy, where the test paths given to pytest never reach it.
SCRATCH = ".workspace"
EDIT_KEYS = ("path", "before", "after", "why")


@dataclass(frozen=True)
class Edit:
    """Replace the one occurrence of ``before`` in ``path`` (relative to the tree) by ``after``;
    ``why`` says what the edit is (a bug's name, the choice an alternative makes)."""

    path: str
    before: str
    after: str
    why: str


def stage(destination: Path, paths: Iterable[str | Path], source: Path = REPO_ROOT) -> Path:
    """Copy each of ``paths`` (files or folders, relative to ``source``; ``__pycache__`` folders
    left out) to the same place under ``destination``; return ``destination``."""
    for rel in paths:
        origin, target = source / rel, destination / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if origin.is_dir():
            shutil.copytree(origin, target, ignore=shutil.ignore_patterns("__pycache__"))
        elif origin.is_file():
            shutil.copyfile(origin, target)
        else:
            raise FileNotFoundError(f"cannot stage {rel}: no such file or folder in {source}")
    destination.mkdir(parents=True, exist_ok=True)
    return destination


def apply_edits(root: Path, edits: Iterable[Edit]) -> None:
    """Make each edit, in order, in the tree at ``root``; raise ``ValueError`` (naming the edit)
    when its ``before`` does not occur exactly once in its file as edited so far."""
    for edit in edits:
        file = root / edit.path
        file.write_text(replace_once(file.read_text(encoding="utf-8"), edit), encoding="utf-8")


def replace_once(text: str, edit: Edit) -> str:
    """``text`` (the contents of ``edit.path``) with ``edit`` made; raise ``ValueError`` (naming
    the edit) when its ``before`` does not occur exactly once."""
    count = text.count(edit.before)
    if count != 1:
        raise ValueError(
            f"{edit.why}: {edit.before!r} occurs {count} times in {edit.path}, expected once"
        )
    return text.replace(edit.before, edit.after)


@contextmanager
def edited(root: Path, edits: Sequence[Edit]) -> Iterator[None]:
    """The tree at ``root`` with ``edits`` made, restored afterwards (also when an edit does not
    fit: the files are then as they were)."""
    originals = {e.path: (root / e.path).read_text(encoding="utf-8") for e in edits}
    try:
        apply_edits(root, edits)
        yield
    finally:
        for path, text in originals.items():
            (root / path).write_text(text, encoding="utf-8")


def edits_from_toml(entries: object, where: str) -> list[Edit]:
    """The ``[[edit]]`` tables of a TOML file (each with ``path``, ``before``, ``after``, ``why``)."""
    if not isinstance(entries, list):
        raise ValueError(f"{where}: [[edit]] must be a list of tables")
    edits = []
    for number, entry in enumerate(entries, 1):
        if not isinstance(entry, dict) or sorted(entry) != sorted(EDIT_KEYS):
            keys = sorted(entry) if isinstance(entry, dict) else type(entry).__name__
            raise ValueError(f"{where}: edit {number} needs exactly {EDIT_KEYS}, has {keys}")
        if not all(isinstance(entry[key], str) for key in EDIT_KEYS):
            raise ValueError(f"{where}: edit {number}: every field must be a string")
        edits.append(Edit(**entry))
    return edits


@dataclass(frozen=True)
class PytestRun:
    """What a pytest run in a workspace left: each test's outcome (``course/pytest_outcomes.py``),
    the exit status (``None`` when it was stopped at the time limit), its output when captured,
    and a note when the process did not end by itself."""

    outcomes: dict[str, dict]
    returncode: int | None
    output: str = ""
    note: str = ""


def outcomes_file(scratch: Path, label: str) -> Path:
    return scratch / f"{label}.jsonl"


def pytest_arguments(scratch: Path, label: str, args: Sequence[str]) -> list[str]:
    """pytest's arguments for a run that streams outcomes to ``outcomes_file(scratch, label)``
    (``pytest_environment`` says where): quiet, no cache, its temporary files in ``scratch``, in
    one process (``-n 0``: the repository's addopts start workers; the plugin and a ``-x`` run's
    first failure read the tests in file order)."""
    return [
        *("-q", "-n", "0", "-p", "pytest_outcomes", "-p", "no:cacheprovider"),
        f"--basetemp={scratch / (label + '-tmp')}",
        *args,
    ]


def pytest_environment(
    root: Path, scratch: Path, label: str, path: Sequence[Path] = ()
) -> dict[str, str]:
    """This process's environment for a run in ``root``: the plugin copied into ``scratch`` and
    importable, then ``root`` and ``path`` (nothing else of any ``PYTHONPATH`` given to us)."""
    plugin_dir = scratch / "plugin"
    plugin_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(PYTEST_OUTCOMES, plugin_dir / PYTEST_OUTCOMES.name)
    outcomes = outcomes_file(scratch, label)
    outcomes.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CS336_OUTCOMES")}
    return env | {
        "PYTHONPATH": os.pathsep.join(map(str, (plugin_dir, root, *path))),
        "PYTHONDONTWRITEBYTECODE": "1",
        "CS336_OUTCOMES": str(outcomes),
    }


def run_pytest(
    root: Path,
    args: Sequence[str],
    label: str = "run",
    *,
    scratch: Path | None = None,
    timeout: float | None = None,
    python_flags: Sequence[str] = (),
    path: Sequence[Path] = (),
    env: Mapping[str, str] | None = None,
    capture: bool = False,
) -> PytestRun:
    """Run ``python [python_flags] -m pytest ... args`` in ``root`` and read its outcomes.

    ``scratch`` (default ``root/.workspace``) holds the plugin, the outcomes and pytest's
    temporary files; ``path`` goes on ``PYTHONPATH`` after ``root``; ``env`` adds variables;
    ``capture`` keeps stdout and stderr (else they are discarded)."""
    scratch = scratch if scratch is not None else root / SCRATCH
    environment = pytest_environment(root, scratch, label, path) | dict(env or {})
    command = [sys.executable, *python_flags, "-m", "pytest"]
    command += pytest_arguments(scratch, label, args)
    stream = subprocess.PIPE if capture else subprocess.DEVNULL
    try:
        done = subprocess.run(
            command, cwd=root, env=environment, stdout=stream, stderr=stream, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        note = f"tests hung past {timeout:g} s"
        return PytestRun(summarize(outcomes_file(scratch, label)), None, note=note)
    output = (done.stdout or b"").decode(errors="replace") + (done.stderr or b"").decode(
        errors="replace"
    )
    note = f"process died with signal {-done.returncode}" if done.returncode < 0 else ""
    return PytestRun(summarize(outcomes_file(scratch, label)), done.returncode, output, note)
