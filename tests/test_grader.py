"""The grader against hostile submissions, on a tiny fake course (no torch, so it stays fast).

Each rubric component of the fake course runs one adapter; the hostile submission makes every
component misbehave in a different way (hang, memory hog, socket, segfault, syntax error, edits
to the tests and fixtures, writes outside the workspace) while one component stays honest. The
grader must score the honest one fully, the rest zero with a message, always write
results.json, and leave everything outside its workspace alone.
"""

from __future__ import annotations

import json
import random
import socket
import stat
import textwrap
import zipfile
from pathlib import Path

import pytest

from course.grade import (
    Limits,
    UnsafeArchive,
    grade,
    load_rubric,
    namespaces_available,
    safe_extract,
)

LIMITS = Limits(
    timeout_s=4,
    cpu_s=20,
    memory_gib=1,
    file_size_mib=8,
    max_files=50,
    max_bytes=1 << 20,
    max_ratio=50,
)

RUBRIC = """
[[component]]
name = "honest"
points = 2
select = "honest"
""" + "".join(
    f'\n[[component]]\nname = "{name}"\npoints = 1\nselect = "{name}"\n'
    for name in ("hang", "hog", "network", "segfault", "syntax", "tamper")
)

HONEST = "def honest(x):\n    return x * x\n"
ADAPTERS = """
import importlib

def call(name, *args):
    return getattr(importlib.import_module(f"cs336_basics.{name}"), name)(*args)
"""
COURSE_TESTS = {
    "test_honest.py": "from tests.adapters import call\n\ndef test_honest_square():\n    assert call('honest', 3) == 9\n\n"
    "def test_honest_fixture():\n    from pathlib import Path\n"
    "    assert Path('fixtures/data.txt').read_text() == 'pristine'\n",
    **{
        f"test_{name}.py": f"from tests.adapters import call\n\ndef test_{name}():\n    assert call('{name}') == 'ok'\n"
        for name in ("hang", "hog", "network", "segfault", "syntax", "tamper")
    },
}


