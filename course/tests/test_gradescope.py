"""The Gradescope autograder zip: what it holds, and that it grades on its own (no checkout)."""

from __future__ import annotations

import ast
import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from course.grading.grade import CASE_FILES, DIAGNOSIS_FILES
from course.grading.gradescope import build, bundle_files, harden, pack_folder
from course.grading.sandbox import SandboxUnavailable, isolation
from course.grading.unpack import UnsafeArchive, unpack_submission
from course.paths import REPO_ROOT
from course.project import grader_python

pytestmark = pytest.mark.slow  # subprocesses: run by `make test-all` and CI, not by plain `pytest`


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("gradescope") / "autograder.zip")


def test_bundle_holds_the_grader_but_not_the_solution(bundle: Path) -> None:
    with zipfile.ZipFile(bundle) as archive:
        infos = {info.filename: info for info in archive.infolist()}
        setup = archive.read("setup.sh").decode()
        run = archive.read("run_autograder").decode()
    for script in ("setup.sh", "run_autograder"):
        assert stat.S_IMODE(infos[script].external_attr >> 16) == 0o755
    assert not any(name.startswith("cs336_basics/") for name in infos)
    assert "tests/adapters.py" not in infos
    for needed in (
        "uv.lock",
        "course/grading/driver.py",
        "course/grading/judge.py",
        "course/grading/rubric.toml",
    ):
        assert needed in infos
    assert any(name.startswith("course/cases/hidden/expected/") for name in infos)
    assert any(name.startswith("tests/cases/") for name in infos)
    # The public run's diagnoses (grade.DIAGNOSIS_FILES) and what they read.
    assert {"tests/localize/__init__.py", "tests/measure.py", "fixtures/stages.npz"} <= set(infos)
    assert "apt-get install" in setup and "bubblewrap" in setup
    assert "uv sync --locked" in setup
    # The handout's Python minor (its .python-version), not whatever the image has.
    assert f'UV_PYTHON="${{CS336_GRADER_PYTHON:-{grader_python()}}}"' in setup
    assert (
        "course.grading.gradescope harden" in setup and "course.grading.gradescope check" in setup
    )
    assert "course/grading/confine.py" in infos  # container mode's seccomp and Landlock
    for part in ("course/handout/", "course/mutation/", "course/tests/", "cs336_basics/"):
        assert not any(name.startswith(part) for name in infos), part
    assert {"course/grading/__init__.py", "course/grading/policy.py"} <= set(infos)  # as a whole
    assert "/autograder/results/results.json" in run


def test_a_new_grading_file_and_a_new_shared_module_land_in_the_bundle(tmp_path: Path) -> None:
    root = tmp_path / "checkout"
    for rel in ("pyproject.toml", "uv.lock", "course/cases/hidden", *CASE_FILES, *DIAGNOSIS_FILES):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).symlink_to(REPO_ROOT / rel)
    ignored = shutil.ignore_patterns("__pycache__")
    shutil.copytree(REPO_ROOT / "course" / "grading", root / "course" / "grading", ignore=ignored)
    for rel in ("course/__init__.py", "course/paths.py"):
        shutil.copyfile(REPO_ROOT / rel, root / rel)
    (root / "course" / "grading" / "new_rule.py").write_text("RULE = 1\n")
    (root / "course" / "grading" / "sandbox" / "programs" / "new.sh").write_text("exit 0\n")
    (root / "course" / "shared_helper.py").write_text("HELP = 1\n")
    (root / "course" / "handout").mkdir()
    (root / "course" / "handout" / "build.py").write_text("BUILD = 1\n")
    files = {rel.as_posix() for rel in bundle_files(root)}
    for wanted in (
        "course/grading/new_rule.py",
        "course/grading/sandbox/programs/new.sh",
        "course/shared_helper.py",
        "course/paths.py",
    ):
        assert wanted in files
    assert "course/handout/build.py" not in files


def test_every_course_module_the_grader_imports_is_in_the_bundle(bundle: Path) -> None:
    """Read from the bundle's own files, imports inside functions included: a grading module
    that needs a module the bundle lacks would fail on Gradescope only."""
    with zipfile.ZipFile(bundle) as archive:
        names = set(archive.namelist())
        sources = {
            name: archive.read(name)
            for name in names
            if name.startswith("course/grading/") and name.endswith(".py")
        }
    imported = set()
    for name, source in sources.items():
        for node in ast.walk(ast.parse(source, name)):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module)
            elif isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names}
    ours = {module for module in imported if module.split(".")[0] in ("course", "tests")}
    assert {"course.paths", "course.grading.sandbox.job", "tests.cases.wire"} <= ours
    missing = [
        module
        for module in sorted(ours)
        if not {f"{module.replace('.', '/')}.py", f"{module.replace('.', '/')}/__init__.py"} & names
    ]
    assert not missing
    for program in ("launcher", "prepare", "probe"):
        assert f"course/grading/sandbox/programs/{program}.py" in names
    for program in ("setup.sh", "run_autograder", "docker_run.sh", "hostile_adapters.py"):
        assert f"course/grading/programs/{program}" in names


