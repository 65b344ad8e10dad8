"""The handout builder and its verifier on a small fake repository.

Region stripping, the manifest (graded skeletons, support shipped complete, the rest left out),
the extension handout, stamps, a byte-identical zip, and each check of the verifier catching
the problem it is for. The full proof on this repository (the handout's tests all fail with
NotImplementedError, the reference passes them) is ``make verify-handout``; it runs whole test
suites, so it lives in CI, not here.
"""

from __future__ import annotations

import ast
import re
import tomllib
import zipfile
from pathlib import Path

import pytest

from course.handout.build import (
    BEGIN_MARKER,
    END_MARKER,
    REPO_ROOT,
    STUB,
    ManifestError,
    MarkerError,
    build,
    check_stub_syntax,
    is_instructor_test,
    plan,
    shipped_files,
    strip_solutions,
)
from course.handout.verify import (
    graded_code_problems,
    handout_test_problems,
    skeleton_problems,
    static_problems,
    verify,
)
from course.project import grader_python

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


def test_fill_keeps_the_solution_and_drops_the_markers() -> None:
    source = f"def f():\n    {BEGIN}\n    return 1\n    {END}\n"
    assert strip_solutions(source, fill=True) == ("def f():\n    return 1\n", 1)


MANIFEST = """
[base]
graded = ["cs336_basics/layer.py"]
support = ["cs336_basics/__init__.py", "cs336_basics/cli.py"]

[extension]
graded = ["cs336_basics/variants/*.py"]
support = []
tests = ["tests/variants/**"]
"""

LAYER = '''"""A layer."""

import math


def double(x: int) -> int:
    """Twice x."""
    return _twice(x)


def _twice(x: int) -> int:
    return 2 * math.floor(x + 0.5)
'''


@pytest.fixture
def fake_repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    files = {
        "pyproject.toml": '[project]\nname = "x"\nversion = "1.2.3"\nrequires-python = ">=3.12"\n'
        "\n[project.scripts]\n"
        'cs336 = "cs336_basics.cli:main"\ncs336-grade = "course.grading.grade:main"\n\n'
        '[tool.hatch.build.targets.wheel]\npackages = ["cs336_basics", "course"]\n',
        "README.md": "instructor readme",
        "Makefile": "grade:\n\tsecret\n",
        "uv.lock": "lock",
        "cs336_basics/__init__.py": "",
        "cs336_basics/layer.py": LAYER,
        "cs336_basics/cli.py": "from cs336_basics.layer import double\n\n\ndef main():\n    print(double(2))\n",
        "cs336_basics/unlisted.py": "SECRET = 1\n",
        "cs336_basics/variants/__init__.py": "",
        "cs336_basics/variants/triple.py": "from cs336_basics.layer import double\n\n\n"
        "def triple(x: int) -> int:\n    return double(x) + x\n",
        "tests/__init__.py": "",
        "tests/adapters.py": f"from cs336_basics.layer import double\n\ndef run_double(x):\n    {BEGIN}\n"
        f"    return double(x)\n    {END}\n",
        "tests/test_layer.py": "from tests.adapters import run_double\n\ndef test_double():\n"
        "    assert run_double(2) == 4\n",
        "tests/conftest.py": "def lazy():\n    try:\n        from course.cases.fixtures import write\n"
        "    except ImportError:\n        pass\n",
        "tests/variants/__init__.py": "",
        "tests/variants/adapters.py": f"from cs336_basics.variants.triple import triple\n\n"
        f"def run_triple(x):\n    {BEGIN}\n    return triple(x)\n    {END}\n",
        "tests/variants/test_triple.py": "from tests.variants.adapters import run_triple\n\n"
        "def test_triple():\n    assert run_triple(2) == 6\n",
        "fixtures/data.txt": "frozen",
        "course/handout/manifest.toml": MANIFEST,
        "course/handout/CHANGELOG.md": "# Changelog\n\n## 1.2.3\n\n- Fixed the RoPE docstring.\n",
        "course/secret.py": "ANSWER = 42\n",
        "course/tests/test_course.py": "",
        "reference_tests/__init__.py": "",
        "reference_tests/test_runner.py": "from cs336_basics.cli import main\n",
        "benchmarks/bench.py": "",
        ".ci/run": "",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / "cs336_basics" / "__pycache__").mkdir()
    (root / "cs336_basics" / "__pycache__" / "layer.pyc").write_bytes(b"\0")
    return root


def shipped_names(directory: Path) -> list[str]:
    return sorted(p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file())


