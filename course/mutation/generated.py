"""The shipped tests as the judge of mutants generated from the reference's syntax tree.

Every mutant of ``course/mutation/ast_mutants.py`` is written into a private copy of the repository and
the tests of its module (the rubric components it implements) run against it; the mutant is
*killed* when a test fails, errors or hangs. Mutants that cannot be killed because they do not
change behaviour are listed with the reason in ``course/mutation/equivalent_mutants.toml``; the report
gives, per module, the kill rate among the others and lists every survivor. Exits 1 when a
survivor is not listed as equivalent (or a listed one is killed, or no longer generated). Run
through ``python -m course.mutation --source generated`` (``make mutants``, ``make mutants-smoke``).

Speed: the parent imports torch, pytest and the test dependencies once, then forks one child
per mutant (``--jobs`` at a time, one repository copy each), so a mutant costs its tests, not
an interpreter start; ``-x`` stops a mutant's run at its first failing test.
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

from course.mutation.ast_mutants import Mutant, generate
from course.mutation.catalogue import DECODING_TESTS
from course.mutation.judge_tests import (
    SELECT,
    collected_nodeids,
    hint_lines,
    make_copy,
    test_files_for,
    write_json_lines,
)
from course.paths import HANDOUT_MANIFEST, REPO_ROOT
from course.pytest_outcomes import summarize
from course.workspace import SCRATCH, outcomes_file, pytest_arguments, pytest_environment

EQUIVALENTS = Path(__file__).with_name("equivalent_mutants.toml")
MANIFEST = HANDOUT_MANIFEST

# Which tests judge each graded module: its rubric components, or a -k expression of its own.
MODULE_TESTS: dict[str, list[str] | str] = {
    "linear.py": ["linear"],
    "embedding.py": ["embedding"],
    "rmsnorm.py": ["rmsnorm"],
    "functional.py": ["silu", "softmax"],
    "feedforward.py": ["swiglu"],
    # RoPE's buffers and positions are also judged through the attention layer that uses it, and
    # attention through decoding and the fused-kernel tests, which run the core layer as well.
    "rope.py": ["rope", "multihead_self_attention"],
    "attention.py": (
        "scaled_dot_product_attention or multihead_self_attention or generation or fused_attention"
    ),
    "block.py": ["transformer_block"],
    # (The learned-position variant LM subclasses the core TransformerLM.)
    "model.py": "(transformer_lm and not config) or position_learned or learned_position",
    "pretokenization.py": ["train_bpe", "tokenizer"],
    "bpe.py": ["train_bpe"],
    "tokenizer.py": ["tokenizer"],
    "losses.py": ["cross_entropy"],
    "gradient_clipping.py": ["gradient_clipping"],
    "adamw.py": ["adamw"],
    "schedule.py": ["cosine_schedule"],
    "data.py": ["get_batch"],
    "checkpoint.py": ["checkpoint"],
    "accounting.py": "accounting",
    "training.py": "training and not ddp",
    "generation.py": DECODING_TESTS,
}
# Reference-only modules (not in the handout, so without solution regions: every function body
# is mutated) and the instructor tests that judge them, with the files those tests import.
FAST_TOKENIZER_TESTS = ["reference_tests/test_fast_tokenizer.py"]
REFERENCE_MODULE_TESTS: dict[str, list[str]] = {
    "runner/compiled/fast_tokenizer.py": FAST_TOKENIZER_TESTS,
    "runner/compiled/fast_tokenizer_kernels.py": FAST_TOKENIZER_TESTS,
}
REFERENCE_TEST_IMPORTS = (
    "course/__init__.py",
    "reference_tests/__init__.py",
    "benchmarks/__init__.py",
    "benchmarks/english.py",
    *FAST_TOKENIZER_TESTS,
)
# The instructor's tests of the tokenizer and trainer against their references (a naive trainer,
# tiktoken: course/cases/truths), which do not ship, join the runs of the modules they judge.
TOKENIZER_ORACLE_TESTS = [
    "reference_tests/test_tokenizer_tiktoken.py",
    "reference_tests/test_tokenizer_fast_paths.py",
]
ORACLE_TESTS: dict[str, list[str]] = {
    "pretokenization.py": ["reference_tests/test_train_bpe_naive.py", *TOKENIZER_ORACLE_TESTS],
    "bpe.py": ["reference_tests/test_train_bpe_naive.py"],
    "tokenizer.py": TOKENIZER_ORACLE_TESTS,
}
ORACLE_IMPORTS = (
    "course/__init__.py",
    "reference_tests/__init__.py",
    "course/cases/__init__.py",
    *(
        f"course/cases/truths/{name}.py"
        for name in (
            *("__init__", "attention", "layers", "model", "optim"),
            *("special_tokens", "tokenizers", "tolerances", "training"),
        )
    ),
    *sorted({path for paths in ORACLE_TESTS.values() for path in paths}),
)
# The one outcomes file of a copy: its runs follow one another.
OUTCOMES_LABEL = "outcomes"
# The outcomes of a test that failed (course/pytest_outcomes.py summarize), or of a test file
# that could not be collected.
FAILED = ("failed", "error", "collect_error")
# pytest ended 0 but advice tests failed: the mutant is caught (only the student's screen stays green).
ADVICE_FAILED = "pytest exit 0, advice failed"
# How much of a failure's message the log keeps (the end of its E lines).
FAILURE_CHARS = 2000
# A CI-sized sample: small modules whose tests run in seconds.
SMOKE_MODULES = ["gradient_clipping.py", "data.py", "schedule.py"]


@dataclass
class Outcome:
    mutant: Mutant
    status: str  # "killed", "survived", "equivalent", "equivalent-killed"
    how: str = ""
    hinted: bool = False  # the failing test printed a hint: or diagnosis: line
    failure: str = ""  # the first failing test's id and message, for ``--log``


def graded_modules() -> list[str]:
    with MANIFEST.open("rb") as file:
        return [Path(p).name for p in tomllib.load(file)["base"]["graded"]]


def selection(module: str) -> str:
    """The ``-k`` expression of a module's tests (empty: every test of its files)."""
    if module in REFERENCE_MODULE_TESTS:
        return ""
    tests = MODULE_TESTS[module]
    if isinstance(tests, str):
        return tests
    components = dict(SELECT)
    return " or ".join(f"({components[name]})" for name in tests)


