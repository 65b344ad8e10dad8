"""The grader's pieces: strict unpacking, the sandbox's limits, results that are always written.

Attacks by whole hostile submissions are in ``test_grader_hostile.py``. Tests that need
bubblewrap skip without it, unless ``CS336_REQUIRE_SANDBOX=1`` (CI), where they fail.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest

from course.grading.attacks import runs
from course.grading.grade import (
    Budget,
    Phase,
    grade,
    grade_batch,
    hidden_groups,
    hidden_phases,
    write_json,
)
from course.grading.judge import NO_OUTPUTS, CaseResult
from course.grading.sandbox import (
    CONTAINER,
    NAMESPACES,
    SANDBOX_UID_BASE,
    SHARED_PLACES,
    Isolation,
    Job,
    Runtime,
    SandboxLimits,
    SandboxResult,
    SandboxUnavailable,
    Slots,
    isolation,
    probe,
    run_sandboxed,
    unpack_outputs,
)
from course.grading.unpack import ArchiveLimits, UnsafeArchive, unpack_submission
from course.paths import REPO_ROOT

pytestmark = pytest.mark.slow  # subprocesses: run by `make test-all` and CI, not by plain `pytest`

GOOD = {"cs336_basics/__init__.py": "", "cs336_basics/model.py": "X = 1\n", "tests/adapters.py": ""}
RUBRIC = '[[component]]\nname = "softmax"\npoints = 1\n\n[[component]]\nname = "silu"\npoints = 2\n'


def needs_sandbox(mode: str | None = None) -> None:
    insisted = os.environ.get("CS336_ISOLATION", "")
    if mode and insisted and insisted != mode:
        pytest.skip(f"this run tests the {insisted} level (CS336_ISOLATION)")
    try:
        probe(mode) if mode else isolation()
    except SandboxUnavailable as error:
        if os.environ.get("CS336_REQUIRE_SANDBOX") == "1":
            raise
        pytest.skip(f"no working bubblewrap sandbox here: {error}")


def make_zip(path: Path, files: dict[str, str | bytes], method: int = zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(path, "w", method) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return path


def special(name: str, mode: int) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.external_attr = mode << 16
    return info


def bad_crc(path: Path) -> Path:
    make_zip(path, {**GOOD, "cs336_basics/model.py": "Y = 2\n" * 50}, zipfile.ZIP_STORED)
    data = bytearray(path.read_bytes())
    offset = data.index(b"Y = 2")
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))
    return path


def with_members(path: Path, members: list[tuple[zipfile.ZipInfo | str, bytes | str]]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in GOOD.items():
            archive.writestr(name, data)
        for info, data in members:
            archive.writestr(info, data)
    return path


def duplicate(path: Path) -> Path:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate name: that is the point
        return with_members(path, [("cs336_basics/model.py", "X = 2\n")])


def encrypted(path: Path) -> Path:
    """A zip whose member says it is encrypted (flag bit 0 in both of its headers)."""
    make_zip(path, GOOD)
    data = bytearray(path.read_bytes())
    for signature, flag_offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        start = 0
        while (start := data.find(signature, start)) != -1:
            data[start + flag_offset] |= 0x01
            start += 4
    path.write_bytes(bytes(data))
    return path


MALFORMED = {
    "bad-crc": (bad_crc, "Bad CRC"),
    "file-and-folder": (
        lambda p: with_members(p, [("cs336_basics/model.py/inner.py", "")]),
        "both a file and a folder",
    ),
    "300-char-name": (
        lambda p: with_members(p, [("cs336_basics/" + "a" * 300 + ".py", "")]),
        "303 bytes",
    ),
    "unsupported-compression": (
        lambda p: make_zip(p, GOOD, zipfile.ZIP_BZIP2),
        "compression method 12",
    ),
    "3000-deep": (
        lambda p: with_members(p, [("cs336_basics/" + "d/" * 3000 + "x.py", "")]),
        "deep",
    ),
    "symlink": (
        lambda p: with_members(
            p, [(special("cs336_basics/link.py", stat.S_IFLNK | 0o777), "/etc")]
        ),
        "symbolic link",
    ),
    "fifo": (
        lambda p: with_members(p, [(special("cs336_basics/pipe", stat.S_IFIFO | 0o644), "")]),
        "FIFO",
    ),
    "device": (
        lambda p: with_members(p, [(special("cs336_basics/dev", stat.S_IFCHR | 0o644), "")]),
        "device",
    ),
    "duplicate": (duplicate, "same name"),
    "case-collision": (lambda p: with_members(p, [("cs336_basics/Model.py", "")]), "same name"),
    "unicode-collision": (
        lambda p: with_members(
            p, [("cs336_basics/caf\u00e9.py", ""), ("cs336_basics/cafe\u0301.py", "")]
        ),
        "same name",
    ),
    "dotdot": (lambda p: with_members(p, [("cs336_basics/../../escape.py", "")]), ".."),
    "absolute": (lambda p: with_members(p, [("/tmp/cs336-absolute.py", "")]), "absolute"),
    "backslash": (lambda p: with_members(p, [("cs336_basics\\..\\x.py", "")]), "Windows"),
    "control-char": (lambda p: with_members(p, [("cs336_basics/a\nb.py", "")]), "control"),
    "encrypted": (encrypted, "encrypted"),
    "bomb": (lambda p: with_members(p, [("cs336_basics/bomb.txt", b"\0" * (8 << 20))]), "bomb"),
    "too-many-members": (
        lambda p: with_members(p, [(f"cs336_basics/m{i}.py", "") for i in range(600)]),
        "entries",
    ),
    "too-many-bytes": (
        lambda p: with_members(p, [("cs336_basics/big.bin", os.urandom(21 << 20))]),
        "bytes unpacked",
    ),
    "not-a-zip": (lambda p: p.write_bytes(b"PK\x03\x04 garbage") and p, "damaged or unreadable"),
    "truncated": (lambda p: p.write_bytes(make_zip(p, GOOD).read_bytes()[:-30]) and p, "damaged"),
    "no-package": (lambda p: make_zip(p, {"notes.txt": "hi"}), "no cs336_basics/"),
    "no-python": (lambda p: make_zip(p, {"cs336_basics/data.txt": "hi"}), "no Python files"),
}


@pytest.mark.parametrize("kind", list(MALFORMED), ids=list(MALFORMED))
def test_malformed_zips_are_refused_with_a_result(kind: str, tmp_path: Path) -> None:
    build, reason = MALFORMED[kind]
    zip_path = tmp_path / "bad.zip"
    build(zip_path)
    with pytest.raises(UnsafeArchive, match=reason.replace("\\", "\\\\").replace(".", r"\.")):
        unpack_submission(zip_path, tmp_path / "unpacked")
    assert not Path("/tmp/cs336-absolute.py").exists() and not (tmp_path / "escape.py").exists()
    rubric = tmp_path / "rubric.toml"
    rubric.write_text(RUBRIC)
    # Refused before anything runs, so no sandbox is needed to check the result.
    report = grade(zip_path, tmp_path / "out", rubric=rubric, sandbox=False, quiet=True)
    assert json.loads((tmp_path / "out" / "results.json").read_text()) == report
    assert report["score"] == 0.0
    assert [t["name"] for t in report["tests"]] == ["softmax", "silu"]
    assert all("Submission refused" in t["output"] for t in report["tests"])


def test_unpacking_keeps_only_the_code_with_plain_modes(tmp_path: Path) -> None:
    zip_path = tmp_path / "sub.zip"
    with zipfile.ZipFile(zip_path, "w") as archive:
        for name, data in {
            **GOOD,
            "notes.txt": "x",
            "tests/conftest.py": "x",
            "conftest.py": "x",
        }.items():
            archive.writestr(f"project/{name}", data)
        archive.writestr(special("project/cs336_basics/run.py", stat.S_IFREG | 0o4777), "")
    written = unpack_submission(zip_path, tmp_path / "out")
    assert written == [
        "cs336_basics/__init__.py",
        "cs336_basics/model.py",
        "cs336_basics/run.py",
        "tests/adapters.py",
    ]
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "out").rglob("*")}
    assert modes["run.py"] == 0o644 and modes["cs336_basics"] == 0o755
    assert not (tmp_path / "out" / "conftest.py").exists()


def test_unpacking_counts_real_bytes(tmp_path: Path) -> None:
    zip_path = make_zip(tmp_path / "sub.zip", {**GOOD, "cs336_basics/data.txt": "x" * 5000})
    with pytest.raises(UnsafeArchive, match="bytes"):
        unpack_submission(zip_path, tmp_path / "out", ArchiveLimits(max_bytes=4000))


def test_outputs_stream_keeps_only_plain_files(tmp_path: Path) -> None:
    import io
    import tarfile

    stream = io.BytesIO()
    with tarfile.open(fileobj=stream, mode="w") as tar:
        for name, kind in (
            ("out/ok.json", tarfile.REGTYPE),
            ("out/link", tarfile.SYMTYPE),
            ("out/fifo", tarfile.FIFOTYPE),
            ("out/../escape", tarfile.REGTYPE),
            ("out/sub/deep.json", tarfile.REGTYPE),
            ("out/big.json", tarfile.REGTYPE),
        ):
            info = tarfile.TarInfo(name)
            info.type = kind
            data = b"x" * (2000 if "big" in name else 2)
            info.size = len(data) if kind == tarfile.REGTYPE else 0
            tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)
    written, skipped = unpack_outputs(stream.getvalue(), tmp_path, limit=1000)
    assert written == ["ok.json"]
    assert len(skipped) == 5
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ok.json"]


def test_results_are_written_atomically(tmp_path: Path) -> None:
    target = tmp_path / "results.json"
    write_json(target, {"score": 1})
    write_json(target, {"score": 2})
    assert json.loads(target.read_text()) == {"score": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]


def test_a_grader_error_still_writes_a_result(tmp_path: Path) -> None:
    zip_path = make_zip(tmp_path / "sub.zip", GOOD)
    rubric = tmp_path / "rubric.toml"
    rubric.write_text('[[component]]\nname = "no_such_component"\npoints = 1\n')
    report = grade(zip_path, tmp_path / "out", rubric=rubric, sandbox=False, quiet=True)
    assert report["score"] == 0.0
    assert "grader error" in report["output"]
    assert json.loads((tmp_path / "out" / "results.json").read_text()) == report


def test_one_components_failure_does_not_touch_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The judge fails for one component (a grader-side error): that one scores 0 with a
    'grader error', the other is graded normally. Trusted reference code: no sandbox needed."""
    import course.grading.grade

    real = course.grading.grade.judge_component

    def flaky(component, *args, **kwargs):
        if component == "softmax":
            raise RuntimeError("expected values unreadable")
        return real(component, *args, **kwargs)

    monkeypatch.setattr(course.grading.grade, "judge_component", flaky)
    zip_path = tmp_path / "reference.zip"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "course.handout.submission",
            "--root",
            str(REPO_ROOT),
            "--out",
            str(zip_path),
        ],
        check=True,
        capture_output=True,
    )
    rubric = tmp_path / "rubric.toml"
    rubric.write_text(RUBRIC)
    report = grade(zip_path, tmp_path / "out", rubric=rubric, sandbox=False, quiet=True)
    tests = {t["name"]: t for t in report["tests"]}
    assert tests["softmax"]["score"] == 0.0
    assert "grader error: RuntimeError: expected values unreadable" in tests["softmax"]["output"]
    assert tests["silu"]["score"] == 2.0


