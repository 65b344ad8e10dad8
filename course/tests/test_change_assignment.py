"""docs/instructor.md, "Change the assignment", followed as written: in a copy of the repository,
the steps of "Add a graded component" (GELU as ``gelu``) are applied from the page itself (each
step's file and code block, then its commands), and the new component is graded: the reference
at full marks, the bare handout at zero.

Nothing about GELU is written here: the code comes from the page, so a step missing from it, or
wrong, fails this test. The grade covers only the new component (a rubric holding its
``[[component]]`` alone) to keep the run short: about 4 minutes on two loaded cores, most of it
``make hidden-cases`` and two sandboxed grades.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from course.handout.build import source_files
from course.paths import REPO_ROOT, RUBRIC, relative

GUIDE = REPO_ROOT / "docs" / "instructor.md"
SECTION = "### Add a graded component"
COMPONENT = "gelu"
STEP = re.compile(r"^\*\*Step (\d+)\.\*\* (.*?):\n\n```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
NEW_FILE = re.compile(r"New file `([^`]+)`")
AT_END = re.compile(r"At the end of `([^`]+)`")
AROUND_LINE = re.compile(r"In `([^`]+)`, (after|before) the line\s+`([^`]+)`")


@dataclass(frozen=True)
class Step:
    """One documented step: write ``code`` into ``path`` (``how``: new, end, after, before, next
    to ``anchor``), or run ``code`` as shell commands (``how`` = run)."""

    number: int
    how: str
    code: str
    path: str = ""
    anchor: str = ""


def documented_steps(guide: str, name: str = COMPONENT) -> list[Step]:
    """The steps of the guide's "Add a graded component", ``<name>`` read as ``name``."""
    start = guide.index(SECTION)
    end = guide.find("\n### ", start + len(SECTION))
    section = guide[start : end if end >= 0 else len(guide)]
    steps = []
    for number, instruction, language, code in STEP.findall(section):
        instruction = " ".join(instruction.split())
        if language == "sh":
            steps.append(Step(int(number), "run", code))
        elif found := NEW_FILE.search(instruction):
            steps.append(Step(int(number), "new", code, found[1]))
        elif found := AT_END.search(instruction):
            steps.append(Step(int(number), "end", code, found[1]))
        elif found := AROUND_LINE.search(instruction):
            steps.append(Step(int(number), found[2], code, found[1], found[3]))
        else:
            raise ValueError(f"step {number}: no file or command in {instruction!r}")
    numbers = [s.number for s in steps]
    if numbers != list(range(1, len(steps) + 1)):
        raise ValueError(f"{SECTION}: steps numbered {numbers}, not 1..{len(steps)}")
    if any("<name>" in s.code for s in steps):
        raise ValueError(f"{SECTION}: a code block holds <name>; the example's code is concrete")
    return [Step(s.number, s.how, s.code, s.path.replace("<name>", name), s.anchor) for s in steps]


def top_level_definition(code: str) -> bool:
    return bool(re.match(r"(def|class|@)", code))


def apply(step: Step, root: Path) -> None:
    """Write a step's code where it says; top-level Python definitions get PEP 8's blank lines."""
    target = root / step.path
    code = step.code.rstrip("\n") + "\n"
    if step.how == "new":
        if target.exists():
            raise FileExistsError(f"step {step.number}: {step.path} exists already")
        target.write_text(code, encoding="utf-8")
        return
    text = target.read_text(encoding="utf-8")
    gap = "\n\n" if target.suffix == ".py" and top_level_definition(code) else ""
    if step.how == "end":
        target.write_text(text.rstrip("\n") + "\n\n" + gap + code, encoding="utf-8")
        return
    lines = text.splitlines(keepends=True)
    matches = [i for i, line in enumerate(lines) if line.strip() == step.anchor]
    if len(matches) != 1:
        raise ValueError(
            f"step {step.number}: {len(matches)} lines of {step.path} read {step.anchor!r}"
        )
    at = matches[0] + (step.how == "after")
    lines.insert(at, code + gap + ("\n" if gap else ""))
    target.write_text("".join(lines), encoding="utf-8")


def copy_repository(destination: Path) -> Path:
    """The repository's files (tracked and untracked-but-not-ignored), without its git state."""
    for rel in source_files(REPO_ROOT):
        (destination / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / rel, destination / rel)
    return destination


