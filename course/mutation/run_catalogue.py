"""Mutation testing with the catalogue of common bugs: ``python -m course.mutation.run_catalogue`` (``make mutants``).

For each bug in ``course/mutation/catalogue.py`` the reference is copied, the bug applied, and the tests of
the bug's rubric component (its ``-k`` expression) run in a subprocess. A bug is *caught* when at
least one test that passes on the unmutated copy fails (or the run hangs or crashes). The
report lists, per bug, the tests that caught it and whether a failure printed a hint that names
the bug (a ``hint:``/``diagnosis:`` line matching its ``EXPECTED_HINTS`` pattern: "right"), a hint
that does not ("other"), or none; the last lines are the kill rate and the hinted share.
Exits 1 unless every bug is caught.

``--set blind`` runs the mistakes written blind (``course/mutation/blind.py``), which have no
expected patterns: the report then says whether a hint or diagnosis printed and lists, per bug,
its description and the first hint lines, to judge whether they name the wrong stage or property
(``--log FILE`` keeps every bug's hints and first failure message as JSON lines).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from course.handout.build import is_instructor_test, source_files
from course.mutation.catalogue import BUGS, EXPECTED_HINTS, Bug
from course.paths import PYTEST_OUTCOMES, REPO_ROOT
from course.pytest_outcomes import summarize

PLUGIN = PYTEST_OUTCOMES
ADAPTERS = "tests/adapters.py"
# The pytest -k expression that picks each rubric component's tests.
SELECT = {
    "linear": "linear",
    "embedding": "embedding and not variants",
    "rmsnorm": "rmsnorm",
    "silu": "silu and not swiglu and not ablations and not variants",
    "swiglu": "swiglu",
    "rope": "rope and not attention and not parity and not variants",
    "softmax": "softmax",
    "scaled_dot_product_attention": "scaled_dot_product_attention",
    "multihead_self_attention": "multihead_self_attention",
    "transformer_block": "transformer_block",
    "transformer_lm": "transformer_lm and not config",
    "cross_entropy": "cross_entropy",
    "adamw": "adamw",
    "cosine_schedule": "cosine_schedule",
    "gradient_clipping": "gradient_clipping",
    "get_batch": "get_batch",
    "checkpoint": "checkpoint and not training",
    "train_bpe": "train_bpe",
    "tokenizer": "tokenizer and not train_bpe",
}


def pristine_files(instructor_root: Path) -> list[Path]:
    """Instructor files every workspace gets: tests (minus toolchain tests), fixtures, pytest config."""
    return [
        p
        for p in source_files(instructor_root)
        if (
            p.parts[0] == "fixtures"
            or (
                p.parts[0] == "tests"
                and p.as_posix() != ADAPTERS
                and not is_instructor_test(instructor_root / p)
            )
        )
    ] + [Path("pyproject.toml")]


def keyword_match(expression: str, nodeid: str) -> bool:
    """Approximately pytest's ``-k``: each name matches as a case-insensitive substring of the
    node id. Used only to pick which test files a component's run needs to import."""
    python = []
    for token in re.findall(r"\(|\)|[^\s()]+", expression):
        python.append(
            token if token in ("(", ")", "and", "or", "not") else f"{token.lower()!r} in s"
        )
    return bool(eval(" ".join(python), {"__builtins__": {}}, {"s": nodeid.lower()}))


@cache
def collected_nodeids(instructor_root: Path, plugin_autoload: bool = True) -> tuple[str, ...]:
    """Every test id of the instructor's suite (collected once, from the reference code)."""
    with tempfile.TemporaryDirectory(prefix="cs336-collect-") as tmp:
        shutil.copyfile(PLUGIN, Path(tmp) / PLUGIN.name)
        outcomes = Path(tmp) / "collected.jsonl"
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env.update(
            PYTHONPATH=f"{tmp}:{instructor_root}",
            CS336_OUTCOMES=str(outcomes),
            PYTHONDONTWRITEBYTECODE="1",
        )
        if not plugin_autoload:
            env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        files = sorted(
            {
                rel.as_posix()
                for rel in pristine_files(instructor_root)
                if rel.parts[0] == "tests" and rel.name.startswith("test_") and rel.suffix == ".py"
            }
        )
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "--collect-only",
                "-p",
                "pytest_outcomes",
                "-p",
                "no:cacheprovider",
                *files,
            ],
            cwd=instructor_root,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        return tuple(summarize(outcomes))


def test_files_for(select: str, nodeids: tuple[str, ...]) -> list[str]:
    """The test files a ``-k select`` run needs; all of ``tests`` when nothing is known."""
    files = sorted({n.split("::")[0] for n in nodeids if "::" in n and keyword_match(select, n)})
    return files or ["tests"]