def test_files(module: str, nodeids: tuple[str, ...]) -> list[str]:
    if module in REFERENCE_MODULE_TESTS:
        return REFERENCE_MODULE_TESTS[module]
    return test_files_for(selection(module), nodeids) + ORACLE_TESTS.get(module, [])


def equivalent_entries() -> list[dict]:
    with EQUIVALENTS.open("rb") as file:
        return tomllib.load(file).get("equivalent", [])


def load_equivalents() -> dict[tuple[str, str], str]:
    """The mutants equivalent for every component (left out of the kill rate): entries without
    ``components``."""
    entries = [e for e in equivalent_entries() if "components" not in e]
    return {(e["path"], e["key"]): e["reason"] for e in entries}


def load_component_equivalents() -> dict[tuple[str, str], frozenset[str]]:
    """The mutants that are no mistake of some components (their ``components``): a change
    those components' outputs cannot show, such as one re-layout applied to both q and k."""
    entries = [e for e in equivalent_entries() if "components" in e]
    return {(e["path"], e["key"]): frozenset(e["components"]) for e in entries}


def run_child(copy: Path, source: str | None, path: str, select: str, files: list[str]) -> None:
    """In a forked child: write ``source`` (a mutant's module; ``None``: none) to ``path`` in
    ``copy``, run ``pytest -x -k select files`` and exit with pytest's status (``files`` may hold
    more arguments, such as ``--deselect``)."""
    try:
        os.chdir(copy)
        sys.path[:] = [str(copy)] + [p for p in sys.path if p not in ("", str(REPO_ROOT))]
        reloaded = ("cs336_basics", "tests", "course", "benchmarks")
        for name in [n for n in sys.modules if n.split(".")[0] in reloaded]:
            del sys.modules[name]
        if source is not None:
            (copy / path).write_text(source, encoding="utf-8")
        if path.removeprefix("cs336_basics/") in REFERENCE_MODULE_TESTS:
            # Compiled kernels with bounds checks, as the suite's slow test of them runs them.
            os.environ["NUMBA_BOUNDSCHECK"] = "1"
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        import pytest
        import torch

        torch.set_num_threads(1)
        # The failing test's message, for the hinted share (course/pytest_outcomes.py). Only
        # the outcomes file and the plugin's folder are taken: the child imports the copy
        # through sys.path already, and the tests' own subprocesses see what they always saw.
        environment = pytest_environment(copy, scratch(copy), OUTCOMES_LABEL)
        os.environ["CS336_OUTCOMES"] = environment["CS336_OUTCOMES"]
        sys.path.insert(0, environment["PYTHONPATH"].split(os.pathsep)[0])
        arguments = ["-x", "-k", select, *files]
        code = pytest.main(pytest_arguments(scratch(copy), OUTCOMES_LABEL, arguments))
        os._exit(int(code))
    except BaseException:
        os._exit(99)


def scratch(copy: Path) -> Path:
    return copy / SCRATCH


def failures_of(results: dict[str, dict]) -> dict[str, dict]:
    """The failing tests of a run's outcomes, in the order pytest reported them, advice included
    (pytest's status is 0 when only advice failed, tests/what_counts.py, but a mutant that fails
    advice is caught) and files that could not be collected (reported before any test runs)."""
    return {n: r for n, r in results.items() if r["outcome"] in FAILED}


