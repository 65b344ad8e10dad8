"""What the checkout says about itself: its version and the Python minor the handout pins."""

import re
import tomllib
from pathlib import Path

from course.paths import REPO_ROOT


def project_version(root: Path = REPO_ROOT) -> str:
    return tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"]


def grader_python(root: Path = REPO_ROOT) -> str:
    """The Python minor version the handout pins (its ``.python-version``) and the grader runs:
    the floor of ``requires-python``, so the lock and the pin agree."""
    path = root / "pyproject.toml"
    spec = tomllib.loads(path.read_text(encoding="utf-8"))["project"].get("requires-python", "")
    floor = re.fullmatch(r">=\s*(3\.\d+)", spec.strip())
    if floor is None:
        raise ValueError(
            f"{path}: requires-python is {spec!r}; the handout pins its floor, so it must read "
            "'>=3.N' (e.g. '>=3.12')"
        )
    return floor.group(1)