def test_build_follows_the_manifest_and_stamps(fake_repo: Path, tmp_path: Path) -> None:
    handout = build(tmp_path / "dist", root=fake_repo)
    shipped = shipped_names(handout.directory)
    assert shipped == [
        ".python-version",
        "HANDOUT_VERSION",
        "Makefile",
        "README.md",
        "cs336_basics/__init__.py",
        "cs336_basics/cli.py",
        "cs336_basics/layer.py",
        "fixtures/MANIFEST.sha256",
        "fixtures/data.txt",
        "make_submission.py",
        "pyproject.toml",
        "tests/__init__.py",
        "tests/adapters.py",
        "tests/conftest.py",
        "tests/test_layer.py",
        "uv.lock",
    ]
    manifest = (handout.directory / "fixtures" / "MANIFEST.sha256").read_text()
    assert [line.split("  ")[1] for line in manifest.splitlines()] == [
        "fixtures/data.txt",
        "tests/__init__.py",
        "tests/conftest.py",
        "tests/test_layer.py",
    ]
    assert (handout.regions, handout.skeletons) == (1, 1)
    adapters = (handout.directory / "tests" / "adapters.py").read_text()
    assert adapters == f"from cs336_basics.layer import double\n\ndef run_double(x):\n    {STUB}\n"
    layer = (handout.directory / "cs336_basics" / "layer.py").read_text()
    assert (
        layer == f'"""A layer."""\n\n\ndef double(x: int) -> int:\n    """Twice x."""\n    {STUB}\n'
    )
    cli = (handout.directory / "cs336_basics" / "cli.py").read_text()
    assert cli == (fake_repo / "cs336_basics" / "cli.py").read_text()
    assert STUB in (handout.directory / "tests" / "adapters.py").read_text()
    pyproject = (handout.directory / "pyproject.toml").read_text()
    assert "cs336-grade" not in pyproject and 'packages = ["cs336_basics"]' in pyproject
    assert (handout.directory / "HANDOUT_VERSION").read_text().startswith("1.2.3 ")
    assert (handout.directory / ".python-version").read_text() == "3.12\n"
    readme = (handout.directory / "README.md").read_text()
    assert "1.2.3" in readme and "Fixed the RoPE docstring." in readme
    assert "make submission" in readme and "yours to write" in readme and "{" not in readme
    assert "submission:" in (handout.directory / "Makefile").read_text()
    assert static_problems(handout.directory) == []
    assert graded_code_problems(fake_repo, handout.directory, "base") == []
    with zipfile.ZipFile(handout.zip_path) as archive:
        assert sorted(archive.namelist()) == [f"cs336-basics/{name}" for name in shipped]


@pytest.mark.parametrize("spec", ["", ">=3.12,<3.14", "~=3.12", ">=3"])
def test_the_python_pin_needs_a_plain_floor(fake_repo: Path, tmp_path: Path, spec: str) -> None:
    pyproject = fake_repo / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('">=3.12"', repr(spec).replace("'", '"')))
    with pytest.raises(ValueError, match="requires-python is .*must read '>=3.N'"):
        build(tmp_path / "dist", root=fake_repo)


def test_the_handout_pins_upstreams_floor_or_newer() -> None:
    """Upstream's handout needs Python 3.12; code written for it must parse where we grade."""
    assert tuple(map(int, grader_python().split("."))) >= (3, 12)