def first_failure(failing: dict[str, dict]) -> tuple[bool, str]:
    """Whether a failing test printed a hint or diagnosis line, and the first failing test's id
    and message (cut short)."""
    hinted = any(hint_lines(r["message"]) for r in failing.values())
    text = next((f"{n}\n{error_lines(r['message'])}" for n, r in failing.items()), "")
    return hinted, text


def error_lines(message: str) -> str:
    """pytest's ``E`` lines of a failure (the error and any hint), else the message's end."""
    errors = [line for line in message.splitlines() if line.startswith("E ")]
    return ("\n".join(errors) if errors else message)[-FAILURE_CHARS:]


class Pool:
    """Forked children, one per repository copy; ``wait`` returns finished ones."""

    def __init__(self, copies: list[Path]) -> None:
        self.free = list(copies)
        self.running: dict[int, tuple[Path, object, float, float]] = {}
        # By id(job): the outcomes of its run (course/pytest_outcomes.py), in collection order.
        self.outcomes: dict[int, dict[str, dict]] = {}

    def start(self, job: object, source: str | None, path: str, select: str, files, timeout):
        copy = self.free.pop()
        original = (copy / path).read_text(encoding="utf-8")
        outcomes_file(scratch(copy), OUTCOMES_LABEL).unlink(missing_ok=True)
        pid = os.fork()
        if pid == 0:
            run_child(copy, source, path, select, files)
        self.running[pid] = (copy, (job, path, original), time.monotonic(), timeout)

    def wait(self) -> list[tuple[object, str]]:
        """Block until a child ends; return ``(job, how)`` for each that ended."""
        while True:
            done = []
            for pid, (copy, (job, path, original), started, timeout) in list(self.running.items()):
                finished, status = os.waitpid(pid, os.WNOHANG)
                if not finished and time.monotonic() - started > timeout:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    how = f"hung past {timeout:.0f} s"
                elif not finished:
                    continue
                elif os.WIFSIGNALED(status):
                    how = f"died with signal {os.WTERMSIG(status)}"
                else:
                    how = f"pytest exit {os.WEXITSTATUS(status)}"
                results = summarize(outcomes_file(scratch(copy), OUTCOMES_LABEL))
                if how == "pytest exit 0" and failures_of(results):
                    how = ADVICE_FAILED
                (copy / path).write_text(original, encoding="utf-8")
                del self.running[pid]
                self.free.append(copy)
                self.outcomes[id(job)] = results
                done.append((job, how))
            if done:
                return done
            time.sleep(0.02)


def killed(how: str) -> bool:
    """Tests failed (1, or advice only: ``ADVICE_FAILED``), collection broke (2), pytest crashed
    (3), or the run hung or died."""
    return how not in ("pytest exit 0", "pytest exit 4", "pytest exit 5", "pytest exit 99")


def baselines(pool: Pool, modules: list[str], nodeids, timeout: float) -> dict[str, float]:
    """Run each module's tests on the unmutated copy; return their durations (all must pass)."""
    durations, started = {}, {}
    pending = list(modules)
    while pending or pool.running:
        while pending and pool.free:
            module = pending.pop()
            started[module] = time.monotonic()
            path = f"cs336_basics/{module}"
            files = test_files(module, nodeids)
            pool.start(module, None, path, selection(module), files, timeout)
        for module, how in pool.wait():
            pool.outcomes.pop(id(module), None)
            if how != "pytest exit 0":
                raise SystemExit(f"the tests of {module} do not pass unmutated ({how})")
            durations[module] = time.monotonic() - started[module]
    return durations


