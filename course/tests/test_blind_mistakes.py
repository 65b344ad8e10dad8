"""The blind sets of student mistakes (course/mutation/blind.py, blind_second.py) still fit the
reference, and every set's edits make the mistake they name.

Each bug must apply to the reference exactly as written and leave a module that compiles, so a
mutation run measures the suite, not a stale edit; and an edit must not cut a chained call
(``x - x.amax(...)`` replaced by ``x`` in ``x - x.amax(...).detach()`` leaves ``x.detach()``: a
second mistake the hint does not name).
"""

from __future__ import annotations

import shutil
import tomllib

import pytest

from course.mutation.blind import BLIND
from course.mutation.blind_second import SECOND_BLIND
from course.mutation.catalogue import BUGS
from course.mutation.near_miss import NEAR_MISSES
from course.paths import REPO_ROOT

REPO = REPO_ROOT
RUBRIC_COMPONENTS = {
    component["name"]
    for component in tomllib.loads(
        (REPO / "course/grading/rubric.toml").read_text(encoding="utf-8")
    )["component"]
}


BLIND_SETS = {"blind": BLIND, "second-blind": SECOND_BLIND}
EVERY_SET = [*BUGS, *BLIND, *SECOND_BLIND, *NEAR_MISSES]


@pytest.mark.parametrize("mistake", BLIND + SECOND_BLIND, ids=lambda mistake: mistake.name)
def test_applies_to_the_reference_and_compiles(mistake, tmp_path):
    copy = tmp_path / mistake.path
    copy.parent.mkdir(parents=True)
    shutil.copyfile(REPO / mistake.path, copy)
    mistake.apply(tmp_path)  # raises unless every edit occurs exactly once
    mutated = copy.read_text(encoding="utf-8")
    assert mutated != (REPO / mistake.path).read_text(encoding="utf-8")
    compile(mutated, mistake.path, "exec")


def test_names_are_unique_and_components_known():
    names = [mistake.name for mistake in EVERY_SET]
    assert len(names) == len(set(names))
    for mistake in BLIND + SECOND_BLIND:
        assert mistake.hint.strip(), mistake.name
        # Ungraded parts have no rubric component: they must say which tests are theirs.
        assert mistake.component in RUBRIC_COMPONENTS or mistake.select, mistake.name


@pytest.mark.parametrize("name", BLIND_SETS)
def test_every_graded_component_has_mistakes(name):
    per_component = {component: 0 for component in RUBRIC_COMPONENTS}
    for mistake in BLIND_SETS[name]:
        if mistake.component in per_component:
            per_component[mistake.component] += 1
    assert min(per_component.values()) >= 2, per_component


def chain_cut(source: str, before: str, after: str) -> bool:
    """Whether replacing ``before`` by ``after`` in ``source`` leaves the attribute or call that
    followed ``before`` on an expression of another kind (``before`` ends in a call, ``after``
    in a name): the chain then applies to what the edit put there."""
    follows = source[source.index(before) + len(before) :][:1]
    return follows == "." and before.rstrip()[-1:] != after.rstrip()[-1:]


def test_no_edit_cuts_a_chained_call():
    cut = [
        mistake.name
        for mistake in EVERY_SET
        for before, after in mistake.replacements
        if chain_cut((REPO / mistake.path).read_text(encoding="utf-8"), before, after)
    ]
    assert cut == []


def test_a_cut_chain_is_seen():
    source = "shifted = x - x.amax(dim=-1).detach()\n"
    assert chain_cut(source, "x - x.amax(dim=-1)", "x")
    assert not chain_cut(source, "x - x.amax(dim=-1)", "x - x.amax()")
    assert not chain_cut(source, "x - x.amax(dim=-1).detach()", "x")