def test_the_student_readme_names_the_versions_grading_runs() -> None:
    pyproject = (REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8")
    pins = re.findall(r'"torch==([\d.]+); sys_platform != .darwin. or', pyproject)
    readme = (REPO_ROOT / "course" / "handout" / "readme.md").read_text(encoding="utf-8")
    assert len(pins) == 1 and f"torch {pins[0]}" in readme
    assert f"Python {grader_python()} with this lock" in readme


def test_extension_handout_ships_the_core_complete_and_variants_as_skeletons(
    fake_repo: Path, tmp_path: Path
) -> None:
    handout = build(tmp_path / "dist", root=fake_repo, kind="extension")
    assert handout.directory.name == "handout-extensions"
    assert handout.zip_path.name == "cs336-basics-extensions-1.2.3.zip"
    shipped = shipped_names(handout.directory)
    for name in ("cs336_basics/variants/triple.py", "tests/variants/test_triple.py"):
        assert name in shipped
    assert "cs336_basics/unlisted.py" not in shipped
    layer = (handout.directory / "cs336_basics" / "layer.py").read_text()
    assert layer == LAYER
    adapters = (handout.directory / "tests" / "adapters.py").read_text()
    assert "return double(x)" in adapters and BEGIN not in adapters
    variant_adapters = (handout.directory / "tests" / "variants" / "adapters.py").read_text()
    assert STUB in variant_adapters and "return triple" not in variant_adapters
    triple = (handout.directory / "cs336_basics" / "variants" / "triple.py").read_text()
    assert "return" not in triple and STUB in triple
    assert "cs336_basics/variants" in (handout.directory / "README.md").read_text()
    assert graded_code_problems(fake_repo, handout.directory, "extension") == []


def test_manifest_mistakes_are_named(fake_repo: Path) -> None:
    manifest = fake_repo / "course" / "handout" / "manifest.toml"
    manifest.write_text(MANIFEST.replace("cs336_basics/cli.py", "cs336_basics/gone.py"))
    with pytest.raises(ManifestError, match="'cs336_basics/gone.py' matches no file"):
        plan(fake_repo)
    manifest.write_text(MANIFEST.replace('"cs336_basics/cli.py"', '"cs336_basics/layer.py"'))
    with pytest.raises(ManifestError, match="graded and as support"):
        plan(fake_repo)
    manifest.write_text(MANIFEST.replace("support = []", "supprt = []"))
    with pytest.raises(ManifestError, match=r"\[extension\] has unknown keys \['supprt'\]"):
        plan(fake_repo)


def test_zip_is_byte_identical_across_builds(fake_repo: Path, tmp_path: Path) -> None:
    first = build(tmp_path / "a", root=fake_repo).zip_path.read_bytes()
    second = build(tmp_path / "b", root=fake_repo).zip_path.read_bytes()
    assert first == second


def test_static_check_catches_markers_and_forbidden_imports(tmp_path: Path) -> None:
    (tmp_path / "course").mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / "leak.py").write_text(f"def f():\n    {BEGIN}\n    return 1\n")
    (tmp_path / "tool.py").write_text("import course.grading.grade\n")
    (tmp_path / "tests" / "test_direct.py").write_text(
        "def test_x():\n    from cs336_basics.model import TransformerLM\n"
    )
    (tmp_path / "tests" / "adapters.py").write_text("import cs336_basics.model\n")
    (tmp_path / "broken.py").write_text("def f(:\n")
    problems = static_problems(tmp_path)
    assert any("instructor-only path shipped: course" in p for p in problems)
    assert any("leak.py: a solution marker survived" in p for p in problems)
    assert any("tool.py:1: imports course" in p for p in problems)
    assert any("tests/test_direct.py:2: imports cs336_basics" in p for p in problems)
    assert not any(p.startswith("tests/adapters.py") for p in problems)
    assert any("broken.py:1: syntax error" in p for p in problems)


def test_skeleton_check_flags_any_body() -> None:
    source = (
        'def ok(x):\n    """Doc."""\n    raise NotImplementedError\n\n'
        "def ok_too(x):\n    raise NotImplementedError('write me')\n\n"
        "class A:\n    def leak(self):\n        return 1\n\n"
        "def sneaky(x):\n    y = x + 1\n    raise NotImplementedError\n\n"
        "square = lambda x: x * x\n"
    )
    problems = skeleton_problems(Path("m.py"), source)
    assert problems == [
        "m.py:9: leak ships a body, not a skeleton",
        "m.py:12: sneaky ships a body, not a skeleton",
        "m.py:16: a lambda ships in a graded module",
    ]


def test_support_code_that_implements_graded_math_is_caught(
    fake_repo: Path, tmp_path: Path
) -> None:
    (fake_repo / "cs336_basics" / "cli.py").write_text(
        "import math\n\n\ndef double(x):\n    return x\n\n\n"
        "def helper(value):\n    return 2 * math.floor(value + 0.5)\n"
    )
    handout = build(tmp_path / "dist", root=fake_repo)
    problems = graded_code_problems(fake_repo, handout.directory, "base")
    assert (
        problems[0] == "cs336_basics/cli.py: defines double, a graded name of cs336_basics/layer.py"
    )
    assert problems[1].startswith(
        "cs336_basics/cli.py:9: repeats graded code of cs336_basics/layer.py:12 (_twice)"
    )
    assert len(problems) == 2