# A hint or diagnosis line of a failure message (pytest prefixes assertion lines with "E").
# Only "E" lines: the source lines pytest also shows may hold hints that were never triggered.
HINT_LINE = re.compile(r"^E\s.*?\b(?:hint|diagnosis):\s*(.+)$", re.MULTILINE | re.IGNORECASE)


def hint_lines(message: str) -> list[str]:
    return [m.group(1).strip() for m in HINT_LINE.finditer(message)]


@dataclass
class MutantResult:
    bug: Bug
    caught_by: list[str] = field(default_factory=list)
    hinted: bool = False
    note: str = ""
    seconds: float = 0.0
    hints: list[str] = field(default_factory=list)
    first_message: str = ""

    @property
    def caught(self) -> bool:
        return bool(self.caught_by) or self.note.startswith("caught")

    @property
    def explained(self) -> bool:
        """Some failure printed a hint that says what this bug is (``EXPECTED_HINTS``)."""
        expected = EXPECTED_HINTS.get(self.bug.name)
        return bool(expected) and any(re.search(expected, h, re.IGNORECASE) for h in self.hints)


def make_copy(root: Path, destination: Path, extra: tuple[str, ...] = ()) -> Path:
    """A workspace: the package, the adapters, the shipped tests and fixtures, and ``extra``
    (more files, relative to ``root``)."""
    package = [p for p in (root / "cs336_basics").rglob("*") if p.is_file()]
    code = [p.relative_to(root) for p in package if "__pycache__" not in p.parts] + [
        Path("tests/adapters.py"),
        *map(Path, extra),
    ]
    for rel in pristine_files(root) + code:
        target = destination / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / rel, target)
    (destination / ".mutants").mkdir(exist_ok=True)
    shutil.copyfile(PLUGIN, destination / ".mutants" / PLUGIN.name)
    return destination


def run_tests(
    copy: Path, select: str, timeout: float, label: str, files: list[str]
) -> tuple[dict[str, dict], str]:
    """Run the tests matching ``select`` in ``copy``; return outcomes and a note on how it ended."""
    outcomes = copy / ".mutants" / f"{label}.jsonl"
    outcomes.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(
        PYTHONPATH=f"{copy / '.mutants'}:{copy}",
        PYTHONDONTWRITEBYTECODE="1",
        CS336_OUTCOMES=str(outcomes),
    )
    try:
        process = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "pytest_outcomes",
                "-p",
                "no:cacheprovider",
                "-k",
                select,
                f"--basetemp={copy / '.mutants' / 'tmp'}",
                *files,
            ],
            cwd=copy,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=timeout,
        )
        note = (
            f"caught (process died with signal {-process.returncode})"
            if process.returncode < 0
            else ""
        )
    except subprocess.TimeoutExpired:
        note = f"caught (tests hung past {timeout:g} s)"
    return summarize(outcomes), note


def mutate_and_test(
    bug: Bug, copy: Path, select: str, files: list[str], baseline: dict[str, dict], timeout: float
) -> MutantResult:
    started = time.monotonic()
    original = (copy / bug.path).read_text(encoding="utf-8")
    try:
        bug.apply(copy)
    except ValueError as error:
        return MutantResult(bug, note=f"STALE: {error}")
    try:
        outcomes, note = run_tests(copy, select, timeout, bug.name, files)
    finally:
        (copy / bug.path).write_text(original, encoding="utf-8")
    caught_by = sorted(
        nodeid
        for nodeid, result in outcomes.items()
        if result["outcome"] in ("failed", "error", "collect_error", "running")
        and baseline.get(nodeid, {}).get("outcome", "passed") == "passed"
    )
    hinted = any(
        word in outcomes[nodeid]["message"].lower()
        for nodeid in caught_by
        for word in ("hint", "diagnosis:")
    )
    hints = sorted({h for nodeid in caught_by for h in hint_lines(outcomes[nodeid]["message"])})
    first = outcomes[caught_by[0]]["message"] if caught_by else ""
    return MutantResult(bug, caught_by, hinted, note, time.monotonic() - started, hints, first)


def run_all(
    bugs: list[Bug], jobs: int, timeout: float, root: Path = REPO_ROOT
) -> tuple[list[MutantResult], list[str]]:
    components = dict(SELECT) | {b.component: b.select for b in bugs if b.select}
    unknown = sorted({b.component for b in bugs} - set(components))
    if unknown:
        raise ValueError(f"bugs name components missing from mutants.SELECT: {unknown}")
    with tempfile.TemporaryDirectory(prefix="cs336-mutants-") as tmp:
        copies: queue.Queue[Path] = queue.Queue()
        for worker in range(max(1, jobs)):
            copies.put(make_copy(root, Path(tmp) / f"copy{worker}"))
        nodeids = collected_nodeids(root)
        union = " or ".join(f"({components[c]})" for c in sorted({b.component for b in bugs}))
        first = copies.get()
        baseline, _ = run_tests(
            first, union, timeout * 4, "baseline", test_files_for(union, nodeids)
        )
        copies.put(first)
        broken = sorted(n for n, r in baseline.items() if r["outcome"] not in ("passed", "skipped"))

        def one(bug: Bug) -> MutantResult:
            copy = copies.get()
            try:
                select = components[bug.component]
                result = mutate_and_test(
                    bug, copy, select, test_files_for(select, nodeids), baseline, timeout
                )
            finally:
                copies.put(copy)
            status = (
                "caught"
                if result.caught
                else ("STALE" if result.note.startswith("STALE") else "SURVIVED")
            )
            first_hint = f"\n           hint: {result.hints[0][:150]}" if result.hints else ""
            print(
                f"  {status:<8} {bug.name} ({len(result.caught_by)} tests, {result.seconds:.0f} s)"
                + first_hint,
                flush=True,
            )
            return result

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            return list(pool.map(one, bugs)), broken


