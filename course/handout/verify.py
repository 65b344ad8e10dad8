"""Prove the handout is sound: ``python -m course.handout.verify`` (``make verify-handout``).

Builds the handout in a temporary folder, then checks that

1. no solution marker or instructor-only folder is left in it, every Python file parses, no
   shipped test imports ``course`` or ``cs336_basics`` (tests reach student code only through
   ``tests/adapters.py``), and nothing under ``tests/`` (the variants' tests aside) could stand
   in for a graded part: no import of a package that implements one (tiktoken, tokenizers,
   transformers), no loop over adjacent pairs (what a BPE trainer or encoder is built on);
   The shipped prose (the README, the Makefile, Python comments and strings) uses no instructor
   vocabulary (``INSTRUCTOR_VOCABULARY``: issue numbers, release notes in progress, the
   reference's compiled or extension internals, mutation testing);
2. every function and method of a graded module is a skeleton: its body is an optional
   docstring and ``raise NotImplementedError``, and no lambda or other code computes anything;
3. no module that ships complete implements a graded quantity: none defines a public name of a
   graded module, and none repeats a piece of graded math (see ``course/handout/solution_clones.py``);
4. every module of ``cs336_basics`` and ``tests.adapters`` imports cleanly from the handout;
5. every test in the handout fails with ``NotImplementedError``: no collection, import or
   syntax error, no other exception, no test that passes without student code;
6. the reference passes every test the handout ships.

``--extensions`` checks the extension handout the same way, except that there only the
extension's tests (``tests/variants/``) are the student's: the others test the complete core
and must pass in the handout. Exits non-zero and lists each
problem, by file and line or by test id, otherwise.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import subprocess
import sys
import tempfile
import time
import tokenize
from pathlib import Path

from course.handout.build import (
    BEGIN_MARKER,
    END_MARKER,
    INSTRUCTOR_ONLY,
    PACKAGE,
    REPO_ROOT,
    build,
    plan,
    select,
)
from course.handout.solution_clones import find_clones, solution_fragments
from course.workspace import run_pytest

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
FORBIDDEN_IN_TESTS = ("course", PACKAGE)
# Packages that implement a graded part (a BPE tokenizer): the instructor's references use them
# (course/cases/truths), the shipped tests compare with the values they produced instead.
ORACLE_PACKAGES = ("tiktoken", "tokenizers", "transformers", "sentencepiece")
MARKERS = (BEGIN_MARKER, END_MARKER)
# Words that belong to this repository's work, not to the assignment: the handout must read as
# an assignment. Each pattern (case-insensitive) with what it gives away.
INSTRUCTOR_VOCABULARY = {
    r"\bissues? #?\d+": "an issue number",
    r"\bunreleased\b": "release notes in progress",
    r"\bnumba\b|\bfast_?tokenizer\b|\bcompiled merges\b": "the reference's compiled tokenizer",
    r"\bextension handout\b|\bmoved as a unit\b": "how the handouts are assembled",
    r"\bcs336_basics\.variants\b|\btests/variants\b": "the extension's modules",
    r"\bmutants?\b|\bmutation testing\b": "the suite's mutation testing",
}


def run_suite(cwd: Path, test_files: list[str], scratch: Path, label: str) -> dict[str, dict]:
    """Run ``test_files`` under pytest in ``cwd``; return per-test outcomes."""
    # One file that fails to import must not hide the outcomes of all the others.
    arguments = ["--continue-on-collection-errors", *test_files]
    return run_pytest(cwd, arguments, label, scratch=scratch).outcomes


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
        if any(marker in text for marker in MARKERS):
            problems.append(f"{rel}: a solution marker survived")
        try:
            tree = ast.parse(text, filename=str(rel))
        except SyntaxError as error:
            problems.append(f"{rel}:{error.lineno}: syntax error: {error.msg}")
            continue
        if rel.parts[0] == "tests" and rel.name != "adapters.py":  # adapters reach student code
            problems += forbidden_imports(rel, tree)
        if rel.parts[0] == "tests" and rel.parts[1] != "variants":
            problems += oracle_problems(rel, tree)
        elif rel.parts[0] != "tests":
            problems += [p for p in forbidden_imports(rel, tree) if "imports course" in p]
    return problems


def prose(path: Path) -> list[tuple[int, str]]:
    """``(line, text)`` of what a student reads in ``path``: a Python file's comments and
    strings, any other text file whole."""
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".py":
        return list(enumerate(text.splitlines(), start=1))
    lines = iter(text.splitlines(keepends=True))
    return [
        (token.start[0], token.string)
        for token in tokenize.generate_tokens(lambda: next(lines, ""))
        if token.type in (tokenize.COMMENT, tokenize.STRING)
    ]


def vocabulary_problems(handout: Path, kind: str) -> list[str]:
    """Instructor vocabulary in the base handout's prose (the extension handout is about the
    extension, so it may name it)."""
    if kind != "base":
        return []
    files = [handout / "README.md", handout / "Makefile", *sorted(handout.rglob("*.py"))]
    problems = []
    for path in files:
        if not path.is_file():
            continue
        for line, text in prose(path):
            for pattern, meaning in INSTRUCTOR_VOCABULARY.items():
                found = re.search(pattern, text, re.IGNORECASE)
                if found:
                    problems.append(
                        f"{path.relative_to(handout)}:{line}: {found.group(0)!r} names {meaning}"
                    )
    return problems


def _guarded_imports(tree: ast.Module) -> set[int]:
    """Ids of imports inside ``try: ... except ImportError:`` (optional instructor tooling)."""
    guarded: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
            isinstance(h.type, ast.Name) and h.type.id in ("ImportError", "ModuleNotFoundError")
            for h in node.handlers
        ):
            guarded |= {id(n) for s in node.body for n in ast.walk(s)}
    return guarded


def forbidden_imports(rel: Path, tree: ast.Module) -> list[str]:
    """Imports of ``course`` (never shipped; tolerated only behind ``except ImportError``) or
    of ``cs336_basics`` (tests reach student code through ``tests/adapters.py`` only)."""
    problems = []
    guarded = _guarded_imports(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            modules = [node.module or ""]
        else:
            continue
        for module in modules:
            top = module.split(".")[0]
            if top in FORBIDDEN_IN_TESTS and not (top == "course" and id(node) in guarded):
                problems.append(
                    f"{rel}:{node.lineno}: imports {top}"
                    + (" (not shipped)" if top == "course" else " (use tests/adapters.py)")
                )
    return problems


def oracle_problems(rel: Path, tree: ast.Module) -> list[str]:
    """What in a shipped test file could compute a graded quantity for a student: imports of
    ``ORACLE_PACKAGES``, and ``zip(x, x[1:])``-style loops over adjacent pairs, the core of a
    BPE trainer or encoder."""
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            modules = [node.module or ""]
        else:
            modules = []
        problems += [
            f"{rel}:{node.lineno}: imports {m} (implements a graded part; ship its outputs)"
            for m in modules
            if m.split(".")[0] in ORACLE_PACKAGES
        ]
        if is_adjacent_pairs(node):
            problems.append(
                f"{rel}:{node.lineno}: loops over adjacent pairs (a BPE trainer or encoder "
                "belongs in course/cases/truths)"
            )
    return problems


def is_adjacent_pairs(node: ast.AST) -> bool:
    """``zip(x, x[1:])`` or ``zip(x[:-1], x[1:])``, any extra arguments aside."""
    if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "zip"):
        return False
    if len(node.args) < 2 or not isinstance(node.args[1], ast.Subscript):
        return False
    first, second = node.args[0], node.args[1]
    base = first.value if isinstance(first, ast.Subscript) else first
    cut = second.slice
    return (
        ast.dump(base) == ast.dump(second.value)
        and isinstance(cut, ast.Slice)
        and isinstance(cut.lower, ast.Constant)
        and cut.lower.value == 1
    )


def is_skeleton_body(body: list[ast.stmt]) -> bool:
    """``[docstring,] raise NotImplementedError[(...)]`` and nothing else."""
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    if len(body) != 1 or not isinstance(body[0], ast.Raise):
        return False
    raised = body[0].exc
    if isinstance(raised, ast.Call):
        raised = raised.func
    return isinstance(raised, ast.Name) and raised.id == "NotImplementedError"


def skeleton_problems(rel: Path, text: str) -> list[str]:
    """Every function of a graded module must be a skeleton; no lambda may compute anything."""
    problems = []
    for node in ast.walk(ast.parse(text, filename=str(rel))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if not is_skeleton_body(node.body):
                problems.append((node.lineno, f"{node.name} ships a body, not a skeleton"))
        elif isinstance(node, ast.Lambda):
            problems.append((node.lineno, "a lambda ships in a graded module"))
    return [f"{rel}:{line}: {problem}" for line, problem in sorted(problems)]


def public_names(text: str) -> set[str]:
    """Top-level public functions and classes of a module."""
    return {
        node.name
        for node in ast.parse(text).body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        and not node.name.startswith("_")
    }


def graded_code_problems(root: Path, handout: Path, kind: str) -> list[str]:
    """Checks 2 and 3: skeletons are empty, and complete modules implement nothing graded.

    In the extension handout the core ships complete on purpose (it is the base assignment's
    answer, and the variants extend it under the same names), so check 3 looks only at the
    extension's own support modules there.
    """
    treatments = plan(root, kind)
    graded = [rel for rel, how in treatments.items() if how == "skeleton"]
    core = set(plan(root, "base")) if kind == "extension" else set()
    complete = [
        rel
        for rel, how in treatments.items()
        if rel.parts[0] == PACKAGE and rel.suffix == ".py" and how != "skeleton" and rel not in core
    ]
    problems = []
    for rel in graded:
        problems += skeleton_problems(rel, (handout / rel).read_text(encoding="utf-8"))
    reference = {str(rel): (root / rel).read_text(encoding="utf-8") for rel in graded}
    graded_names = {name: path for path, text in reference.items() for name in public_names(text)}
    fragments = solution_fragments(reference)
    for rel in complete:
        text = (handout / rel).read_text(encoding="utf-8")
        problems += [
            f"{rel}: defines {name}, a graded name of {graded_names[name]}"
            for name in sorted(public_names(text) & set(graded_names))
        ]
        problems += find_clones(str(rel), text, fragments)
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
            # The exception the test ended with, not one it was handling: pytest.raises(match=...)
            # failing on a NotImplementedError ends with an AssertionError.
            if result["exceptions"][:1] != ["NotImplementedError"]:
                chain = " <- ".join(result["exceptions"]) or "no exception"
                problems.append(
                    f"{nodeid}: fails with {chain}, not NotImplementedError: {first_line[0]}"
                )
        else:
            problems.append(
                f"{nodeid}: {result['outcome']} (expected a NotImplementedError failure)"
            )
    return problems


def reference_test_problems(outcomes: dict[str, dict], where: str = "the reference") -> list[str]:
    if not outcomes:
        return [f"the test run on {where} recorded nothing (pytest could not start)"]
    return [
        f"{nodeid}: {result['outcome']} on {where}: "
        + (result["message"].strip().splitlines()[-1:] or [""])[0]
        for nodeid, result in sorted(outcomes.items())
        if result["outcome"] not in ("passed", "skipped")
    ]


def shipped_tests(root: Path, kind: str) -> tuple[list[str], list[str]]:
    """``(tests of the student's work, tests of code shipped complete)``: in the extension
    handout the core is complete, so only the extension's tests are the student's."""
    treatments = plan(root, kind)
    files = sorted(
        rel
        for rel in treatments
        if rel.parts[0] == "tests" and rel.name.startswith("test_") and rel.suffix == ".py"
    )
    if kind == "base":
        return [f.as_posix() for f in files], []
    extension = select(root, kind, set(treatments)).extension_tests
    return (
        [f.as_posix() for f in files if f in extension],
        [f.as_posix() for f in files if f not in extension],
    )


def test_run_problems(
    root: Path, handout: Path, kind: str, scratch: Path, check_reference: bool
) -> list[str]:
    """Checks 5 and 6: the student's tests fail with NotImplementedError in the handout (tests
    of code shipped complete pass there), and the reference passes them all."""
    stubbed, complete = shipped_tests(root, kind)
    if not stubbed:
        return ["the handout ships no test files of the student's work"]
    started = time.monotonic()
    outcomes = run_suite(handout, stubbed + complete, scratch, "handout")
    problems = handout_test_problems(
        {k: v for k, v in outcomes.items() if k.split("::")[0] not in complete}
    )
    if complete:
        problems += reference_test_problems(
            {k: v for k, v in outcomes.items() if k.split("::")[0] in complete}, "the handout"
        )
    print(f"  handout tests: {time.monotonic() - started:.0f} s", file=sys.stderr)
    if check_reference:
        started = time.monotonic()
        outcomes = run_suite(root, stubbed + complete, scratch, "reference")
        problems += reference_test_problems(outcomes)
        print(f"  reference tests: {time.monotonic() - started:.0f} s", file=sys.stderr)
    return problems


def verify(root: Path = REPO_ROOT, kind: str = "base", check_reference: bool = True) -> list[str]:
    with tempfile.TemporaryDirectory(prefix="verify-handout-") as tmp:
        scratch = Path(tmp)
        handout = build(scratch / "dist", root=root, kind=kind).directory
        problems = static_problems(handout) + graded_code_problems(root, handout, kind)
        problems += vocabulary_problems(handout, kind)
        imported = subprocess.run(
            [sys.executable, "-c", IMPORT_CHECK],
            cwd=handout,
            env={**_base_env(), "PYTHONPATH": str(handout)},
            capture_output=True,
            text=True,
        )
        if imported.returncode != 0:
            problems.append(f"the handout does not import cleanly:\n{imported.stderr.strip()}")
        return problems + test_run_problems(root, handout, kind, scratch, check_reference)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--skip-reference", action="store_true", help="do not run the reference's tests"
    )
    parser.add_argument(
        "--extensions", action="store_true", help="verify the extension handout instead"
    )
    args = parser.parse_args(argv)
    kind = "extension" if args.extensions else "base"
    problems = verify(kind=kind, check_reference=not args.skip_reference)
    if problems:
        print(f"{kind} handout verification FAILED ({len(problems)} problem(s)):")
        for problem in problems:
            print(f"  - {problem}")
        return 1
    print(
        f"{kind} handout verified: graded modules are skeletons, support code implements "
        "nothing graded, it imports cleanly, every test fails with NotImplementedError, "
        "the reference passes every test"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
