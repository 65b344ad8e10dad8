"""Mutation testing: does the suite catch mistakes, and name them? One runner, source x judge.

``python -m course.mutation [--source SOURCE ...] [--judge tests|grader|silent|first] [names]
[options]``

Sources of mistakes: ``catalogue`` (realistic bugs with the hints that should name them,
``course/mutation/catalogue.py``), ``blind`` (mistakes written without reading the diagnoses,
``course/mutation/blind.py``), ``near-miss`` (mistakes that pass the public cases narrowly or
on one input rank, ``course/mutation/near_miss.py``), ``generated`` (mechanical edits of the
reference's syntax tree, ``course/mutation/ast_mutants.py``). Judges: ``tests`` (the shipped
tests of the mistake's component: caught when a test that passes on the reference fails;
``judge_tests.py``, ``generated.py``), ``grader`` (the grading driver and judge on the public and
hidden cases: caught when the component loses points; ``judge_grader.py``) and ``silent`` (both:
a silent hidden loss is a mistake that loses points while the component's tests all pass, and
a double charge one that fails hidden cases of several kinds; ``judge_silent.py``) and ``first``
(the component's tests run as a student runs them, ``-k`` and its test file alone, each with
``-x``: does the first failure print a hint or diagnosis line? ``judge_first.py``). The
generated mutants are judged by the tests, ``silent`` or ``first``. Exits 1 unless every mistake
is caught (for generated mutants judged by the tests: unless every survivor is listed as
equivalent; ``silent``: unless no loss is silent).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from course.grading.judge import load_rubric
from course.mutation import generated, judge_first, judge_grader, judge_silent, judge_tests
from course.mutation.ast_mutants import generate
from course.mutation.blind import BLIND
from course.mutation.blind_second import SECOND_BLIND
from course.mutation.catalogue import BUGS, Bug
from course.mutation.near_miss import NEAR_MISSES
from course.paths import REPO_ROOT

SOURCES = {
    "catalogue": BUGS,
    "blind": BLIND,
    "second-blind": SECOND_BLIND,
    "near-miss": NEAR_MISSES,
    "generated": None,
}
JUDGES = ("tests", "grader", "silent", "first")
# Bugs are run a few at a time (each run imports torch); forked generated mutants on every core.
BUG_JOBS = 2


def parser() -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(
        prog="python -m course.mutation", description=__doc__.splitlines()[0]
    )
    options.add_argument(
        "names",
        nargs="*",
        help="only these bugs (catalogue, blind) or modules, e.g. rope.py (generated)",
    )
    options.add_argument(
        "--source",
        action="append",
        choices=SOURCES,
        help="repeat for several, run in turn (default: catalogue)",
    )
    options.add_argument("--judge", choices=JUDGES, default="tests", help="default: tests")
    options.add_argument(
        "--jobs", type=int, help=f"runs at a time (bugs: {BUG_JOBS}; generated: every core)"
    )
    options.add_argument("--timeout", type=float, default=300, help="seconds per bug")
    options.add_argument(
        "--smoke",
        action="store_true",
        help=f"generated: only {', '.join(generated.SMOKE_MODULES)} (the CI-sized run)",
    )
    options.add_argument(
        "--graded",
        action="store_true",
        help="generated: only the graded modules (what students write; not the compiled tokenizer)",
    )
    options.add_argument(
        "--match", action="append", default=[], help="generated: only mutants whose key has this"
    )
    options.add_argument("--list", action="store_true", help="generated: print the mutants only")
    options.add_argument(
        "--every",
        type=int,
        default=1,
        help="generated, judged first: only every Nth mutant of each module, in generation order "
        "(a reproducible sample)",
    )
    options.add_argument(
        "--log",
        type=Path,
        help="judged by the tests or first: each bug's or mutant's hints and first failure (JSONL)",
    )
    return options


def check_combination(options: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse options that mean nothing for the sources and judge asked for."""
    tests_only = [flag for flag, given in (("--log", args.log),) if given]
    generated_only = [
        flag
        for flag, given in (
            *(("--smoke", args.smoke), ("--graded", args.graded)),
            *(("--match", args.match), ("--list", args.list)),
            ("--every", args.every != 1),
        )
        if given
    ]
    if "generated" in args.source and args.judge == "grader":
        options.error(
            "generated mutants are judged by the tests, silent or first (not --judge grader)"
        )
    # The silent and first judges take the generated mutants beside the other sources.
    beside = args.judge in ("silent", "first") and "generated" in args.source
    alone = args.source == ["generated"] or beside
    if generated_only and not alone:
        options.error(f"{', '.join(generated_only)}: for --source generated alone")
    if args.list and args.judge != "tests":
        options.error("--list: for the generated mutants judged by the tests (it runs nothing)")
    if tests_only and (args.judge not in ("tests", "first") or len(args.source) > 1):
        options.error(f"{', '.join(tests_only)}: for one source judged by the tests or first")
    if args.names and len(args.source) > 1:
        options.error("names select within one source: give one --source with them")
    if args.jobs is not None and args.jobs < 1:
        options.error("--jobs must be at least 1")
    if args.every < 1 or (args.every != 1 and args.judge != "first"):
        options.error("--every: a whole number of at least 1, for the judge first")


def chosen_bugs(options: argparse.ArgumentParser, source: str, names: list[str]) -> list[Bug]:
    bugs = [b for b in SOURCES[source] if not names or b.name in names]
    missing = sorted(set(names) - {b.name for b in bugs})
    if missing:
        options.error(f"no such bug(s) in the {source}: {missing}")
    return bugs


