"""The first failure a student reads: does it name the mistake?

A student runs a component's tests one of two ways, ``uv run pytest -k <component>`` or the
test file that holds them alone, and reads the first failure pytest prints. For each mistake
(the catalogue, the blind set, generated mutants as bugs of their components) this judge makes
the mistake in a workspace copy of the reference and runs both ways with ``-x``; a run *names*
the mistake when its first failing test's message holds a ``hint:`` or ``diagnosis:`` line
(``judge_tests.hint_lines``). Whether a run caught the mistake is read from the outcomes file
(``course/pytest_outcomes.py``), never from pytest's exit status: a run where only advice fails
ends with status 0 (``tests/what_counts.py``), and ``-x`` stops at a failed advice test too.

The ``-k`` run gives pytest only the files that hold selected tests
(``judge_tests.test_files_for``), sorted as pytest orders ``tests/`` when collecting it, so the
tests run in the order of the student's run without collecting the whole suite per mistake.
Each run is a child forked from a parent that imported torch once (``generated.Pool``). Run
through ``python -m course.mutation --source catalogue|blind|generated --judge first``.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from course.mutation.catalogue import EXPECTED_HINTS, Bug
from course.mutation.generated import FAILED, Pool, error_lines, preload_test_dependencies
from course.mutation.judge_tests import (
    SELECT,
    collected_nodeids,
    hint_lines,
    make_copy,
    names_bug,
    test_files_for,
    write_json_lines,
)
from course.paths import REPO_ROOT
from course.workspace import replace_once, run_pytest

# The file that holds each component's own tests: the one a student runs alone (the graded
# cases of every component share tests/test_cases.py, which the -k run reaches).
COMPONENT_FILES = {
    **dict.fromkeys(("linear", "embedding", "rmsnorm", "silu", "swiglu"), "tests/test_layers.py"),
    "softmax": "tests/test_layers.py",
    "rope": "tests/test_rope.py",
    "scaled_dot_product_attention": "tests/test_attention.py",
    "multihead_self_attention": "tests/test_attention.py",
    "transformer_block": "tests/test_transformer.py",
    "transformer_lm": "tests/test_transformer.py",
    "cross_entropy": "tests/test_losses.py",
    "adamw": "tests/test_optimizer.py",
    "cosine_schedule": "tests/test_schedule.py",
    "gradient_clipping": "tests/test_gradient_clipping.py",
    "get_batch": "tests/test_data.py",
    "checkpoint": "tests/test_checkpoint.py",
    "train_bpe": "tests/test_train_bpe.py",
    "tokenizer": "tests/test_tokenizer.py",
    "decoding": "tests/test_generation.py",
    "accounting": "tests/test_accounting.py",
}
WAYS = ("-k", "file")


@dataclass(frozen=True)
class FirstFailure:
    nodeid: str = ""  # the first failing test; "" when none failed
    message: str = ""
    hints: tuple[str, ...] = ()


def first_failure(outcomes: dict[str, dict]) -> FirstFailure:
    """The first test, in pytest's order, that failed (advice too), errored, could not be
    collected, or was running when the run was stopped; with its hint and diagnosis lines."""
    for nodeid, result in outcomes.items():
        if result["outcome"] in (*FAILED, "running"):
            message = result["message"]
            return FirstFailure(nodeid, message, tuple(hint_lines(message)))
    return FirstFailure()


@dataclass
class Run:
    """One student run of one mistake's tests."""

    bug: Bug
    way: str  # "-k" or "file" (WAYS)
    command: str  # what the student types
    first: FirstFailure = field(default_factory=FirstFailure)
    how: str = ""  # how the run ended ("pytest exit 1", "hung past ...", "STALE: ...")

    @property
    def caught(self) -> bool:
        # A hung or killed run leaves no failed test, but the student sees it stop.
        return bool(self.first.nodeid) or self.how.startswith(("hung", "died"))

    @property
    def named(self) -> bool:
        return self.caught and bool(self.first.hints)

    @property
    def right(self) -> bool:
        """The first failure's hint matches the catalogued pattern (the catalogue only)."""
        return self.caught and names_bug(self.bug, list(self.first.hints))


@dataclass(frozen=True)
class Plan:
    """How one way of running a component's tests is passed to pytest."""

    way: str
    select: str  # the -k expression ("" for the file alone)
    files: tuple[str, ...]
    command: str


def plans(bug: Bug, nodeids: tuple[str, ...]) -> list[Plan]:
    """The two student runs of ``bug``'s component: ``-k`` its selection, and its file alone."""
    select = bug.select or SELECT[bug.component]
    file = COMPONENT_FILES[bug.component]
    return [
        Plan("-k", select, tuple(test_files_for(select, nodeids)), f'pytest -x -k "{select}"'),
        Plan("file", "", (file,), f"pytest -x {file}"),
    ]


def mutated_source(bug: Bug, root: Path) -> str:
    """``bug``'s file in ``root`` with its edits made (``ValueError`` when one no longer fits)."""
    text = (root / bug.path).read_text(encoding="utf-8")
    for edit in bug.edits:
        text = replace_once(text, edit)
    return text