def set_of(name: str) -> list[Bug]:
    """The bugs of a named set: the catalogue, or the mistakes written blind."""
    if name == "blind":
        from course.mutation.blind import BLIND

        return BLIND
    return BUGS


def blind_report(results: list[MutantResult]) -> str:
    """Per bug: caught, whether a hint printed, its description and the first hint lines (to be
    judged against the description: no pattern was written for these)."""
    lines = []
    for r in results:
        status = "caught" if r.caught else "SURVIVED"
        lines.append(f"{r.bug.name} ({r.bug.component}): {status}, {len(r.hints)} hint lines")
        lines.append(f"    bug:  {r.bug.hint[:160]}")
        lines += [f"    hint: {h[:160]}" for h in r.hints[:2]]
    killed = sum(r.caught for r in results)
    hinted = sum(r.caught and bool(r.hints) for r in results)
    lines.append(
        f"kill rate: {killed}/{len(results)} = {killed / len(results):.0%} caught; "
        f"{hinted}/{len(results)} = {hinted / len(results):.0%} with a hint or diagnosis line "
        "(judge above whether each names the wrong stage or property)"
    )
    return "\n".join(lines)


def write_log(results: list[MutantResult], path: Path) -> None:
    records = [
        {
            "name": r.bug.name,
            "component": r.bug.component,
            "caught": r.caught,
            "caught_by": r.caught_by,
            "hints": r.hints,
            "first_message": r.first_message[:3000],
        }
        for r in results
    ]
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")


def report(results: list[MutantResult], broken: list[str]) -> str:
    lines = []
    if broken:
        lines.append("tests failing on the unmutated reference (ignored): " + ", ".join(broken))
    width = max(len(r.bug.name) for r in results)
    lines.append(
        f"{'bug':<{width}}  {'component':<28}  {'caught by':<9}  hint   first catching test"
    )
    for r in results:
        first = r.caught_by[0].split("::", 1)[-1] if r.caught_by else (r.note or "-")
        count = str(len(r.caught_by)) if r.caught_by else ("yes" if r.caught else "NONE")
        hint = "right" if r.explained else ("other" if r.hints else "no")
        lines.append(
            f"{r.bug.name:<{width}}  {r.bug.component:<28}  {count:<9}  {hint:<5}  {first}"
        )
    unexplained = [r for r in results if r.caught and not r.explained and r.hints]
    if unexplained:
        lines.append("hints printed for bugs they do not name (first line of each):")
        lines += [f"  {r.bug.name}: {r.hints[0][:150]}" for r in unexplained]
    killed = sum(r.caught for r in results)
    hinted = sum(r.hinted for r in results)
    explained = sum(r.caught and r.explained for r in results)
    lines.append(
        f"kill rate: {killed}/{len(results)} = {killed / len(results):.0%} of catalogued bugs caught; "
        f"{hinted} with a hint in the failure"
    )
    lines.append(
        f"hinted share: {explained}/{len(results)} = {explained / len(results):.0%} fail with a "
        "hint that names the bug (course/mutation/catalogue.py EXPECTED_HINTS)"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="only these bugs (default: the whole catalogue)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=300, help="seconds per mutant run")
    parser.add_argument(
        "--set",
        choices=("catalogue", "blind"),
        default="catalogue",
        help="the catalogue (course/mutation/catalogue.py) or the mistakes written blind (course/mutation/blind.py)",
    )
    parser.add_argument("--log", type=Path, help="write each bug's hints and message (JSON lines)")
    args = parser.parse_args(argv)
    bugs = [b for b in set_of(args.set) if not args.names or b.name in args.names]
    missing = set(args.names) - {b.name for b in bugs}
    if missing:
        parser.error(f"no such bug(s): {sorted(missing)}")
    print(f"mutation testing {len(bugs)} bugs of the {args.set}, {args.jobs} at a time")
    results, broken = run_all(bugs, args.jobs, args.timeout)
    if args.log:
        write_log(results, args.log)
    print(report(results, broken) if args.set == "catalogue" else blind_report(results))
    return 0 if all(r.caught for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