def run(
    modules: list[str], jobs: int, match: list[str] | None = None, root: Path = REPO_ROOT
) -> list[Outcome]:
    from cs336_basics.progress import progress_bar

    equivalents = load_equivalents()
    mutants = [
        m
        for module in modules
        for m in generate(root, f"cs336_basics/{module}")
        if not match or any(part in m.key for part in match)
    ]
    nodeids = collected_nodeids(root)
    compiled = bool(set(modules) & set(REFERENCE_MODULE_TESTS))
    preload_test_dependencies(compiled)
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="cs336-generated-mutants-") as tmp:
        extra = tuple(
            dict.fromkeys((*(REFERENCE_TEST_IMPORTS if compiled else ()), *ORACLE_IMPORTS))
        )
        pool = Pool([make_copy(root, Path(tmp) / f"copy{i}", extra) for i in range(jobs)])
        durations = baselines(pool, modules, nodeids, timeout=600)
        print(
            "tests of each module, unmutated: "
            + ", ".join(f"{m} {s:.1f} s" for m, s in sorted(durations.items()))
        )
        pending = list(reversed(mutants))
        with progress_bar(total=len(mutants), desc="mutants", unit="mutant") as bar:
            while pending or pool.running:
                while pending and pool.free:
                    mutant = pending.pop()
                    module = Path(mutant.path).name
                    timeout = 30 + 5 * durations[module]
                    files = test_files(module, nodeids)
                    source = mutant.source
                    pool.start(mutant, source, mutant.path, selection(module), files, timeout)
                for mutant, how in pool.wait():
                    equivalent = (mutant.path, mutant.key) in equivalents
                    status = "killed" if killed(how) else "survived"
                    if equivalent:
                        status = "equivalent-killed" if status == "killed" else "equivalent"
                    hinted, failure = first_failure(failures_of(pool.outcomes.pop(id(mutant))))
                    outcomes.append(Outcome(mutant, status, how, hinted, failure))
                    if status == "survived":
                        bar.write(f"survived: {mutant}")
                    survivors = sum(o.status == "survived" for o in outcomes)
                    bar.set_postfix(survived=survivors, refresh=False)
                    bar.update()
    order = {id(m): i for i, m in enumerate(mutants)}
    return sorted(outcomes, key=lambda o: order[id(o.mutant)])


def preload_test_dependencies(compiled: bool) -> None:
    """Import what every test imports (numba too for ``compiled`` modules), once, so forked
    children start warm."""
    sys.dont_write_bytecode = True  # children edit sources; never leave a stale .pyc behind
    import hypothesis  # noqa: F401
    import numpy  # noqa: F401
    import pytest  # noqa: F401
    import regex  # noqa: F401
    import tiktoken  # noqa: F401
    import torch  # noqa: F401

    if compiled:
        import numba  # noqa: F401


def write_log(outcomes: list[Outcome], path: Path) -> None:
    """One JSON line per mutant: where, what, how it ended, and its first failure."""
    records = [
        {
            "path": o.mutant.path,
            "key": o.mutant.key,
            "mutant": str(o.mutant),
            "status": o.status,
            "how": o.how,
            "hinted": o.hinted,
            "failure": o.failure,
        }
        for o in outcomes
    ]
    write_json_lines(path, records)


def report(
    outcomes: list[Outcome], equivalents: dict[tuple[str, str], str], complete: bool = True
) -> tuple[str, bool]:
    """The kill-rate table and the survivors; ``complete`` when every mutant of each module ran
    (then equivalents no longer generated are reported as stale)."""
    lines = [
        f"{'module':<22} {'mutants':>7} {'equiv.':>6} {'killed':>6} {'kill rate':>9} {'hinted':>6}"
    ]
    modules = sorted({Path(o.mutant.path).name for o in outcomes})
    totals = [0, 0, 0, 0]
    for module in modules:
        mine = [o for o in outcomes if Path(o.mutant.path).name == module]
        equivalent = sum(o.status.startswith("equivalent") for o in mine)
        dead = sum(o.status == "killed" for o in mine)
        hinted = sum(o.status == "killed" and o.hinted for o in mine)
        rate = dead / (len(mine) - equivalent) if len(mine) > equivalent else 1.0
        lines.append(
            f"{module:<22} {len(mine):>7} {equivalent:>6} {dead:>6} {rate:>9.1%} {hinted:>6}"
        )
        totals = [a + b for a, b in zip(totals, (len(mine), equivalent, dead, hinted), strict=True)]
    total, equivalent, dead, hinted = totals
    rate = dead / (total - equivalent) if total > equivalent else 1.0
    lines.append(f"{'all':<22} {total:>7} {equivalent:>6} {dead:>6} {rate:>9.1%} {hinted:>6}")
    if dead:
        lines.append(
            f"hinted share: {hinted}/{dead} = {hinted / dead:.0%} of killed mutants fail with a "
            "hint or diagnosis line (whether it names the mutant is not judged automatically)"
        )
    survivors = [o for o in outcomes if o.status == "survived"]
    lines += ["", f"{len(survivors)} survivors (neither killed nor listed as equivalent):"]
    lines += [f"  {o.mutant}" for o in survivors]
    surprising = [o for o in outcomes if o.status == "equivalent-killed"]
    if surprising:
        lines += ["listed as equivalent but killed (remove from equivalent_mutants.toml):"]
        lines += [f"  {o.mutant} ({o.how})" for o in surprising]
    generated = {(o.mutant.path, o.mutant.key) for o in outcomes}
    studied = {Path(o.mutant.path).name for o in outcomes}
    stale = [
        k for k in equivalents if complete and Path(k[0]).name in studied and k not in generated
    ]
    if stale:
        lines += ["listed as equivalent but no longer generated (update equivalent_mutants.toml):"]
        lines += [f"  {path} {key}" for path, key in stale]
    return "\n".join(lines), not (survivors or surprising or stale)
