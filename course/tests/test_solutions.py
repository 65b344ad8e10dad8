"""The independent solutions keep the styles they exist to prove the suite accepts (the suite
itself runs on them with ``make check-solutions``)."""

from __future__ import annotations

import ast
import importlib
import sys
import tomllib

import numpy as np
import pytest
import torch

from course.handout.check_solutions import ALTERNATIVE, SOLUTIONS, read_alternative, stage_solution
from course.paths import REPO_ROOT
from course.workspace import apply_edits, stage


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


def test_open_choices_alternative_makes_the_other_choices(tmp_path):
    # Its edits still fit its base, and the AdamW it builds is torch.optim.AdamW's own algorithm
    # (decay before the update, eps on the bias-corrected root) while evaluation draws windows
    # from NumPy's global generator (two calls differ).
    base, edits = read_alternative(SOLUTIONS / "open_choices" / ALTERNATIVE)
    stage(tmp_path, ["cs336_basics"], source=base)
    apply_edits(tmp_path, edits)
    saved = {k: v for k, v in sys.modules.items() if k.split(".")[0] == "cs336_basics"}
    for name in saved:
        del sys.modules[name]
    sys.path.insert(0, str(tmp_path))
    try:
        optimization = importlib.import_module("cs336_basics.optimization")
        runner = importlib.import_module("cs336_basics.runner")
        ours, theirs = (
            torch.nn.Parameter(torch.randn(5, generator=torch.Generator().manual_seed(1)))
            for _ in range(2)
        )
        hyper = {"lr": 0.1, "betas": (0.9, 0.95), "eps": 1e-2, "weight_decay": 0.3}
        mine = optimization.DecoupledAdam([ours], **hyper)
        reference = torch.optim.AdamW([theirs], **hyper)
        for step in range(5):
            for p, opt in ((ours, mine), (theirs, reference)):
                p.grad = torch.full_like(p, 0.5 - step)
                opt.step()
        torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-7)
        model = torch.nn.Sequential(torch.nn.Embedding(50, 50))
        tokens = np.arange(50) % 50
        np.random.seed(0)
        losses = {runner.held_out_loss(model, tokens, 2, 4, 1, "cpu") for _ in range(4)}
        assert len(losses) > 1
    finally:
        sys.path.remove(str(tmp_path))
        for name in [k for k in sys.modules if k.split(".")[0] == "cs336_basics"]:
            del sys.modules[name]
        sys.modules.update(saved)


def test_an_alternative_with_an_unknown_base_or_key_is_refused(tmp_path):
    alternative = tmp_path / ALTERNATIVE
    alternative.write_text('base = "no_such_solution"\n', encoding="utf-8")
    with pytest.raises(ValueError, match="base 'no_such_solution' is not a solution"):
        read_alternative(alternative)
    alternative.write_text('base = "own_names"\nedits = []\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"unknown keys \['edits'\]"):
        read_alternative(alternative)


def test_a_staged_solution_runs_under_the_handouts_project_file(tmp_path):
    # As a student's zip unpacks into the handout: its pytest settings, not the repository's
    # worker processes (which would time and order a student's run differently).
    stage_solution(SOLUTIONS / "upstream_style", tmp_path, set())
    project = tomllib.loads((tmp_path / "pyproject.toml").read_text(encoding="utf-8"))
    assert (
        project["tool"]["pytest"]["ini_options"]["addopts"] == "-ra --strict-markers -m 'not slow'"
    )
    assert project["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"] == ["cs336_basics"]
