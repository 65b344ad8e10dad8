"""The handout reads as an assignment: no instructor vocabulary in its prose, released changelog
sections only, and the rubric's points for the end-of-run summary."""

from __future__ import annotations

import tomllib
from pathlib import Path

from course.handout.build import RUBRIC, changelog, student_rubric
from course.handout.verify import vocabulary_problems
from course.paths import REPO_ROOT


def test_vocabulary_check_names_file_line_and_word(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("# Assignment\n\nFixed in issue 12.\n")
    package = tmp_path / "cs336_basics"
    package.mkdir()
    (package / "tokenizer.py").write_text(
        '"""Encode text."""\n\n# the numba kernels are faster\nNAME = "mutants"\nnumba = 1\n'
    )
    problems = vocabulary_problems(tmp_path, "base")
    assert problems == [
        "README.md:3: 'issue 12' names an issue number",
        "cs336_basics/tokenizer.py:3: 'numba' names the reference's compiled tokenizer",
        "cs336_basics/tokenizer.py:4: 'mutants' names the suite's mutation testing",
    ]  # code (the name `numba`) is not prose
    assert vocabulary_problems(tmp_path, "extension") == []


def test_changelog_ships_released_versions_only(tmp_path: Path) -> None:
    (tmp_path / "course" / "handout").mkdir(parents=True)
    (tmp_path / "course" / "handout" / "CHANGELOG.md").write_text(
        "# Changelog\n\n## Unreleased\n\n- numba inside.\n\n## 1.0\n\n- First.\n"
    )
    assert changelog(tmp_path) == "## 1.0\n\n- First.\n"


def test_student_rubric_holds_every_components_points() -> None:
    with (REPO_ROOT / RUBRIC).open("rb") as file:
        rubric = {c["name"]: c["points"] for c in tomllib.load(file)["component"]}
    shipped = tomllib.loads(student_rubric(REPO_ROOT / RUBRIC))
    assert {c["name"]: c["points"] for c in shipped["component"]} == rubric