def broken_tests(copy: Path, files: list[str], timeout: float) -> list[str]:
    """The tests of ``files`` that do not pass on the unmutated copy (each run deselects them:
    with -x, one would stop every run before the mistake's tests)."""
    run = run_pytest(copy, files, "baseline", timeout=timeout)
    return sorted(n for n, r in run.outcomes.items() if r["outcome"] not in ("passed", "skipped"))


def deselected(files: tuple[str, ...], broken: list[str]) -> list[str]:
    mine = [n for n in broken if n.split("::")[0] in files]
    return [argument for n in mine for argument in ("--deselect", n)]


def run_all(
    bugs: list[Bug],
    jobs: int,
    timeout: float,
    root: Path = REPO_ROOT,
    ways: tuple[str, ...] = WAYS,
) -> tuple[list[Run], list[str]]:
    """Run every bug each of ``ways``; return the runs (bug by bug, ``WAYS`` order) and the tests
    that fail unmutated (left out of every run)."""
    unknown = sorted({b.component for b in bugs} - set(COMPONENT_FILES))
    if unknown:
        raise ValueError(f"bugs name components without a file in COMPONENT_FILES: {unknown}")
    nodeids = collected_nodeids(root)
    preload_test_dependencies(compiled=False)
    chosen = [(b, p) for b in bugs for p in plans(b, nodeids) if p.way in ways]
    runs = [Run(b, p.way, p.command) for b, p in chosen]
    with tempfile.TemporaryDirectory(prefix="cs336-first-failure-") as tmp:
        pool = Pool([make_copy(root, Path(tmp) / f"copy{i}") for i in range(max(1, jobs))])
        files = sorted({f for _, p in chosen for f in p.files})
        broken = broken_tests(pool.free[0], files, timeout * 4)
        for run, how, outcomes in execute(pool, runs, nodeids, broken, root, timeout):
            run.how, run.first = how, first_failure(outcomes)
            print_run(run)
    return runs, broken


def execute(
    pool: Pool, runs: list[Run], nodeids, broken: list[str], root: Path, timeout: float
) -> Iterator[tuple[Run, str, dict[str, dict]]]:
    """Start each run in the pool as a copy frees up; yield each as it ends, with how it ended
    and its outcomes (a bug whose edit no longer fits is not run: ``STALE``)."""
    pending = list(reversed(runs))
    while pending or pool.running:
        while pending and pool.free:
            run = pending.pop()
            try:
                source = mutated_source(run.bug, root)
            except ValueError as error:
                yield run, f"STALE: {error}", {}
                continue
            plan = next(p for p in plans(run.bug, nodeids) if p.way == run.way)
            arguments = [*plan.files, *deselected(plan.files, broken)]
            pool.start(run, source, run.bug.path, plan.select, arguments, timeout)
        for run, how in pool.wait() if pool.running else []:
            yield run, how, pool.outcomes.pop(id(run))


def print_run(run: Run) -> None:
    status = "named" if run.named else ("caught" if run.caught else "MISSED")
    where = run.first.nodeid.split("::", 1)[-1] or run.how
    print(f"  {status:<6} {run.way:<4} {run.bug.name}: {where}", flush=True)


def share(runs: list[Run], measure: str) -> str:
    """``named/total`` of ``runs`` by the property ``measure`` (``named`` or ``right``)."""
    return f"{sum(getattr(r, measure) for r in runs)}/{len(runs)}"


def report(runs: list[Run], broken: list[str], source: str) -> str:
    """The per-component table (first failure names it, per way), the set's totals, and the
    first failure of every run that does not name its mistake, to be read."""
    lines = [f"tests failing unmutated (deselected): {', '.join(broken)}"] if broken else []
    catalogued = any(r.bug.name in EXPECTED_HINTS for r in runs)
    lines.append(f"{'component':<30} {'mistakes':>8} {'-k named':>9} {'file named':>10}")
    components = list(dict.fromkeys(r.bug.component for r in runs))
    for component in components:
        by_way = {w: [r for r in runs if r.bug.component == component and r.way == w] for w in WAYS}
        lines.append(
            f"{component:<30} {len(by_way['-k']):>8} {share(by_way['-k'], 'named'):>9} "
            f"{share(by_way['file'], 'named'):>10}"
        )
    lines += ["", "first failures without a hint or diagnosis line:"]
    for r in runs:
        if not r.named:
            text = error_lines(r.first.message).splitlines()[:1] or [r.how]
            lines.append(f"  {r.bug.name} ({r.way}): {r.first.nodeid or '-'}: {text[0][:140]}")
    for way in WAYS:
        mine = [r for r in runs if r.way == way]
        caught = sum(r.caught for r in mine)
        right = f"; names the catalogued hint: {share(mine, 'right')}" if catalogued else ""
        lines.append(
            f"{source}, {way} run: caught {caught}/{len(mine)}; "
            f"first failure names it: {share(mine, 'named')}{right}"
        )
    return "\n".join(lines)


def write_log(runs: list[Run], path: Path) -> None:
    """One JSON line per run: the mistake, the student's command, and the first failure."""
    records = [
        {
            "name": r.bug.name,
            "component": r.bug.component,
            "mistake": r.bug.hint,
            "way": r.way,
            "command": r.command,
            "how": r.how,
            "caught": r.caught,
            "named": r.named,
            "first_test": r.first.nodeid,
            "hints": list(r.first.hints),
            "first_failure": error_lines(r.first.message),
        }
        for r in runs
    ]
    write_json_lines(path, records)