def test_batch_writes_a_csv_and_goes_on(tmp_path: Path) -> None:
    folder = tmp_path / "zips"
    folder.mkdir()
    (folder / "garbage.zip").write_bytes(b"not a zip")
    make_zip(folder / "nocode.zip", {"notes.txt": "hi"})
    rubric = tmp_path / "rubric.toml"
    rubric.write_text(RUBRIC)
    csv_path = grade_batch(folder, tmp_path / "grades", jobs=2, rubric=rubric, sandbox=False)
    rows = csv_path.read_text().splitlines()
    assert rows[0] == "submission,total,softmax,silu,note"
    assert rows[1].startswith('garbage.zip,0.0,0.0,0.0,"Submission refused')
    assert rows[2].startswith('nocode.zip,0.0,0.0,0.0,"Submission refused')
    assert "no cs336_basics/" in rows[2]


def test_cli_refuses_without_a_sandbox(tmp_path: Path) -> None:
    zip_path = make_zip(tmp_path / "sub.zip", GOOD)
    # No bwrap on PATH, and namespaces insisted on (as root, container mode would do).
    env = {**os.environ, "PATH": str(tmp_path), "CS336_ISOLATION": "namespaces"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "course.grading.grade",
            str(zip_path),
            "--out",
            str(tmp_path / "out"),
        ],
        env=env,
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    assert done.returncode == 2
    assert "refusing to grade without a sandbox" in done.stderr
    assert "apt-get install bubblewrap" in done.stderr