def environment(root: Path) -> dict[str, str]:
    """``uv run`` and ``make`` in ``root`` on this interpreter's environment, unsynced and
    offline, with ``root``'s packages ahead of the installed (editable) ones."""
    return {
        **os.environ,
        "UV_PROJECT_ENVIRONMENT": sys.prefix,
        "UV_NO_SYNC": "1",
        "UV_OFFLINE": "1",
        "PYTHONPATH": str(root),
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def run(command: str | list[str], root: Path) -> str:
    result = subprocess.run(
        command,
        shell=isinstance(command, str),
        cwd=root,
        env=environment(root),
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert result.returncode == 0, (
        f"{command} failed:\n{result.stdout[-4000:]}{result.stderr[-4000:]}"
    )
    return result.stdout


def rubric_of(component: str, root: Path, out: Path) -> Path:
    """``root``'s rubric with ``component`` as its only graded component."""
    head, *entries = (
        (root / relative(RUBRIC)).read_text(encoding="utf-8").split("\n[[component]]\n")
    )
    mine = [entry for entry in entries if tomllib.loads(entry)["name"] == component]
    assert len(mine) == 1, f"the rubric has {len(mine)} [[component]] named {component}"
    out.write_text(f"{head}\n[[component]]\n{mine[0]}", encoding="utf-8")
    return out


def grade(zip_path: Path, rubric: Path, expect: str, root: Path) -> None:
    out = zip_path.with_suffix("")
    python = [sys.executable, "-m", "course.grading", "grade"]
    run(
        [*python, str(zip_path), "--rubric", str(rubric), "--out", str(out), "--expect", expect],
        root,
    )


@pytest.mark.slow
def test_adding_a_component_as_documented_grades_the_reference_full_and_the_handout_zero(
    tmp_path: Path,
) -> None:
    root = copy_repository(tmp_path / "repo")
    for step in documented_steps(GUIDE.read_text(encoding="utf-8")):
        if step.how == "run":
            for command in filter(None, map(str.strip, step.code.splitlines())):
                run(command, root)
        else:
            apply(step, root)
    assert f"def run_{COMPONENT}(" in (root / "tests" / "adapter_signatures.py").read_text()

    python = [sys.executable, "-m", "course.handout"]
    run([*python, "build"], root)
    handout = root / "dist" / "handout"
    skeleton = (handout / "cs336_basics" / f"{COMPONENT}.py").read_text()
    assert "raise NotImplementedError" in skeleton and "torch.erf" not in skeleton
    run([*python, "submission", "--out", str(tmp_path / "reference.zip")], root)
    run([*python, "submission", "--root", str(handout), "--out", str(tmp_path / "bare.zip")], root)
    rubric = rubric_of(COMPONENT, root, tmp_path / "rubric.toml")
    grade(tmp_path / "reference.zip", rubric, "full", root)
    grade(tmp_path / "bare.zip", rubric, "zero", root)


GUIDE_WITH_STEPS = """### Add a graded component

**Step 1.** New file `cs336_basics/<name>.py`, the code:

```python
def f(x):
    return x
```

**Step 2.** In `tests/adapters.py`, after the line `import os`:

```python
import sys
```

**Step 3.** Run:

```sh
make hidden-cases
```

### Remove a graded component
"""


def test_the_steps_are_read_from_the_guide_and_the_real_guide_has_them() -> None:
    steps = documented_steps(GUIDE_WITH_STEPS, "gelu")
    assert [(s.how, s.path, s.anchor) for s in steps] == [
        ("new", "cs336_basics/gelu.py", ""),
        ("after", "tests/adapters.py", "import os"),
        ("run", "", ""),
    ]
    assert steps[2].code == "make hidden-cases\n"
    real = documented_steps(GUIDE.read_text(encoding="utf-8"))
    assert {s.how for s in real} >= {"new", "end", "after", "before", "run"}


def test_a_step_without_a_file_or_out_of_order_is_refused() -> None:
    with pytest.raises(ValueError, match="no file or command"):
        documented_steps(GUIDE_WITH_STEPS.replace("New file `cs336_basics/<name>.py`", "Write"))
    with pytest.raises(ValueError, match="numbered"):
        documented_steps(GUIDE_WITH_STEPS.replace("**Step 2.**", "**Step 4.**"))


def test_an_anchor_must_name_exactly_one_line(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\nx = 1\ny = 2\n")
    apply(Step(1, "before", "z = 3\n", "a.py", "y = 2"), tmp_path)
    assert (tmp_path / "a.py").read_text() == "x = 1\nx = 1\nz = 3\ny = 2\n"
    with pytest.raises(ValueError, match="2 lines of a.py"):
        apply(Step(2, "after", "w = 0\n", "a.py", "x = 1"), tmp_path)
    with pytest.raises(FileExistsError):
        apply(Step(3, "new", "", "a.py"), tmp_path)
