"""The independent solutions keep the styles they exist to prove the suite accepts (the suite
itself runs on them with ``make check-solutions``)."""

from __future__ import annotations

import ast

from course.check_solutions import SOLUTIONS
from course.handout import REPO_ROOT


def test_single_module_is_one_module_without_annotations():
    package = SOLUTIONS / "single_module" / "cs336_basics"
    assert [p.name for p in package.rglob("*.py")] == ["__init__.py"]
    for path in (package / "__init__.py", SOLUTIONS / "single_module" / "tests" / "adapters.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        annotated = [
            f"{path.name}:{node.lineno}"
            for node in ast.walk(tree)
            if (isinstance(node, ast.arg) and node.annotation is not None)
            or (isinstance(node, ast.FunctionDef) and node.returns is not None)
            or isinstance(node, ast.AnnAssign)
        ]
        assert not annotated, annotated


def test_own_names_shares_no_module_name_with_the_reference():
    ours = {p.stem for p in (SOLUTIONS / "own_names" / "cs336_basics").rglob("*.py")}
    reference = {p.stem for p in (REPO_ROOT / "cs336_basics").rglob("*.py")}
    assert ours & reference == {"__init__"}
