"""The Python minor version the handout pins and the grader runs (shared: the handout writes it
to ``.python-version``; the Gradescope setup installs it)."""

import re
import tomllib
from pathlib import Path

from course.paths import REPO_ROOT


def grader_python(root: Path = REPO_ROOT) -> str:
    """The floor of ``requires-python`` in ``root``'s pyproject.toml, so the lock and the pin
    agree."""
    path = root / "pyproject.toml"
    spec = tomllib.loads(path.read_text(encoding="utf-8"))["project"].get("requires-python", "")
    floor = re.fullmatch(r">=\s*(3\.\d+)", spec.strip())
    if floor is None:
        raise ValueError(
            f"{path}: requires-python is {spec!r}; the handout pins its floor, so it must read "
            "'>=3.N' (e.g. '>=3.12')"
        )
    return floor.group(1)