@pytest.fixture(scope="module")
def course(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fake instructor checkout: pristine tests, fixtures, pytest config and rubric."""
    root = tmp_path_factory.mktemp("course")
    (root / "tests").mkdir()
    (root / "tests" / "__init__.py").write_text("")
    (root / "tests" / "adapters.py").write_text(
        "def call(name, *args):\n    raise NotImplementedError\n"
    )
    for name, text in COURSE_TESTS.items():
        (root / "tests" / name).write_text(text)
    (root / "fixtures").mkdir()
    (root / "fixtures" / "data.txt").write_text("pristine")
    (root / "pyproject.toml").write_text('[tool.pytest.ini_options]\ntestpaths = ["tests"]\n')
    (root / "rubric.toml").write_text(RUBRIC)
    return root


def make_zip(path: Path, files: dict[str, str | bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return path


def submission(modules: dict[str, str]) -> dict[str, str]:
    files = {"cs336_basics/__init__.py": "", "tests/adapters.py": ADAPTERS}
    files.update(
        {f"cs336_basics/{name}.py": textwrap.dedent(code) for name, code in modules.items()}
    )
    return files


def scores(report: dict) -> dict[str, float]:
    return {test["name"]: test["score"] for test in report["tests"]}


def outputs(report: dict) -> dict[str, str]:
    return {test["name"]: test["output"] for test in report["tests"]}


def test_hostile_components_are_contained(course: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("untouched")
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setblocking(False)
    port = listener.getsockname()[1]
    hostile = submission(
        {
            "honest": HONEST,
            "hang": "def hang():\n    while True:\n        pass\n",
            "hog": "def hog():\n    table = bytearray(4 << 30)  # 4 GiB, over the 1 GiB limit\n    return 'ok'\n",
            "network": f"""
            import socket
            def network():
                socket.create_connection(("127.0.0.1", {port}), timeout=2).sendall(b"leak")
                return "ok"
            """,
            "segfault": "import ctypes\n\ndef segfault():\n    return ctypes.string_at(0)\n",
            "syntax": "def syntax(:\n    return 'ok'\n",
            "tamper": f"""
            from pathlib import Path
            def tamper():
                Path("tests/test_tamper.py").write_text("def test_tamper():\\n    pass\\n")
                Path("fixtures/data.txt").write_text("forged")
                try:
                    Path({str(outside)!r}).write_text("escaped")
                except OSError:
                    pass
                return "ok"
            """,
        }
    )
    zip_path = make_zip(tmp_path / "hostile.zip", hostile)
    try:
        report = grade(
            zip_path,
            tmp_path / "out",
            rubric=course / "rubric.toml",
            instructor_root=course,
            jobs=2,
            limits=LIMITS,
            quiet=True,
            plugin_autoload=False,
        )
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody ever connected
    finally:
        listener.close()
    written = json.loads((tmp_path / "out" / "results.json").read_text())
    assert written == report
    assert scores(report) == {
        "honest": 2.0,
        "hang": 0.0,
        "hog": 0.0,
        "network": 0.0,
        "segfault": 0.0,
        "syntax": 0.0,
        "tamper": 0.0,
    }
    assert report["score"] == 2.0
    text = outputs(report)
    assert "time limit" in text["hang"]
    assert "MemoryError" in text["hog"]
    assert "SIGSEGV" in text["segfault"]
    assert "SyntaxError" in text["syntax"]
    assert "changed the grader's tests or fixtures" in text["tamper"]
    assert all(set(t) >= {"name", "score", "max_score", "output"} for t in report["tests"])
    if namespaces_available():  # without namespaces only the in-workspace damage is detectable
        assert outside.read_text() == "untouched"
    # The instructor's copies are pristine.
    assert (course / "fixtures" / "data.txt").read_text() == "pristine"
    assert (course / "tests" / "test_tamper.py").read_text() == COURSE_TESTS["test_tamper.py"]


def test_network_is_blocked_without_namespaces(course: Path, tmp_path: Path) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setblocking(False)
    code = f"""
        import socket
        def network():
            socket.create_connection(("127.0.0.1", {listener.getsockname()[1]}), timeout=2)
            return "ok"
        """
    zip_path = make_zip(tmp_path / "net.zip", submission({"honest": HONEST, "network": code}))
    rubric = tmp_path / "rubric.toml"
    rubric.write_text('[[component]]\nname = "network"\npoints = 1\nselect = "network"\n')
    try:
        report = grade(
            zip_path,
            tmp_path / "out",
            rubric=rubric,
            instructor_root=course,
            jobs=1,
            sandbox=False,
            limits=LIMITS,
            quiet=True,
            plugin_autoload=False,
        )
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()
    assert report["score"] == 0.0
    assert "network access is disabled" in report["tests"][0]["output"]


def link_entry(name: str, target: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


@pytest.mark.parametrize(
    ("entries", "reason"),
    [
        ({"../escape.py": "x = 1"}, ".."),
        ({"cs336_basics/../../escape.py": "x = 1"}, ".."),
        ({"/tmp/cs336-absolute.py": "x = 1"}, "absolute"),
        ({"cs336_basics\\..\\escape.py": "x = 1"}, "Windows"),
        ({"bomb.txt": b"\0" * (4 << 20)}, "zip bomb"),
        ({f"cs336_basics/m{i}.py": "" for i in range(60)}, "entries"),
        ({"big.txt": random.Random(0).randbytes(1 << 20)}, "bytes unpacked"),
    ],
    ids=[
        "dotdot",
        "nested-dotdot",
        "absolute",
        "backslash",
        "bomb",
        "too-many-files",
        "too-many-bytes",
    ],
)
def test_unsafe_archives_are_refused(
    course: Path, tmp_path: Path, entries: dict[str, str | bytes], reason: str
) -> None:
    files = {**submission({"honest": HONEST}), **entries}
    zip_path = make_zip(tmp_path / "bad.zip", files)
    with pytest.raises(UnsafeArchive, match=reason):
        safe_extract(zip_path, tmp_path / "unpacked", LIMITS)
    assert not (tmp_path / "escape.py").exists() and not Path("/tmp/cs336-absolute.py").exists()
    report = grade(
        zip_path,
        tmp_path / "out",
        rubric=course / "rubric.toml",
        instructor_root=course,
        limits=LIMITS,
        quiet=True,
        plugin_autoload=False,
    )
    assert report["score"] == 0.0
    assert all("Submission refused" in test["output"] for test in report["tests"])
    assert len(report["tests"]) == len(load_rubric(course / "rubric.toml")[0])


def test_links_are_refused(tmp_path: Path) -> None:
    zip_path = tmp_path / "link.zip"
    with zipfile.ZipFile(zip_path, "w") as archive:
        archive.writestr("cs336_basics/__init__.py", "")
        archive.writestr(link_entry("cs336_basics/secret.py", "/etc/passwd"), "/etc/passwd")
    with pytest.raises(UnsafeArchive, match="symbolic link"):
        safe_extract(zip_path, tmp_path / "unpacked", LIMITS)


def test_not_a_zip_and_missing_package_still_write_results(course: Path, tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.zip"
    garbage.write_bytes(b"this is not a zip")
    empty = make_zip(tmp_path / "empty.zip", {"notes.txt": "hello"})
    for zip_path, message in ((garbage, "not a readable zip"), (empty, "no cs336_basics/")):
        out = tmp_path / zip_path.stem
        grade(
            zip_path,
            out,
            rubric=course / "rubric.toml",
            instructor_root=course,
            limits=LIMITS,
            quiet=True,
            plugin_autoload=False,
        )
        report = json.loads((out / "results.json").read_text())
        assert report["score"] == 0.0 and message in report["tests"][0]["output"]


def test_batch_mode_writes_a_csv(course: Path, tmp_path: Path) -> None:
    from course.grade import grade_batch

    folder = tmp_path / "zips"
    folder.mkdir()
    make_zip(folder / "alice.zip", submission({"honest": HONEST}))
    make_zip(folder / "bob.zip", {"notes.txt": "no code"})
    rubric = tmp_path / "rubric.toml"
    rubric.write_text('[[component]]\nname = "honest"\npoints = 2\nselect = "honest"\n')
    csv_path = grade_batch(
        folder,
        tmp_path / "grades",
        jobs=2,
        rubric=rubric,
        instructor_root=course,
        limits=LIMITS,
        plugin_autoload=False,
    )
    rows = csv_path.read_text().splitlines()
    assert rows == ["submission,total,honest", "alice.zip,2.0,2.0", "bob.zip,0.0,0.0"]
