"""The handout builder: region stripping, what ships, stamps, and a byte-identical zip.

The full proof (handout imports, every test fails with NotImplementedError, the reference
passes) is ``make verify-handout``; it runs whole test suites, so it lives in CI, not here.
"""

from __future__ import annotations

import ast
import zipfile
from pathlib import Path

import pytest

from course.handout import (
    BEGIN_MARKER,
    END_MARKER,
    REPO_ROOT,
    STUB,
    MarkerError,
    build,
    check_stub_syntax,
    shipped_files,
    strip_solutions,
)
from course.verify_handout import handout_test_problems, static_problems

BEGIN, END = BEGIN_MARKER, END_MARKER


def test_region_becomes_raise_at_its_indentation() -> None:
    source = (
        "def area(r: float) -> float:\n"
        '    """Area of a circle."""\n'
        f"    {BEGIN}\n"
        "    import math\n"
        "    return math.pi * r * r\n"
        f"    {END}\n"
        "\n"
        "class Box:\n"
        "    def size(self) -> int:\n"
        "        check(self)\n"
        f"        {BEGIN}\n"
        "        return 3\n"
        f"        {END}\n"
    )
    stubbed, regions = strip_solutions(source)
    assert regions == 2
    assert stubbed == (
        "def area(r: float) -> float:\n"
        '    """Area of a circle."""\n'
        f"    {STUB}\n"
        "\n"
        "class Box:\n"
        "    def size(self) -> int:\n"
        "        check(self)\n"
        f"        {STUB}\n"
    )
    ast.parse(stubbed)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (f"def f():\n    {BEGIN}\n    {BEGIN}\n    {END}\n", "nested"),
        (f"def f():\n    return 1\n    {END}\n", "without a matching"),
        (f"def f():\n    {BEGIN}\n    return 1\n", "never closed"),
        (f"def f():\n    {BEGIN}\n    return 1\n  {END}\n", "indented differently"),
    ],
    ids=["nested", "unmatched-end", "unclosed", "misindented"],
)
def test_malformed_regions_name_file_and_line(source: str, message: str) -> None:
    with pytest.raises(MarkerError, match=f"mod.py:\\d+: .*{message}"):
        strip_solutions(source, "mod.py")


def test_region_that_is_not_whole_statements_is_rejected() -> None:
    source = f"def f():\n    return {{\n        'a': 1,\n        {BEGIN}\n        'b': 2,\n        {END}\n    }}\n"
    stubbed, _ = strip_solutions(source, "mod.py")
    with pytest.raises(MarkerError, match="mod.py:.*whole statements"):
        check_stub_syntax(stubbed, "mod.py")


@pytest.fixture
def fake_repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    files = {
        "pyproject.toml": '[project]\nname = "x"\nversion = "1.2.3"\n\n[project.scripts]\n'
        'cs336 = "cs336_basics.cli:main"\ncs336-grade = "course.grade:main"\n\n'
        '[tool.hatch.build.targets.wheel]\npackages = ["cs336_basics", "course"]\n',
        "README.md": "instructor readme",
        "Makefile": "grade:\n\tsecret\n",
        "cs336_basics/__init__.py": "",
        "cs336_basics/layer.py": f'def double(x: int) -> int:\n    """Twice x."""\n    {BEGIN}\n'
        f"    return 2 * x\n    {END}\n",
        "tests/__init__.py": "",
        "tests/adapters.py": f"from cs336_basics.layer import double\n\ndef run_double(x):\n    {BEGIN}\n"
        f"    return double(x)\n    {END}\n",
        "tests/test_layer.py": "from tests.adapters import run_double\n\ndef test_double():\n"
        "    assert run_double(2) == 4\n",
        "tests/test_tooling.py": "from course.handout import build\n",
        "tests/test_given_code.py": "import pytest\n\npytestmark = pytest.mark.instructor\n",
        "tests/conftest.py": "def lazy():\n    from course.fixtures import write\n",
        "fixtures/data.txt": "frozen",
        "course/CHANGELOG.md": "# Changelog\n\n## 1.2.3\n\n- Fixed the RoPE docstring.\n",
        "course/secret.py": "ANSWER = 42\n",
        "benchmarks/bench.py": "",
        ".ci/run": "",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / "cs336_basics" / "__pycache__").mkdir()
    (root / "cs336_basics" / "__pycache__" / "layer.pyc").write_bytes(b"\0")
    return root