def graded_bugs(options: argparse.ArgumentParser, source: str, bugs: list[Bug]) -> list[Bug]:
    """The bugs whose component the rubric grades (the others are named and left out)."""
    graded = {component.name for component in load_rubric().components}
    ungraded = [b.name for b in bugs if b.component not in graded]
    if ungraded:
        print(f"left out (no rubric component to grade): {', '.join(ungraded)}")
    bugs = [b for b in bugs if b.component in graded]
    if not bugs:
        options.error(f"no bug of the {source} asked for has a graded component")
    return bugs


def mutant_bugs(options: argparse.ArgumentParser, args: argparse.Namespace) -> list[Bug]:
    """The generated mutants asked for (not those listed as equivalent), each as a bug of each
    graded component of its module."""
    equivalents = generated.load_equivalents()
    bugs = []
    for module in generated_modules(options, args):
        mutants = [
            m
            for m in generate(REPO_ROOT, f"cs336_basics/{module}")
            if (m.path, m.key) not in equivalents
            and (not args.match or any(p in m.key for p in args.match))
        ]
        components = judge_silent.module_components(module, generated.MODULE_TESTS[module])
        # Every Nth mutant, named by its place among all of them ("rope-12").
        sample = judge_silent.mutant_bugs(mutants, components)
        bugs += [b for b in sample if int(b.name.rsplit("-", 1)[1]) % args.every == 0]
    return bugs


def run_first(options: argparse.ArgumentParser, source: str, args: argparse.Namespace) -> bool:
    """Run each mistake of ``source`` as a student runs its component's tests; print whether the
    first failure names it, per component and for the set; return whether every run caught it."""
    if source == "generated":
        bugs = mutant_bugs(options, args)
    else:
        bugs = chosen_bugs(options, source, args.names)
    jobs = args.jobs or BUG_JOBS
    print(f"the first failure of {len(bugs)} mistakes of the {source}, {jobs} runs at a time")
    runs, broken = judge_first.run_all(bugs, jobs, args.timeout)
    if args.log:
        judge_first.write_log(runs, args.log)
    print(judge_first.report(runs, broken, source))
    return all(r.caught for r in runs)


def run_silent(options: argparse.ArgumentParser, source: str, args: argparse.Namespace) -> bool:
    """Grade the mistakes of ``source``, test the ones that lose points; print the silent
    hidden losses and double charges; return whether there is no silent loss."""
    if source == "generated":
        bugs = mutant_bugs(options, args)
    else:
        bugs = graded_bugs(options, source, chosen_bugs(options, source, args.names))
    jobs = args.jobs or BUG_JOBS
    order = (
        "tested, then graded where the tests miss"
        if source == "generated"
        else ("graded, then tested where charged")
    )
    print(f"judging {len(bugs)} mistakes of the {source}: {order}")
    verdicts = judge_silent.judge_all(bugs, jobs, args.timeout, tests_first=source == "generated")
    print(judge_silent.report(verdicts))
    return not any(v.silent for v in verdicts)


def run_bugs(options: argparse.ArgumentParser, source: str, args: argparse.Namespace) -> bool:
    """Judge the bugs of ``source``; print the report; return whether every one was caught."""
    bugs = chosen_bugs(options, source, args.names)
    jobs = args.jobs or BUG_JOBS
    if args.judge == "grader":
        bugs = graded_bugs(options, source, bugs)
        print(f"grading {len(bugs)} bugs of the {source} through the cases, {jobs} at a time")
        results = judge_grader.grade_all(bugs, jobs, args.timeout)
        print(judge_grader.report(results))
        return all(r.lost > 0 for r in results)
    print(f"mutation testing {len(bugs)} bugs of the {source}, {jobs} at a time")
    results, broken = judge_tests.run_all(bugs, jobs, args.timeout)
    if args.log:
        judge_tests.write_log(results, args.log)
    blind = source == "blind"
    print(judge_tests.blind_report(results) if blind else judge_tests.report(results, broken))
    return all(r.caught for r in results)


def generated_modules(options: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    """The modules whose mutants are asked for: named, the smoke set, the graded ones, or all."""
    if args.smoke and args.graded:
        options.error("--smoke or --graded, not both")
    graded = generated.graded_modules()
    everything = graded + ([] if args.graded else list(generated.REFERENCE_MODULE_TESTS))
    modules = generated.SMOKE_MODULES if args.smoke else (args.names or everything)
    known = set(generated.MODULE_TESTS) | set(generated.REFERENCE_MODULE_TESTS)
    unknown = sorted(set(modules) - known)
    if unknown:
        options.error(f"not modules with known tests: {unknown}")
    return modules


def run_generated(options: argparse.ArgumentParser, args: argparse.Namespace) -> bool:
    """Judge the generated mutants by the tests; print the report; return whether it is clean."""
    modules = generated_modules(options, args)
    if args.list:
        for module in modules:
            mutants = generate(REPO_ROOT, f"cs336_basics/{module}")
            chosen = [m for m in mutants if not args.match or any(p in m.key for p in args.match)]
            print("\n".join(str(m) for m in chosen))
        return True
    outcomes = generated.run(modules, args.jobs or os.cpu_count() or 1, args.match)
    if args.log:
        generated.write_log(outcomes, args.log)
    text, clean = generated.report(outcomes, generated.load_equivalents(), complete=not args.match)
    print(text)
    return clean


def main(argv: list[str] | None = None) -> int:
    options = parser()
    args = options.parse_args(argv)
    args.source = list(dict.fromkeys(args.source or ["catalogue"]))
    check_combination(options, args)
    clean = True
    for source in args.source:
        if args.judge == "silent":
            clean &= run_silent(options, source, args)
        elif args.judge == "first":
            clean &= run_first(options, source, args)
        elif source == "generated":
            clean &= run_generated(options, args)
        else:
            clean &= run_bugs(options, source, args)
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
