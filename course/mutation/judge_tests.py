"""The shipped tests as the judge of hand-written bugs (the catalogue, the blind set).

For each bug (``course/mutation/catalogue.py``, ``course/mutation/blind.py``) a workspace copy of
the reference gets the bug, and the tests of the bug's rubric component (its ``-k`` expression)
run in a subprocess. A bug is *caught* when at least one test that passes on the unmutated copy
fails (or the run hangs or crashes). The report lists, per bug, the tests that caught it and
whether a failure printed a hint that names the bug (a ``hint:``/``diagnosis:`` line matching its
``EXPECTED_HINTS`` pattern: "right"), a hint that does not ("other"), or none; the last lines
are the kill rate and the hinted share.

The blind set has no expected patterns: its report says whether a hint or diagnosis printed and
lists, per bug, its description and the first hint lines, to judge whether they name the wrong
stage or property (``write_log`` keeps every bug's hints and first failure message as JSON
lines). Run through ``python -m course.mutation --source catalogue|blind --judge tests``.
"""

from __future__ import annotations

import json
import queue
import re
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from course.handout.build import is_instructor_test, source_files
from course.mutation.catalogue import EXPECTED_HINTS, Bug
from course.paths import REPO_ROOT
from course.workspace import edited, run_pytest, stage

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
def collected_nodeids(instructor_root: Path) -> tuple[str, ...]:
    """Every test id of the instructor's suite (collected once, from the reference code)."""
    files = sorted(
        {
            rel.as_posix()
            for rel in pristine_files(instructor_root)
            if rel.parts[0] == "tests" and rel.name.startswith("test_") and rel.suffix == ".py"
        }
    )
    with tempfile.TemporaryDirectory(prefix="cs336-collect-") as scratch:
        run = run_pytest(
            instructor_root, ["--collect-only", *files], "collected", scratch=Path(scratch)
        )
    return tuple(run.outcomes)


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
        return names_bug(self.bug, self.hints)


def names_bug(bug: Bug, hints: list[str]) -> bool:
    """Whether one of ``hints`` matches the pattern catalogued for ``bug`` (``EXPECTED_HINTS``;
    bugs without one, the blind set's, are never named by this measure)."""
    expected = EXPECTED_HINTS.get(bug.name)
    return bool(expected) and any(re.search(expected, h, re.IGNORECASE) for h in hints)


def make_copy(root: Path, destination: Path, extra: tuple[str, ...] = ()) -> Path:
    """A workspace: the package, the adapters, the shipped tests and fixtures, and ``extra``
    (more files, relative to ``root``)."""
    return stage(destination, [*pristine_files(root), "cs336_basics", ADAPTERS, *extra], root)


def run_tests(
    copy: Path, select: str, timeout: float, label: str, files: list[str]
) -> tuple[dict[str, dict], str]:
    """Run the tests matching ``select`` in ``copy``; return outcomes and a note on how it ended."""
    run = run_pytest(copy, ["-k", select, *files], label, timeout=timeout)
    return run.outcomes, f"caught ({run.note})" if run.note else ""


def mutate_and_test(
    bug: Bug,
    copy: Path,
    select: str,
    files: list[str],
    baseline: dict[str, dict],
    timeout: float,
) -> MutantResult:
    started = time.monotonic()
    try:
        with edited(copy, bug.edits):
            outcomes, note = run_tests(copy, select, timeout, bug.name, files)
    except ValueError as error:
        return MutantResult(bug, note=f"STALE: {error}")
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
    first_message = outcomes[caught_by[0]]["message"] if caught_by else ""
    return MutantResult(
        bug, caught_by, hinted, note, time.monotonic() - started, hints, first_message
    )


def run_all(
    bugs: list[Bug], jobs: int, timeout: float, root: Path = REPO_ROOT
) -> tuple[list[MutantResult], list[str]]:
    """Judge each bug by all of its component's tests (every failing test counts, and a hint in
    any of them counts as hinted)."""
    components = dict(SELECT) | {b.component: b.select for b in bugs if b.select}
    unknown = sorted({b.component for b in bugs} - set(components))
    if unknown:
        raise ValueError(f"bugs name components missing from judge_tests.SELECT: {unknown}")
    with tempfile.TemporaryDirectory(prefix="cs336-mutants-") as tmp:
        copies: queue.Queue[Path] = queue.Queue()
        for worker in range(max(1, jobs)):
            copies.put(make_copy(root, Path(tmp) / f"copy{worker}"))
        nodeids = collected_nodeids(root)
        union = " or ".join(f"({components[c]})" for c in sorted({b.component for b in bugs}))
        baseline_copy = copies.get()
        baseline, _ = run_tests(
            baseline_copy, union, timeout * 4, "baseline", test_files_for(union, nodeids)
        )
        copies.put(baseline_copy)
        broken = sorted(n for n, r in baseline.items() if r["outcome"] not in ("passed", "skipped"))

        def one(bug: Bug) -> MutantResult:
            copy = copies.get()
            try:
                select = components[bug.component]
                files = test_files_for(select, nodeids)
                result = mutate_and_test(bug, copy, select, files, baseline, timeout)
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
    write_json_lines(path, records)


def write_json_lines(path: Path, records: list[dict]) -> None:
    """A log of one JSON object per line (``--log``)."""
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
