"""Prove the handout is sound: ``python -m course.verify_handout`` (``make verify-handout``).

Builds the handout in a temporary folder, then checks that

1. no solution marker, instructor-only folder or ``course`` import is left in it, and every
   Python file parses;
2. every module of ``cs336_basics`` and ``tests.adapters`` imports cleanly from the handout
   (not from the reference checkout);
3. every test in the handout fails with ``NotImplementedError`` — no collection, import or
   syntax errors, and no test that passes without student code;
4. the reference passes every test the handout ships.

Exits non-zero and lists each problem otherwise.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from course.handout import (
    BEGIN_MARKER,
    END_MARKER,
    IMPORTS_COURSE,
    INSTRUCTOR_ONLY,
    REPO_ROOT,
    build,
    shipped_files,
)
from course.pytest_outcomes import summarize

PLUGIN = Path(__file__).with_name("pytest_outcomes.py")
IMPORT_CHECK = """
import importlib, pkgutil, sys
from pathlib import Path
root = Path.cwd().resolve()
import cs336_basics
assert Path(cs336_basics.__file__).resolve().is_relative_to(root), f"cs336_basics came from {cs336_basics.__file__}"
for module in pkgutil.walk_packages(cs336_basics.__path__, "cs336_basics."):
    importlib.import_module(module.name)
import tests.adapters
"""


def run_suite(cwd: Path, test_files: list[str], scratch: Path, label: str) -> dict[str, dict]:
    """Run ``test_files`` under pytest in ``cwd``; return per-test outcomes."""
    plugin_dir = scratch / "plugin"
    plugin_dir.mkdir(exist_ok=True)
    shutil.copyfile(PLUGIN, plugin_dir / PLUGIN.name)
    outcomes = scratch / f"{label}.jsonl"
    env = {
        **_base_env(),
        "PYTHONPATH": f"{plugin_dir}:{cwd}",
        "CS336_OUTCOMES": str(outcomes),
    }
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "pytest_outcomes",
            "-p",
            "no:cacheprovider",
            f"--basetemp={scratch / (label + '-tmp')}",
            *test_files,
        ],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return summarize(outcomes)


def _base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CS336_OUTCOMES")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def static_problems(handout: Path) -> list[str]:
    problems = [
        f"instructor-only path shipped: {name}"
        for name in INSTRUCTOR_ONLY
        if name not in ("README.md", "Makefile") and (handout / name).exists()
    ]
    for path in sorted(handout.rglob("*.py")):
        rel = path.relative_to(handout)
        text = path.read_text(encoding="utf-8")
        if BEGIN_MARKER in text or END_MARKER in text:
            problems.append(f"{rel}: a solution marker survived stripping")
        if IMPORTS_COURSE.search(text):
            problems.append(f"{rel}: imports course/, which the handout does not ship")
        try:
            compile(text, str(rel), "exec")
        except SyntaxError as error:
            problems.append(f"{rel}:{error.lineno}: syntax error: {error.msg}")
    return problems


def handout_test_problems(outcomes: dict[str, dict]) -> list[str]:
    problems = []
    if not outcomes:
        problems.append("the handout's test run recorded nothing (pytest could not start)")
    for nodeid, result in sorted(outcomes.items()):
        first_line = result["message"].strip().splitlines()[-1:] or [""]
        if result["outcome"] == "collect_error":
            problems.append(f"{nodeid}: collection error: {first_line[0]}")
        elif result["outcome"] == "passed":
            problems.append(f"{nodeid}: passes without any student code")
        elif result["outcome"] in ("failed", "error"):
            if "NotImplementedError" not in result["exceptions"]:
                chain = " <- ".join(result["exceptions"]) or "no exception"
                problems.append(
                    f"{nodeid}: fails with {chain}, not NotImplementedError: {first_line[0]}"
                )
        else:
            problems.append(
                f"{nodeid}: {result['outcome']} (expected a NotImplementedError failure)"
            )
    return problems


def reference_test_problems(outcomes: dict[str, dict]) -> list[str]:
    if not outcomes:
        return ["the reference test run recorded nothing (pytest could not start)"]
    return [
        f"{nodeid}: {result['outcome']} on the reference: "
        + (result["message"].strip().splitlines()[-1:] or [""])[0]
        for nodeid, result in sorted(outcomes.items())
        if result["outcome"] not in ("passed", "skipped")
    ]


def verify(root: Path = REPO_ROOT, check_reference: bool = True) -> list[str]:
    with tempfile.TemporaryDirectory(prefix="verify-handout-") as tmp:
        scratch = Path(tmp)
        handout = build(scratch / "dist", root=root).directory
        problems = static_problems(handout)
        imported = subprocess.run(
            [sys.executable, "-c", IMPORT_CHECK],
            cwd=handout,
            env={**_base_env(), "PYTHONPATH": str(handout)},
            capture_output=True,
            text=True,
        )
        if imported.returncode != 0:
            problems.append(f"the handout does not import cleanly:\n{imported.stderr.strip()}")
        test_files = sorted(
            p.as_posix()
            for p in shipped_files(root)
            if p.parts[0] == "tests" and p.name.startswith("test_") and p.suffix == ".py"
        )
        if not test_files:
            problems.append("the handout ships no test files")
            return problems
        problems += handout_test_problems(run_suite(handout, test_files, scratch, "handout"))
        if check_reference:
            problems += reference_test_problems(run_suite(root, test_files, scratch, "reference"))
        return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--skip-reference", action="store_true", help="do not run the reference's tests"
    )
    args = parser.parse_args(argv)
    problems = verify(check_reference=not args.skip_reference)
    if problems:
        print(f"handout verification FAILED ({len(problems)} problem(s)):")
        for problem in problems:
            print(f"  - {problem}")
        return 1
    print(
        "handout verified: imports cleanly, every test fails with NotImplementedError, reference passes"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
