"""Silent hidden losses and double charges: the grader and the shipped tests judged together.

A mistake is a *silent hidden loss* when the grader takes points from its component while every
shipped test of that component passes: the student saw green and lost points. Each mistake is
graded first (``judge_grader``: the driver, unsandboxed, on the component's public and hidden
cases); only the ones that lose points then run the component's shipped tests
(``judge_tests``), so a mistake costs one driver run, and a pytest run where it matters.

The same grading says which hidden cases charge each mistake: one charged in more than one case
kind of its component is a *double charge*, listed so each can be read against what the cases
are named for (docs/grading.md, "One mistake, one charge"). Run through ``python -m
course.mutation --judge silent`` (catalogue, blind, near-miss, and the generated mutants of the
graded modules, ``--graded``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from course.grading.judge import load_rubric
from course.mutation import judge_grader, judge_tests
from course.mutation.ast_mutants import Mutant
from course.mutation.catalogue import Bug
from course.paths import REPO_ROOT

# The graded components a generated mutant of each module is graded and tested as (the
# modules whose tests are picked by a -k expression of their own, in generated.MODULE_TESTS).
MODULE_COMPONENTS = {
    "attention.py": ["scaled_dot_product_attention", "multihead_self_attention"],
    "model.py": ["transformer_lm"],
}


def kind_of(case_id: str) -> str:
    """The case's name in ``<component>-hidden-<name>-<instance>``."""
    return case_id.split("-")[2]


@dataclass(frozen=True)
class Verdict:
    charge: judge_grader.CaughtBy
    tests_failed: bool | None  # None: no points lost, so the tests were not run

    @property
    def silent(self) -> bool:
        return self.charge.lost > 0 and self.tests_failed is False

    @property
    def kinds(self) -> list[str]:
        """The case kinds (names) of the hidden cases that charged the mistake, in order."""
        return list(dict.fromkeys(kind_of(case) for case in self.charge.failed_hidden))


def module_components(module: str, tests: list[str] | str) -> list[str]:
    graded = {c.name for c in load_rubric().components}
    named = MODULE_COMPONENTS.get(module, tests if isinstance(tests, list) else [])
    return [c for c in named if c in graded]


def mutant_bugs(mutants: list[Mutant], components: list[str]) -> list[Bug]:
    """Each generated mutant as a bug of each graded component of its module (one edit: the
    whole module, before and after)."""
    bugs = []
    for index, mutant in enumerate(mutants):
        original = (REPO_ROOT / mutant.path).read_text(encoding="utf-8")
        name = f"{Path(mutant.path).stem}-{index}"
        replacement = ((original, mutant.source),)
        bugs += [Bug(name, c, mutant.path, replacement, str(mutant)) for c in components]
    return bugs


def judge_all(bugs: list[Bug], jobs: int, timeout: float) -> list[Verdict]:
    """Grade every bug; run the shipped tests of the ones that lose points."""
    charges = judge_grader.grade_all(bugs, jobs, timeout)
    losing = [c.bug for c in charges if c.lost > 0]
    tested = {}
    if losing:
        results, _ = judge_tests.run_all(losing, jobs, timeout, first=True)
        tested = {(r.bug.name, r.bug.component): r.caught for r in results}
    return [Verdict(c, tested.get((c.bug.name, c.bug.component))) for c in charges]


def report(verdicts: list[Verdict]) -> str:
    """The silent hidden losses, the double charges, and a count of each."""
    lines = ["silent hidden losses (points lost, every shipped test of the component passes):"]
    for v in verdicts:
        if v.silent:
            lines.append(
                f"  {v.charge.bug.name} ({v.charge.bug.component}, {v.charge.lost:.2f} points): "
                f"{', '.join(v.charge.failed_hidden)}  [{v.charge.bug.hint[:100]}]"
            )
    doubles = [v for v in verdicts if len(v.kinds) > 1]
    lines.append("double charges (hidden cases of more than one kind fail):")
    for v in doubles:
        total = len(
            {kind_of(case) for case in judge_grader.hidden_case_ids(v.charge.bug.component)}
        )
        lines.append(
            f"  {v.charge.bug.name} ({v.charge.bug.component}, {v.charge.lost:.2f} points): "
            f"{len(v.kinds)} of {total} kinds: {', '.join(v.kinds)}"
        )
    charged = sum(v.charge.lost > 0 for v in verdicts)
    silent = sum(v.silent for v in verdicts)
    stale = [v.charge.bug.name for v in verdicts if v.charge.note.startswith("STALE")]
    if stale:
        lines.append(f"stale (an edit no longer fits): {', '.join(stale)}")
    lines.append(
        f"silent hidden losses: {silent} of {charged} charged mistakes ({len(verdicts)} graded); "
        f"double charges: {len(doubles)}"
    )
    return "\n".join(lines)