def test_harden_leaves_the_grader_files_and_blocked_packages_to_root(tmp_path: Path) -> None:
    source, site = tmp_path / "source", tmp_path / "site"
    (source / "course" / "hidden" / "expected").mkdir(parents=True)
    (source / "course" / "hidden" / "expected" / "x.json").write_text("{}")
    for name in ("tiktoken", "torch"):
        (site / name).mkdir(parents=True)
        (site / name / "__init__.py").write_text("")
    rubric = tmp_path / "rubric.toml"
    rubric.write_text(
        '[grading]\nblocked_packages = ["tiktoken"]\n[[component]]\nname = "silu"\npoints = 1\n'
    )
    for path in [*source.rglob("*"), *site.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    closed = harden(source, rubric, site)
    assert closed == [source, site / "tiktoken"]
    for path in [source, *source.rglob("*"), site / "tiktoken", *(site / "tiktoken").rglob("*")]:
        assert path.stat().st_mode & 0o077 == 0, path
    assert (site / "torch" / "__init__.py").stat().st_mode & 0o044 == 0o044


def test_folder_packing_keeps_links_and_fifos_for_the_unpacker_to_refuse(tmp_path: Path) -> None:
    folder = tmp_path / "submission"
    (folder / "cs336_basics").mkdir(parents=True)
    (folder / "cs336_basics" / "__init__.py").write_text("")
    (folder / "cs336_basics" / "secret.py").symlink_to("/etc/passwd")
    zip_path = pack_folder(folder, tmp_path / "packed.zip")
    with pytest.raises(UnsafeArchive, match="symbolic link"):
        unpack_submission(zip_path, tmp_path / "out1")
    (folder / "cs336_basics" / "secret.py").unlink()
    os.mkfifo(folder / "cs336_basics" / "pipe")
    zip_path = pack_folder(folder, tmp_path / "packed2.zip")
    with pytest.raises(UnsafeArchive, match="FIFO"):
        unpack_submission(zip_path, tmp_path / "out2")


def test_uploaded_zip_is_used_as_it_is(tmp_path: Path) -> None:
    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / "submission.zip").write_bytes(b"PK...")
    assert pack_folder(folder, tmp_path / "packed.zip") == folder / "submission.zip"


def test_bundle_grades_a_submission_folder_on_its_own(bundle: Path, tmp_path: Path) -> None:
    """Unpacked elsewhere (no checkout, no reference solution), the bundle's run command grades
    the reference's code, given as the folder Gradescope would hand it, to full marks."""
    try:
        isolation()
    except SandboxUnavailable as error:
        if os.environ.get("CS336_REQUIRE_SANDBOX") == "1":
            raise
        pytest.skip(f"no working bubblewrap sandbox here: {error}")
    source = tmp_path / "source"
    with zipfile.ZipFile(bundle) as archive:
        archive.extractall(source)
    (source / "course" / "grading" / "rubric.toml").write_text(
        '[[component]]\nname = "silu"\npoints = 3\n'
    )
    submission = tmp_path / "submission"
    shutil.copytree(REPO_ROOT / "cs336_basics", submission / "cs336_basics")
    (submission / "tests").mkdir()
    shutil.copyfile(REPO_ROOT / "tests" / "adapters.py", submission / "tests" / "adapters.py")
    results = tmp_path / "results"
    # Without the checkout on sys.path (the editable install puts it there), so a module
    # missing from the bundle cannot be borrowed from it.
    launcher = (
        "import runpy, sys\n"
        f"sys.path[:] = [p for p in sys.path if p.rstrip('/') != {str(REPO_ROOT)!r}]\n"
        "runpy.run_module('course.grading.gradescope', run_name='__main__')"
    )
    done = subprocess.run(
        [sys.executable, "-c", launcher, "run", str(submission), str(results)],
        cwd=source,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads((results / "results.json").read_text())
    assert report["score"] == 3.0, report
