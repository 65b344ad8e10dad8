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


def test_upstream_style_lives_as_the_course_suggests():
    """Imports ``tests.common`` and, at module level, wandb and pynvml; its training script
    tokenizes from a file handle and clips ``model.parameters()``; its own module layout."""
    root = SOLUTIONS / "upstream_style"
    package = root / "cs336_basics"
    modules = {p.stem: ast.parse(p.read_text(encoding="utf-8")) for p in package.glob("*.py")}

    def top_level_imports(tree: ast.Module) -> set[str]:
        found = set()
        for node in tree.body:
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                found.add(node.module or "")
        return found

    assert "tests.common" in top_level_imports(modules["tokenizer"])
    assert {"wandb", "pynvml"} <= top_level_imports(modules["utils"])
    assert "cs336_basics.utils" in top_level_imports(
        ast.parse((root / "tests" / "adapters.py").read_text(encoding="utf-8"))
    )
    train = ast.unparse(modules["train"])
    assert "tokenizer.encode_iterable(f)" in train and "with open(path" in train
    assert "gradient_clipping(model.parameters()" in train
    reference = {p.stem for p in (REPO_ROOT / "cs336_basics").rglob("*.py")}
    assert set(modules) - reference >= {"nn_utils", "optimizer", "utils"}