def test_verifier_accepts_only_not_implemented_failures() -> None:
    outcomes = {
        "tests/test_a.py::test_ok": {
            "outcome": "failed",
            "exceptions": ["NotImplementedError"],
            "message": "",
        },
        "tests/test_a.py::test_regex": {
            "outcome": "failed",
            "exceptions": ["AssertionError", "NotImplementedError"],
            "message": "E AssertionError: Regex pattern did not match.",
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
    assert len(problems) == 4
    assert any(
        "test_regex: fails with AssertionError <- NotImplementedError" in p for p in problems
    )
    assert any("test_free: passes without any student code" in p for p in problems)
    assert any("test_typo: fails with NameError" in p for p in problems)
    assert any("test_b.py: collection error" in p for p in problems)


def test_location_alone_decides_which_tests_ship(fake_repo: Path) -> None:
    # What a file says does not matter: a test in tests/ that imports course still ships (the
    # verifier then fails the handout), one in reference_tests/ or course/tests/ never does.
    (fake_repo / "tests" / "test_imports_course.py").write_text(
        "from course.secret import ANSWER\n"
    )
    shipped = {p.as_posix() for p in shipped_files(fake_repo)}
    assert "tests/test_imports_course.py" in shipped
    assert not [p for p in shipped if p.startswith(("reference_tests/", "course/"))]
    extension = {p.as_posix() for p in shipped_files(fake_repo, kind="extension")}
    assert "tests/variants/test_triple.py" in extension - shipped
    assert is_instructor_test(Path("reference_tests/test_runner.py"))
    assert is_instructor_test(fake_repo / "course" / "tests" / "test_course.py")
    assert not is_instructor_test(fake_repo / "tests" / "test_imports_course.py")
    assert not is_instructor_test(Path("tests/variants/test_triple.py"))
    outside = fake_repo.parent / "elsewhere" / "tests" / "test_x.py"
    with pytest.raises(ValueError, match="not inside a repository"):
        is_instructor_test(outside)


def test_real_repository_ships_no_instructor_code() -> None:
    shipped = shipped_files(REPO_ROOT)
    assert shipped, "nothing would ship"
    assert not [
        p for p in shipped if p.parts[0] in ("course", "reference_tests", "benchmarks", ".ci")
    ]
    assert not [p for p in shipped if p.parts[:2] == ("tests", "variants")]
    assert not [p for p in shipped if p.parts[:2] == ("cs336_basics", "variants")]
    assert Path("tests/adapters.py") in shipped


@pytest.mark.slow  # pytest subprocesses on a handout: run by `make test-all` and CI, not by plain `pytest`
@pytest.mark.parametrize("kind", ["base", "extension"])
def test_verifier_passes_a_sound_handout_end_to_end(fake_repo: Path, kind: str) -> None:
    assert verify(fake_repo, kind=kind, check_reference=kind == "base") == []


@pytest.mark.slow  # pytest subprocesses on a handout: run by `make test-all` and CI, not by plain `pytest`
def test_verifier_names_the_tests_that_fail_for_the_wrong_reason(fake_repo: Path) -> None:
    (fake_repo / "tests" / "test_more.py").write_text(
        "import pytest\n\nfrom tests.adapters import run_double\n\n\n"
        "def test_free():\n    assert True\n\n\n"
        "def test_message():\n    with pytest.raises(Exception, match='negative'):\n"
        "        run_double(-1)\n"
    )
    problems = verify(fake_repo, check_reference=False)
    assert problems == [
        "tests/test_more.py::test_free: passes without any student code",
        "tests/test_more.py::test_message: fails with AssertionError <- NotImplementedError, "
        "not NotImplementedError: tests/test_more.py:11: AssertionError",
    ]


@pytest.mark.slow  # seconds of the whole tree or of subprocesses: `make test-all` and CI
def test_real_handout_graded_modules_are_skeletons_and_support_repeats_no_graded_math(
    tmp_path: Path,
) -> None:
    handout = build(tmp_path, root=REPO_ROOT)
    assert handout.skeletons > 0
    assert graded_code_problems(REPO_ROOT, handout.directory, "base") == []
    # The repository's suite runs in worker processes; a student's in one, in file order.
    repository = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    shipped = tomllib.loads((handout.directory / "pyproject.toml").read_text(encoding="utf-8"))
    assert "-n auto" in repository["tool"]["pytest"]["ini_options"]["addopts"]
    assert (
        shipped["tool"]["pytest"]["ini_options"]["addopts"] == "-ra --strict-markers -m 'not slow'"
    )
    assert "Worker processes" not in (handout.directory / "pyproject.toml").read_text()
