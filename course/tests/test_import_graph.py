"""The layers point one way (core <- decoding <- variants <- hf <- runner <- tooling) and no
imports form a cycle."""

from __future__ import annotations

from pathlib import Path

import pytest

from course.layers import (
    cycles,
    import_graph,
    layer_violations,
    modules_failing_alone,
    outside_dependencies,
    part_violations,
)


@pytest.mark.slow  # seconds of the whole tree or of subprocesses: `make test-all` and CI
def test_the_project_has_one_way_layers_and_no_cycles():
    graph = import_graph()
    assert layer_violations(graph) == []
    assert part_violations(graph) == []
    assert cycles(graph) == []
    uses = outside_dependencies(graph)
    assert uses["core"] == set()
    assert uses["decoding"] == {"core"}
    assert uses["variants"] == {"core", "decoding"}
    assert uses["hf"] == {"core", "variants"}


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in {"cs336_basics/__init__.py": "", **files}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    for package in ("course", "tests", "benchmarks"):
        (root / package).mkdir(exist_ok=True)
    return root


def test_an_import_up_the_layers_is_named_with_its_line_even_inside_a_function(tmp_path):
    root = write_tree(
        tmp_path,
        {
            "cs336_basics/model.py": "import torch\n\n\ndef build():\n    from cs336_basics.variants import moe\n",
            "cs336_basics/variants/__init__.py": "",
            "cs336_basics/variants/moe.py": "from ..model import build\n",
            "cs336_basics/runner/__init__.py": "",
            "cs336_basics/runner/cli.py": "from cs336_basics.variants import moe\n",
        },
    )
    graph = import_graph(root)
    assert graph["cs336_basics.variants.moe"] == {"cs336_basics.model": 1}  # relative, resolved
    imports = "cs336_basics/model.py:5: core module cs336_basics.model imports variants module"
    assert layer_violations(graph, root) == [
        f"{imports} cs336_basics.variants",  # the package's __init__ runs too
        f"{imports} cs336_basics.variants.moe",
    ]


def test_the_architecture_importing_hf_interop_or_decoding_importing_it_is_a_violation(tmp_path):
    """Decoding stands on the core alone; HF interop sits above the architecture."""
    root = write_tree(
        tmp_path,
        {
            "cs336_basics/variants/__init__.py": "",
            "cs336_basics/variants/model.py": "from cs336_basics.variants.hf import convert\n",
            "cs336_basics/variants/hf/__init__.py": "",
            "cs336_basics/variants/hf/convert.py": "from cs336_basics.variants import model\n",
            "cs336_basics/variants/decoding/__init__.py": "",
            "cs336_basics/variants/decoding/kv_cache.py": "import cs336_basics.variants.model\n",
        },
    )
    assert layer_violations(import_graph(root), root) == [
        "cs336_basics/variants/decoding/kv_cache.py:1: decoding module "
        "cs336_basics.variants.decoding.kv_cache imports variants module cs336_basics.variants.model",
        "cs336_basics/variants/model.py:1: variants module cs336_basics.variants.model imports "
        "hf module cs336_basics.variants.hf",
        "cs336_basics/variants/model.py:1: variants module cs336_basics.variants.model imports "
        "hf module cs336_basics.variants.hf.convert",
    ]


def test_a_cycle_is_found_however_long():
    graph = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}, "e": {}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b": 1}, "b": {}}) == []


def test_the_core_importing_the_tooling_is_a_violation(tmp_path):
    root = write_tree(tmp_path, {"cs336_basics/data.py": "import course.cases.fixtures\n"})
    (root / "course" / "cases").mkdir(parents=True)
    (root / "course" / "cases" / "fixtures.py").write_text("")
    (root / "course" / "cases" / "__init__.py").write_text("")
    (root / "course" / "__init__.py").write_text("")
    problems = layer_violations(import_graph(root), root)
    assert problems == [
        "cs336_basics/data.py:1: core module cs336_basics.data imports tooling module "
        "course.cases.fixtures"
    ]


def course_tree(root: Path, files: dict[str, str]) -> Path:
    """A checkout whose course/ has the four parts, the shared modules and ``files``."""
    tree = {"course/__init__.py": "", "course/paths.py": "", "course/tests/__init__.py": ""}
    for part in ("grading", "cases", "handout", "mutation"):
        tree[f"course/{part}/__init__.py"] = ""
    return write_tree(root, {**tree, **files})


def test_the_parts_of_course_import_only_down_their_order(tmp_path):
    root = course_tree(
        tmp_path,
        {
            "course/grading/grade.py": "from course.paths import X\nfrom course.grading import y\n",
            "course/cases/fixtures.py": "import course.grading.grade\n",
            "course/handout/build.py": "from course.cases import fixtures\n",
            "course/mutation/run.py": "import course.handout.build\n",
            "course/tests/test_x.py": "import course.mutation.run\n",
        },
    )
    assert part_violations(import_graph(root), root) == []


def test_a_planted_import_against_the_parts_fails_with_its_line(tmp_path):
    root = course_tree(
        tmp_path,
        {
            "course/grading/grade.py": "import json\n\n\ndef f():\n    import course.handout.build\n",
            "course/grading/judge.py": "from cs336_basics import model\n",
            "cs336_basics/model.py": "",
            "course/handout/build.py": "",
            "course/cases/fixtures.py": "from course.mutation import run\n",
            "course/mutation/run.py": "",
            "course/paths.py": "from course.grading import grade\n",
        },
    )
    problems = part_violations(import_graph(root), root)
    assert problems == [
        "course/cases/fixtures.py:1: cases module course.cases.fixtures imports course.mutation "
        "(cases may import: shared, cases, grading)",
        "course/cases/fixtures.py:1: cases module course.cases.fixtures imports course.mutation.run "
        "(cases may import: shared, cases, grading)",
        "course/grading/grade.py:5: grading module course.grading.grade imports course.handout.build "
        "(grading may import: shared, grading)",
        "course/grading/judge.py:1: grading module course.grading.judge imports cs336_basics "
        "(grading may import: shared, grading)",
        "course/grading/judge.py:1: grading module course.grading.judge imports cs336_basics.model "
        "(grading may import: shared, grading)",
        "course/paths.py:1: shared module course.paths imports course.grading "
        "(shared may import: shared)",
        "course/paths.py:1: shared module course.paths imports course.grading.grade "
        "(shared may import: shared)",
    ]


@pytest.mark.slow  # a Python subprocess per module: run by `make test-all` and CI, not by plain `pytest`
def test_a_module_that_needs_another_imported_first_fails_alone(tmp_path):
    write_tree(
        tmp_path,
        {
            "cs336_basics/fine.py": "import math\n",
            "cs336_basics/broken.py": "import sys\nsys.modules['cs336_basics.fine'].value\n",
        },
    )
    failures = modules_failing_alone(["cs336_basics.fine", "cs336_basics.broken"], tmp_path)
    assert len(failures) == 1 and failures[0].startswith("cs336_basics.broken: KeyError")


@pytest.mark.slow
def test_every_module_of_the_package_imports_alone():
    modules = sorted(m for m in import_graph() if m.split(".")[0] == "cs336_basics")
    assert len(modules) > 60
    assert modules_failing_alone(modules) == []