def test_build_strips_leaves_out_instructor_files_and_stamps(
    fake_repo: Path, tmp_path: Path
) -> None:
    handout = build(tmp_path / "dist", root=fake_repo)
    shipped = sorted(
        p.relative_to(handout.directory).as_posix()
        for p in handout.directory.rglob("*")
        if p.is_file()
    )
    assert shipped == [
        "HANDOUT_VERSION",
        "Makefile",
        "README.md",
        "cs336_basics/__init__.py",
        "cs336_basics/layer.py",
        "fixtures/MANIFEST.sha256",
        "fixtures/data.txt",
        "make_submission.py",
        "pyproject.toml",
        "tests/__init__.py",
        "tests/adapters.py",
        "tests/conftest.py",
        "tests/test_layer.py",
    ]
    manifest = (handout.directory / "fixtures" / "MANIFEST.sha256").read_text()
    assert [line.split("  ")[1] for line in manifest.splitlines()] == [
        "fixtures/data.txt",
        "tests/__init__.py",
        "tests/conftest.py",
        "tests/test_layer.py",
    ]
    assert handout.regions == 2
    layer = (handout.directory / "cs336_basics" / "layer.py").read_text()
    assert layer == f'def double(x: int) -> int:\n    """Twice x."""\n    {STUB}\n'
    assert STUB in (handout.directory / "tests" / "adapters.py").read_text()
    pyproject = (handout.directory / "pyproject.toml").read_text()
    assert "cs336-grade" not in pyproject and 'packages = ["cs336_basics"]' in pyproject
    assert (handout.directory / "HANDOUT_VERSION").read_text().startswith("1.2.3 ")
    readme = (handout.directory / "README.md").read_text()
    assert (
        "1.2.3" in readme and "Fixed the RoPE docstring." in readme and "make submission" in readme
    )
    assert "submission:" in (handout.directory / "Makefile").read_text()
    assert static_problems(handout.directory) == []
    with zipfile.ZipFile(handout.zip_path) as archive:
        assert sorted(archive.namelist()) == [f"cs336-basics/{name}" for name in shipped]


def test_zip_is_byte_identical_across_builds(fake_repo: Path, tmp_path: Path) -> None:
    first = build(tmp_path / "a", root=fake_repo).zip_path.read_bytes()
    second = build(tmp_path / "b", root=fake_repo).zip_path.read_bytes()
    assert first == second


def test_static_check_catches_leftover_markers_and_course_imports(tmp_path: Path) -> None:
    (tmp_path / "course").mkdir()
    (tmp_path / "leak.py").write_text(f"def f():\n    {BEGIN}\n    return 1\n")
    (tmp_path / "tool.py").write_text("import course.grade\n")
    problems = static_problems(tmp_path)
    assert any("instructor-only path shipped: course" in p for p in problems)
    assert any("leak.py: a solution marker survived" in p for p in problems)
    assert any("tool.py: imports course/" in p for p in problems)


def test_verifier_accepts_only_not_implemented_failures() -> None:
    outcomes = {
        "tests/test_a.py::test_ok": {
            "outcome": "failed",
            "exceptions": ["NotImplementedError"],
            "message": "",
        },
        "tests/test_a.py::test_wrapped": {
            "outcome": "error",
            "exceptions": ["RuntimeError", "NotImplementedError"],
            "message": "",
        },
        "tests/test_a.py::test_free": {"outcome": "passed", "exceptions": [], "message": ""},
        "tests/test_a.py::test_typo": {
            "outcome": "failed",
            "exceptions": ["NameError"],
            "message": "E NameError: x",
        },
        "tests/test_b.py": {
            "outcome": "collect_error",
            "exceptions": [],
            "message": "E ImportError: nope",
        },
    }
    problems = handout_test_problems(outcomes)
    assert len(problems) == 3
    assert any("test_free: passes without any student code" in p for p in problems)
    assert any("test_typo: fails with NameError" in p for p in problems)
    assert any("test_b.py: collection error" in p for p in problems)


def test_real_repository_ships_no_instructor_code() -> None:
    shipped = shipped_files(REPO_ROOT)
    assert shipped, "nothing would ship"
    assert not [p for p in shipped if p.parts[0] in ("course", "benchmarks", ".ci")]
    assert Path("tests/test_handout.py") not in shipped and Path("tests/adapters.py") in shipped
