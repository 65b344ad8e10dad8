"""The blind catalogue of student mistakes (course/mutation/blind.py) still fits the reference.

Each bug must apply to the reference exactly as written and leave a module that compiles, so a
mutation run measures the suite, not a stale edit.
"""

from __future__ import annotations

import shutil
import tomllib

import pytest

from course.mutation.blind import BLIND
from course.paths import REPO_ROOT

REPO = REPO_ROOT
RUBRIC_COMPONENTS = {
    component["name"]
    for component in tomllib.loads(
        (REPO / "course/grading/rubric.toml").read_text(encoding="utf-8")
    )["component"]
}


@pytest.mark.parametrize("mistake", BLIND, ids=lambda mistake: mistake.name)
def test_applies_to_the_reference_and_compiles(mistake, tmp_path):
    copy = tmp_path / mistake.path
    copy.parent.mkdir(parents=True)
    shutil.copyfile(REPO / mistake.path, copy)
    mistake.apply(tmp_path)  # raises unless every edit occurs exactly once
    mutated = copy.read_text(encoding="utf-8")
    assert mutated != (REPO / mistake.path).read_text(encoding="utf-8")
    compile(mutated, mistake.path, "exec")


def test_names_are_unique_and_components_known():
    names = [mistake.name for mistake in BLIND]
    assert len(names) == len(set(names))
    for mistake in BLIND:
        assert mistake.hint.strip(), mistake.name
        # Ungraded parts have no rubric component: they must say which tests are theirs.
        assert mistake.component in RUBRIC_COMPONENTS or mistake.select, mistake.name


def test_every_graded_component_has_mistakes():
    per_component = {name: 0 for name in RUBRIC_COMPONENTS}
    for mistake in BLIND:
        if mistake.component in per_component:
            per_component[mistake.component] += 1
    assert min(per_component.values()) >= 2, per_component