# --- The sandbox itself -------------------------------------------------------------------------


MODES = [NAMESPACES, CONTAINER]


def sandboxed(
    code: str,
    tmp_path: Path,
    limits: SandboxLimits,
    submission: dict | None = None,
    mode: str | None = None,
):
    """Run ``code`` (its outputs folder is ``sys.argv[1]``) at ``mode`` (default: the best)."""
    needs_sandbox(mode)
    runtime = Runtime.current()
    folder = tmp_path / "submission"
    for name, text in (submission or {}).items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    folder.mkdir(parents=True, exist_ok=True)
    for path in [folder, *folder.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    job = Job(
        runtime.python,
        [runtime.python, "-S", "-c", code, "/out"],
        {},
        folder,
        runtime.env(),
        masks=runtime.masks(),
        runtime=runtime.binds(),
    )
    level = Isolation(mode, ()) if mode else None
    return run_sandboxed(job, limits, tmp_path / "out", level)


@pytest.mark.parametrize("mode", MODES)
def test_only_the_students_package_is_importable(tmp_path: Path, mode: str) -> None:
    code = """
import os, sys
home = os.getcwd()
os.chdir(os.environ["TMPDIR"])
sys.path[:] = [p for p in sys.path if p not in ("", ".")]
try:
    import cs336_basics
    print("FOUND", cs336_basics.__file__)
except ImportError:
    print("NOT FOUND")
sys.path.insert(0, home)
import cs336_basics
print("STUDENT", os.path.relpath(cs336_basics.__file__, home), cs336_basics.MARK)
"""
    submission = {"cs336_basics/__init__.py": "MARK = 'mine'\n"}
    result = sandboxed(code, tmp_path, SandboxLimits(wall_s=60), submission, mode)
    assert "NOT FOUND" in result.log, result.log
    assert "STUDENT cs336_basics/__init__.py mine" in result.log


@pytest.mark.parametrize("mode", MODES)
def test_memory_limit_holds_for_the_whole_tree(tmp_path: Path, mode: str) -> None:
    code = """
import os, time
for _ in range(6):
    if os.fork() == 0:
        block = bytearray(300 * 2**20)
        for i in range(0, len(block), 4096):
            block[i] = 1
        time.sleep(60)
        os._exit(0)
time.sleep(60)
"""
    result = sandboxed(code, tmp_path, SandboxLimits(wall_s=50, memory_bytes=2**30), mode=mode)
    assert result.killed_for == "memory" and not result.timed_out


@pytest.mark.parametrize("mode", MODES)
def test_wall_clock_limit_kills_daemons_too(tmp_path: Path, mode: str) -> None:
    code = """
import os, subprocess, sys, time
if os.fork() == 0:  # a daemon: its own process group, parent gone
    os.setpgid(0, 0)
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-S", "-c", "import time; time.sleep(300)", "cs336-daemon-marker"])
    os._exit(0)
time.sleep(300)
"""
    result = sandboxed(code, tmp_path, SandboxLimits(wall_s=3), mode=mode)
    assert result.timed_out
    leftover = [
        p for p in os.listdir("/proc") if p.isdigit() and b"cs336-daemon-marker" in _cmdline(p)
    ]
    assert leftover == []


def _cmdline(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


@pytest.mark.parametrize("mode", MODES)
def test_processes_and_outputs_are_capped(tmp_path: Path, mode: str) -> None:
    code = """
import os, sys, time
count = 0
try:
    for _ in range(1000):
        if os.fork() == 0:
            time.sleep(5)
            os._exit(0)
        count += 1
except OSError:
    pass
open(sys.argv[1] + "/count.json", "w").write(str(count))
try:
    open(sys.argv[1] + "/big.bin", "wb").write(b"x" * (40 * 2**20))
except OSError:
    open(sys.argv[1] + "/full.json", "w").write("1")
"""
    limits = SandboxLimits(wall_s=60, processes=50, out_bytes=16 * 2**20)
    # Container mode has no size-capped /out: the largest file is what stops the write there.
    limits = replace(limits, file_size_bytes=8 * 2**20) if mode == CONTAINER else limits
    result = sandboxed(code, tmp_path, limits, mode=mode)
    assert int((tmp_path / "out" / "count.json").read_text()) < 50
    assert (tmp_path / "out" / "full.json").is_file()
    assert sum(p.stat().st_size for p in (tmp_path / "out").iterdir()) <= 16 * 2**20
    assert result.returncode == 0


@pytest.mark.parametrize("mode", MODES)
def test_parallel_sandboxes_run_as_different_users(tmp_path: Path, mode: str) -> None:
    """As root, each running sandbox has a uid of its own, so process limits never mix; in
    container mode, where runs share /dev/shm, one runs after the other."""
    if os.geteuid() != 0:
        pytest.skip("the grader runs sandboxes as dedicated uids only when it runs as root")
    code = (
        "import os, sys, time\nstart = time.time()\ntime.sleep(2)\n"
        "open(sys.argv[1] + '/run', 'w').write(f'{os.getuid()} {start} {time.time()}')\n"
    )
    with ThreadPoolExecutor(2) as pool:
        results = list(
            pool.map(
                lambda i: sandboxed(code, tmp_path / str(i), SandboxLimits(wall_s=60), mode=mode),
                range(2),
            )
        )
    assert all(r.output_files == ["run"] for r in results)
    runs = sorted((tmp_path / str(i) / "out" / "run").read_text().split() for i in range(2))
    (uid_a, start_a, end_a), (uid_b, start_b, end_b) = sorted(runs, key=lambda r: float(r[1]))
    if mode == CONTAINER:
        assert float(end_a) <= float(start_b), runs
    else:
        assert uid_a != uid_b and float(start_b) < float(end_a), runs


@pytest.mark.parametrize("mode", MODES)
def test_a_run_ends_when_its_command_ends(tmp_path: Path, mode: str) -> None:
    """Sleeping children and a double-forked daemon, no CPU used: the run ends with the
    command that left them (not at the wall clock), and none of them survives it."""
    marker = f"cs336-sleeper-{os.getpid()}-{mode}"
    code = f"""
import os, sys, time
for _ in range(100):
    if os.fork() == 0:
        time.sleep(300)
        os._exit(0)
if os.fork() == 0:
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-S", "-c", "import time; time.sleep(300)", {marker!r}])
    os._exit(0)
time.sleep(1)
"""
    result = sandboxed(code, tmp_path, SandboxLimits(wall_s=240, processes=200), mode=mode)
    assert not result.timed_out and result.returncode == 0, result.log
    assert _with_marker(marker) == []


def _leave_notes(name: str) -> str:
    """A run that writes a file and a folder named ``name`` wherever it can outside its own
    folders, and lists where it could in ``written``."""
    return f"""
import os, sys
written = []
for place in {list(SHARED_PLACES)!r} + ["/"]:
    try:
        os.makedirs(os.path.join(place, {name!r} + "-dir", "inner"))
        with open(os.path.join(place, {name!r}), "w") as stream:
            stream.write("note")
        written.append(place)
    except OSError:
        pass
open(sys.argv[1] + "/written", "w").write(" ".join(written))
"""


def _left_behind(name: str) -> list[str]:
    return [f"{p}/{entry}" for p in SHARED_PLACES for entry in _listing(p) if name in entry]


@pytest.mark.parametrize("mode", MODES)
def test_nothing_a_run_writes_outlives_it(tmp_path: Path, mode: str) -> None:
    """What a run leaves wherever it may write outside its own folders (/dev/shm, the machine's
    /tmp and the like) is gone when it ends: no later run can read it, no memory stays held."""
    name = f"cs336-left-{os.getpid()}-{mode}"
    result = sandboxed(_leave_notes(name), tmp_path, SandboxLimits(wall_s=60), mode=mode)
    assert result.output_files == ["written"], result.log
    assert "/dev/shm" in (tmp_path / "out" / "written").read_text()  # it could write there
    assert _left_behind(name) == []


def test_nothing_outlives_a_container_run_without_landlock(tmp_path: Path) -> None:
    """Without Landlock a container-mode run may write in every world-writable folder: the
    machine's /tmp too. All of it goes when the run ends."""
    if os.geteuid() != 0:
        pytest.skip("container mode runs code as a uid of its own: it needs root")
    name = f"cs336-left-{os.getpid()}-no-landlock"
    script = (
        "from pathlib import Path\nfrom course.grading.sandbox import SandboxLimits\n"
        "from course.tests.test_grader import _leave_notes, sandboxed\n"
        f"sandboxed(_leave_notes({name!r}), Path({str(tmp_path)!r}), SandboxLimits(wall_s=60), "
        "mode='container')\n"
    )
    command = [
        sys.executable,
        "-m",
        "course.grading.confine",
        "no-namespaces",
        "--no-landlock",
        "--",
    ]
    done = subprocess.run(
        [*command, sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO_ROOT
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "/tmp" in (tmp_path / "out" / "written").read_text().split()
    assert _left_behind(name) == []


def _listing(folder: str) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []


def test_a_run_that_must_be_alone_waits_for_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A turn alone starts only once every other turn has ended, and those asked for after it
    wait for it (so a stream of hidden runs cannot keep a public run waiting forever)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # lock files of this test's own
    slots = Slots(base=SANDBOX_UID_BASE)
    order: list[str] = []
    first_held, alone_waiting = threading.Event(), threading.Event()

    def beside(name: str, hold: threading.Event | None) -> None:
        with slots.turn(alone=False):
            order.append(f"{name} start")
            if hold:
                hold.set()
                alone_waiting.wait(30)
                time.sleep(0.5)  # the one alone is blocked meanwhile (checked by the order)
            order.append(f"{name} end")

    def alone() -> None:
        first_held.wait(30)
        threading.Timer(0.2, alone_waiting.set).start()
        with slots.turn(alone=True):
            order.append("alone start")
            order.append("alone end")

    threads = [threading.Thread(target=beside, args=("first", first_held))]
    threads.append(threading.Thread(target=alone))
    threads[0].start()
    threads[1].start()
    alone_waiting.wait(30)
    time.sleep(0.1)
    threads.append(threading.Thread(target=beside, args=("later", None)))
    threads[2].start()
    for thread in threads:
        thread.join(60)
    assert order == [
        "first start",
        "first end",
        "alone start",
        "alone end",
        "later start",
        "later end",
    ]


@pytest.mark.parametrize("mode", MODES)
def test_the_sandbox_dies_with_the_grader(tmp_path: Path, mode: str) -> None:
    """A grader killed mid-run (OOM killer, Ctrl-C) takes its sandbox and daemons with it.
    (Namespaces mode: the PID namespace dies with it. Container mode: the process that started
    the run, outside it, is told by the kernel and kills every process of the run's uid.)"""
    needs_sandbox(mode)
    daemon = f"cs336-daemon-{os.getpid()}"  # spelled in two halves below: only the daemon's
    split = f"'cs336-' + 'daemon-{os.getpid()}'"  # own command line holds it whole
    script = f"""
from pathlib import Path
from course.grading.sandbox import Isolation, Job, Runtime, SandboxLimits, run_sandboxed
runtime = Runtime.current()
folder = Path({str(tmp_path)!r}) / "submission"
folder.mkdir()
folder.chmod(0o755)
code = "import os, sys, time\\nif os.fork() == 0:\\n    os.setpgid(0, 0)\\n    os.execv(sys.executable, [sys.executable, '-S', '-c', 'import time; time.sleep(300)', {split}])\\ntime.sleep(300)"
job = Job(runtime.python, [runtime.python, "-S", "-c", code], {{}}, folder, runtime.env(), runtime=runtime.binds())
run_sandboxed(job, SandboxLimits(wall_s=300), Path({str(tmp_path)!r}) / "out", Isolation({mode!r}, ()))
"""
    grader = subprocess.Popen([sys.executable, "-c", script], cwd=REPO_ROOT)
    deadline = time.monotonic() + 60
    while not _with_marker(daemon) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _with_marker(daemon), "the sandbox's daemon did not start"
    grader.kill()
    grader.wait()
    deadline = time.monotonic() + 10
    while _with_marker(daemon) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _with_marker(daemon) == []


def _with_marker(marker: str) -> list[str]:
    return [p for p in os.listdir("/proc") if p.isdigit() and marker.encode() in _cmdline(p)]


def test_a_missing_module_is_named_once_with_what_it_cost(tmp_path: Path) -> None:
    needs_sandbox()
    files = {
        "cs336_basics/__init__.py": "",
        "tests/adapters.py": "import module_nobody_installed\n",
    }
    rubric = tmp_path / "rubric.toml"
    rubric.write_text(RUBRIC)
    report = grade(make_zip(tmp_path / "sub.zip", files), tmp_path / "out", rubric=rubric)
    text = json.dumps(report)
    assert text.count("No module named 'module_nobody_installed'") == 1, text
    assert "This cost every case of: softmax, silu." in report["output"]
    for test in report["tests"]:
        assert "did not import (see the top)" in test["output"]
        assert "raised ModuleNotFoundError" in test["output"]  # the hidden cases' fixed text


def test_container_mode_without_landlock_holds_only_where_ownership_does(tmp_path: Path) -> None:
    """Where the container's profile does not know Landlock, container mode is used only if
    its probe cannot read the instructor's files, and results name Landlock as missing."""
    if os.geteuid() != 0:
        pytest.skip("container mode runs code as a uid of its own: it needs root")
    # Under /tmp itself: pytest's own folders are private, which would hide it anyway.
    secret = Path(tempfile.mkdtemp(prefix="cs336-expected-"))
    (secret / "answer.json").write_text("{}")
    code = (
        "import sys\nfrom pathlib import Path\nfrom course.grading.sandbox import probe\n"
        f"level = probe('container', (Path({str(secret)!r}),))\nprint(level.describe())"
    )
    command = [
        sys.executable,
        "-m",
        "course.grading.confine",
        "no-namespaces",
        "--no-landlock",
        "--",
    ]
    command += [sys.executable, "-c", code]
    for mode, readable in ((0o755, True), (0o700, False)):
        secret.chmod(mode)
        (secret / "answer.json").chmod(mode & 0o644)
        done = subprocess.run(command, capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
        if readable:
            assert done.returncode != 0
            assert "make them readable by their owner only" in done.stderr, done.stderr
        else:
            assert done.returncode == 0, done.stderr
            assert "not available here: Landlock" in done.stdout, done.stdout
    shutil.rmtree(secret)


def test_the_budget_keeps_a_floor_for_every_sandbox_not_started() -> None:
    """One sandbox that runs to its bound leaves every later one its floor (budget / 2 / 4 =
    15 s here); what an honest one does not use goes back to those after it."""
    budget = Budget(120, 4)
    limits = SandboxLimits(wall_s=100)
    first = budget.share(limits)
    assert first.wall_s == 75  # 120 minus the floor of the three not started
    budget.settle(first, 75.0)
    bounds = []
    for _ in range(3):
        share = budget.share(limits)
        bounds.append(share.wall_s)
        budget.settle(share, 1.0)
    assert bounds == [15, 29, 43]


def case(name: str, message: str = "") -> CaseResult:
    return CaseResult(
        f"{name}-hidden-x-0", not message, 0.0 if message else 1.0, 1.0, message, True
    )


def test_hidden_components_share_a_sandbox_but_the_leaderboards_run_alone() -> None:
    names = ["silu", "train_bpe", "softmax", "tokenizer"]
    groups = hidden_groups(names, frozenset({"train_bpe", "tokenizer"}))
    assert groups == [["silu", "softmax"], ["train_bpe"], ["tokenizer"]]
    assert hidden_groups(["train_bpe"], frozenset({"train_bpe"})) == [["train_bpe"]]


def test_a_component_a_shared_sandbox_did_not_finish_runs_again_alone() -> None:
    """The shared sandbox died (a limit of its own) after silu's cases and during softmax's:
    silu keeps its outcomes, without the sandbox's death note; softmax, whose case wrote no
    outputs, runs again in a sandbox of its own. A grader-side error reruns each component."""
    died = SandboxResult(-9, 5.0, "", killed_for="memory")
    runs: list[list[str]] = []

    def run_hidden(group: list[str]) -> Phase:
        runs.append(group)
        if group == ["silu", "softmax"]:
            cases = {"silu": [case("silu")], "softmax": [case("softmax", NO_OUTPUTS + ": ...")]}
            return Phase(died, cases)
        if group == ["rope", "linear"]:
            return Phase(None, {}, "grader error: RuntimeError: ...")
        return Phase(SandboxResult(0, 1.0, ""), {group[0]: [case(group[0])]})

    phases = hidden_phases([["silu", "softmax"], ["rope", "linear"], ["tokenizer"]], run_hidden, 2)
    assert sorted(map(tuple, runs)) == sorted(
        [
            ("silu", "softmax"),
            ("rope", "linear"),
            ("tokenizer",),
            ("softmax",),
            ("rope",),
            ("linear",),
        ]
    )
    assert phases["silu"].run is None and phases["silu"].cases == {"silu": [case("silu")]}
    assert phases["softmax"].run.returncode == 0 and phases["softmax"].cases["softmax"][0].passed
    assert all(phases[n].error is None and phases[n].cases[n][0].passed for n in ("rope", "linear"))


def test_a_stopped_shared_sandbox_keeps_a_components_own_missing_outputs() -> None:
    """A component whose case wrote no outputs in a sandbox that ended normally is not run
    again: nothing of the sandbox's stopped it."""
    ended = SandboxResult(0, 5.0, "")
    runs: list[list[str]] = []

    def run_hidden(group: list[str]) -> Phase:
        runs.append(group)
        return Phase(ended, {"silu": [case("silu", NO_OUTPUTS)], "softmax": [case("softmax")]})

    phases = hidden_phases([["silu", "softmax"]], run_hidden, 2)
    assert runs == [["silu", "softmax"]]
    assert not phases["silu"].cases["silu"][0].passed


def test_the_attacks_command_runs_both_levels_container_mode_confined() -> None:
    (namespaces_env, namespaces_cmd), (container_env, container_cmd) = runs("both", "smoke")
    assert namespaces_env == {
        "CS336_GRADER_ATTACKS": "smoke",
        "CS336_REQUIRE_SANDBOX": "1",
        "CS336_ISOLATION": "namespaces",
    }
    assert container_env == {**namespaces_env, "CS336_ISOLATION": "container"}
    # Container mode as a default Docker container would start the grader, where namespaces work.
    assert container_cmd[1:6] == ["-m", "course.grading", "confine", "no-namespaces", "--"]
    for command in (namespaces_cmd, container_cmd):
        tests = [arg for arg in command if arg.endswith(".py")]
        assert "course/tests/test_grader_hostile.py" in tests
        assert all((REPO_ROOT / test).is_file() for test in tests)
    assert [env["CS336_ISOLATION"] for env, _ in runs("container", "all")] == ["container"]


def test_the_hang_attack_runs_only_the_full_rubric_hang_zip_at_both_levels() -> None:
    planned = runs("both", "hang")
    assert [env["CS336_ISOLATION"] for env, _ in planned] == ["namespaces", "container"]
    for env, command in planned:
        assert env["CS336_GRADER_ATTACKS"] == "hang"
        assert command[-3:] == ["course/tests/test_grader_hostile.py", "-k", "hanging_train_bpe"]
