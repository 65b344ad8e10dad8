"""Silent hidden losses and double charges: the grader and the shipped tests judged together.

A mistake is a *silent hidden loss* when the grader takes points from its component while every
shipped test of that component passes: the student saw green and lost points. Each mistake is
graded first (``judge_grader``: the driver, unsandboxed, on the component's public and hidden
cases); only the ones that lose points then run the component's shipped tests as a student
runs them (``judge_first``'s ``-x -k <component>`` run), so a mistake costs one driver run, and a
pytest run where it matters. Generated mutants go the other way round (``tests_first``): their
tests run first, and only the mutants those tests miss are graded, since a mistake whose shipped
tests fail cannot be a silent loss; most mutants fail their tests, and a test run that stops at
its first failure is cheaper than grading every case. Their double charges are then counted only
among the graded ones; the realistic sets (catalogue, blind, near misses) are graded whole.

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
from course.mutation import judge_first, judge_grader
from course.mutation.ast_mutants import Mutant
from course.mutation.catalogue import Bug
from course.mutation.generated import load_component_equivalents
from course.paths import REPO_ROOT

# The graded components a generated mutant of each module is graded and tested as (the
# modules whose tests are picked by a -k expression of their own, in generated.MODULE_TESTS).
MODULE_COMPONENTS = {
    "attention.py": ["scaled_dot_product_attention", "multihead_self_attention"],
    "model.py": ["transformer_lm"],
}
# Within a module of several components, the functions (or classes) that only some of them run:
# a mutant there is a mistake of those components alone. The others' tests never call it (a SiLU
# edit is no softmax mistake, the trainer's pre-token count no tokenizer mistake), so judging it
# as theirs counts a miss that no test of theirs could avoid. Any other function of the module
# is a mistake of each of its components (scaled_dot_product_attention runs inside multi-head
# attention; RoPE's class is judged through the attention layer that holds it too).
FUNCTION_COMPONENTS: dict[str, dict[str, list[str]]] = {
    "functional.py": {"silu": ["silu"], "softmax": ["softmax"]},
    "attention.py": {"MultiHeadSelfAttention": ["multihead_self_attention"]},
    # The tokenizer imports other functions of the module; only training counts pre-tokens.
    "pretokenization.py": {"_count_pretoken_strings": ["train_bpe"]},
}


def kind_of(case_id: str) -> str:
    """The case's name in ``<component>-hidden-<name>-<instance>``."""
    return case_id.split("-")[2]


@dataclass(frozen=True)
class Verdict:
    bug: Bug
    charge: judge_grader.CaughtBy | None  # None: not graded (its tests fail: it cannot be silent)
    tests_failed: bool | None  # None: no points lost, so the tests were not run

    @property
    def lost(self) -> float:
        return self.charge.lost if self.charge else 0.0

    @property
    def silent(self) -> bool:
        return self.lost > 0 and self.tests_failed is False

    @property
    def kinds(self) -> list[str]:
        """The case kinds (names) of the hidden cases that charged the mistake, in order."""
        failed = self.charge.failed_hidden if self.charge else ()
        return list(dict.fromkeys(kind_of(case) for case in failed))


def module_components(module: str, tests: list[str] | str) -> list[str]:
    graded = {c.name for c in load_rubric().components}
    named = MODULE_COMPONENTS.get(module, tests if isinstance(tests, list) else [])
    return [c for c in named if c in graded]


def mutant_components(
    mutant: Mutant, components: list[str], not_mistakes: frozenset[str] = frozenset()
) -> list[str]:
    """The components of ``components`` whose code runs the function ``mutant`` edits
    (``FUNCTION_COMPONENTS``; all of them for a function listed nowhere), less those for which
    the mutant is equivalent (``not_mistakes``)."""
    function = mutant.key.split(":", 1)[0]
    owners = FUNCTION_COMPONENTS.get(Path(mutant.path).name, {})
    for name, owned in owners.items():
        if function == name or function.startswith(f"{name}."):
            components = [c for c in components if c in owned]
            break
    return [c for c in components if c not in not_mistakes]


def mutant_bugs(mutants: list[Mutant], components: list[str]) -> list[Bug]:
    """Each generated mutant as a bug of each graded component of its module that runs the
    function it edits and can show it (one edit: the whole module, before and after)."""
    equivalent_for = load_component_equivalents()
    bugs = []
    for index, mutant in enumerate(mutants):
        original = (REPO_ROOT / mutant.path).read_text(encoding="utf-8")
        name = f"{Path(mutant.path).stem}-{index}"
        replacement = ((original, mutant.source),)
        not_mistakes = equivalent_for.get((mutant.path, mutant.key), frozenset())
        bugs += [
            Bug(name, c, mutant.path, replacement, str(mutant))
            for c in mutant_components(mutant, components, not_mistakes)
        ]
    return bugs


def tests_fail(bugs: list[Bug], jobs: int, timeout: float) -> dict[Bug, bool]:
    """Whether each bug's component's shipped tests fail, run as a student runs them."""
    runs, _ = judge_first.run_all(bugs, jobs, timeout, ways=("-k",))
    return {run.bug: run.caught for run in runs}


def judge_all(
    bugs: list[Bug], jobs: int, timeout: float, tests_first: bool = False
) -> list[Verdict]:
    """Grade every bug and run the shipped tests of the ones that lose points; or, with
    ``tests_first``, run every bug's tests and grade only the ones they miss."""
    if tests_first:
        failing = tests_fail(bugs, jobs, timeout)
        missed = [b for b in bugs if not failing[b]]
        charges = {c.bug: c for c in judge_grader.grade_all(missed, jobs, timeout)}
        return [Verdict(b, charges.get(b), failing[b]) for b in bugs]
    charges = judge_grader.grade_all(bugs, jobs, timeout)
    losing = [c.bug for c in charges if c.lost > 0]
    tested = tests_fail(losing, jobs, timeout) if losing else {}
    return [Verdict(c.bug, c, tested.get(c.bug)) for c in charges]


def report(verdicts: list[Verdict]) -> str:
    """The silent hidden losses, the double charges, and a count of each."""
    lines = ["silent hidden losses (points lost, every shipped test of the component passes):"]
    for v in verdicts:
        if v.silent:
            lines.append(
                f"  {v.bug.name} ({v.bug.component}, {v.lost:.2f} points): "
                f"{', '.join(v.charge.failed_hidden)}  [{v.bug.hint[:100]}]"
            )
    doubles = [v for v in verdicts if len(v.kinds) > 1]
    lines.append("double charges (hidden cases of more than one kind fail):")
    for v in doubles:
        total = len({kind_of(case) for case in judge_grader.hidden_case_ids(v.bug.component)})
        lines.append(
            f"  {v.bug.name} ({v.bug.component}, {v.lost:.2f} points): "
            f"{len(v.kinds)} of {total} kinds: {', '.join(v.kinds)}"
        )
    graded = [v for v in verdicts if v.charge]
    charged = sum(v.lost > 0 for v in graded)
    silent = sum(v.silent for v in verdicts)
    stale = [v.bug.name for v in graded if v.charge.note.startswith("STALE")]
    if stale:
        lines.append(f"stale (an edit no longer fits): {', '.join(stale)}")
    if len(graded) < len(verdicts):
        lines.append(
            f"{len(verdicts) - len(graded)} of {len(verdicts)} mistakes fail their component's "
            "shipped tests (not graded: none of them can be a silent loss)"
        )
    lines.append(
        f"silent hidden losses: {silent} of {charged} charged mistakes ({len(graded)} graded); "
        f"double charges: {len(doubles)}"
    )
    return "\n".join(lines)
