"""The seccomp filter and Landlock rules of course/grading/confine.py, each applied in a fresh process.

Every check runs a small Python program that confines itself, then tries what the sandbox must
refuse and what student code legitimately needs (threads, fork, subprocesses, a process pool,
AF_UNIX socket pairs), and prints what happened.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from course.grading import confine
from course.grading.sandbox.launch import PROGRAMS, launcher_argv
from course.paths import REPO_ROOT

TRIES = """
import ctypes, json, os, socket, subprocess, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
def attempt(action):
    try:
        return "ok" if action() not in (-1,) else "refused"
    except OSError:
        return "refused"
def thread():
    done = []
    worker = threading.Thread(target=lambda: done.append(1))
    worker.start()
    worker.join()
    return 0 if done else -1
def fork():
    child = os.fork()
    if child == 0:
        os._exit(7)
    return 0 if os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) == 7 else -1
def pool():
    import multiprocessing
    with multiprocessing.Pool(2) as workers:
        return 0 if workers.map(abs, [-1, -2]) == [1, 2] else -1
def sysv_semaphore():
    ident = libc.semget(0, 1, 0o1000 | 0o600)  # IPC_PRIVATE, IPC_CREAT
    if ident >= 0:
        libc.semctl(ident, 0, 0)  # IPC_RMID: it would outlive this process
    return ident
def posix_queue():
    name = b"/cs336-confine-%d" % os.getpid()
    queue = libc.mq_open(name, 0o100 | 2, 0o600, None)  # O_CREAT | O_RDWR
    if queue >= 0:
        libc.mq_close(queue)
        libc.mq_unlink(name)
    return queue
results = {
    "memfd": attempt(lambda: os.memfd_create("x")),
    "sysv_semaphore": attempt(sysv_semaphore),
    "posix_queue": attempt(posix_queue),
    "sysv_shm": attempt(lambda: libc.shmget(0, 4096, 0o1000 | 0o600)),
    "inet": attempt(lambda: socket.socket(socket.AF_INET)),
    "inet6": attempt(lambda: socket.socket(socket.AF_INET6)),
    "netlink": attempt(lambda: socket.socket(16, socket.SOCK_RAW)),
    "unix": attempt(lambda: socket.socket(socket.AF_UNIX)),
    "socketpair": attempt(lambda: socket.socketpair()),
    "user_namespace": attempt(lambda: libc.unshare(0x10000000)),
    "mount_namespace": attempt(lambda: libc.unshare(0x20000)),
    "setsid": attempt(os.setsid),
    "ptrace": attempt(lambda: libc.ptrace(16, os.getppid(), 0, 0)),
    "thread": attempt(thread),
    "fork": attempt(fork),
    "subprocess": attempt(lambda: subprocess.run(["true"], check=True).returncode),
    "pool": attempt(pool),
}
print(json.dumps(results))
"""


def run_confined(setup: str, tries: str = TRIES, **options) -> dict:
    code = f"import sys\nsys.path.insert(0, {str(REPO_ROOT)!r})\n{setup}\n{tries}"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, **options
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_sandbox_filter_refuses_escapes_and_keeps_what_code_needs() -> None:
    results = run_confined(
        "from course.grading.confine import confine_syscalls\nconfine_syscalls()"
    )
    refused = ["memfd", "sysv_shm", "sysv_semaphore", "posix_queue", "inet", "inet6", "netlink"]
    refused += ["user_namespace"]
    refused += ["mount_namespace", "setsid", "ptrace"]
    allowed = ["unix", "socketpair", "thread", "fork", "subprocess", "pool"]
    assert {k: results[k] for k in refused} == dict.fromkeys(refused, "refused")
    assert {k: results[k] for k in allowed} == dict.fromkeys(allowed, "ok")


def test_without_the_filter_the_same_program_gets_through() -> None:
    """The probes have teeth: unconfined, the calls the filter refuses succeed."""
    results = run_confined("")
    probes = ("memfd", "sysv_shm", "sysv_semaphore", "posix_queue", "inet", "setsid")
    assert {k: results[k] for k in probes} == dict.fromkeys(probes, "ok")


def test_programs_are_assembled_with_every_jump_in_range() -> None:
    for arch in confine.SYSCALLS:
        program = confine.filter_program(confine.SANDBOX_DENIED, True, arch)
        assert len(program) % 8 == 0 and len(program) // 8 < 256
    with pytest.raises(KeyError):
        confine.filter_program(("no_such_call",), True, "x86_64")


@pytest.mark.skipif(confine.landlock_abi() < 1, reason="this kernel offers no Landlock")
def test_landlock_reads_and_writes_only_where_allowed(tmp_path: Path) -> None:
    allowed, elsewhere = tmp_path / "allowed", tmp_path / "elsewhere"
    allowed.mkdir()
    elsewhere.mkdir()
    (elsewhere / "secret").write_text("secret")
    tries = f"""
import json, os
results = {{}}
for name, action in (
    ("read elsewhere", lambda: open({str(elsewhere / "secret")!r}).read()),
    ("list elsewhere", lambda: os.listdir({str(elsewhere)!r})),
    ("write elsewhere", lambda: open({str(elsewhere / "new")!r}, "w").close()),
    ("write allowed", lambda: open({str(allowed / "new")!r}, "w").close()),
    ("read system", lambda: open("/etc/hostname").read()),
):
    try:
        action()
        results[name] = "ok"
    except OSError:
        results[name] = "refused"
print(json.dumps(results))
"""
    setup = f"""
from course.grading.confine import restrict_paths
import sys
restrict_paths(["/usr", "/lib", "/lib64", "/etc", sys.base_prefix, *sys.path[1:]], [{str(allowed)!r}])
"""
    results = run_confined(setup, tries)
    assert results == {
        "read elsewhere": "refused",
        "list elsewhere": "refused",
        "write elsewhere": "refused",
        "write allowed": "ok",
        "read system": "ok",
    }


def test_the_container_emulation_refuses_every_namespace_and_drops_capabilities() -> None:
    """``python -m course.grading.confine no-namespaces -- CMD``: what CI uses to test container mode."""
    tries = TRIES + textwrap.dedent(
        """
        status = dict(l.split(":", 1) for l in open("/proc/self/status") if ":" in l)
        print(json.dumps({**results, "CapEff": status["CapEff"].strip()}))
        """
    )
    code = f"import sys\nsys.path.insert(0, {str(REPO_ROOT)!r})\n{tries}"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "course.grading.confine",
            "no-namespaces",
            "--",
            sys.executable,
            "-c",
            code,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO_ROOT,
    )
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert results["user_namespace"] == results["mount_namespace"] == "refused"
    assert results["inet"] == results["fork"] == results["pool"] == "ok"  # only namespaces go
    if os.geteuid() == 0:
        allowed = sum(1 << c for c in confine.DOCKER_CAPABILITIES)
        assert int(results["CapEff"], 16) & ~allowed == 0


def test_the_sandbox_programs_import_the_standard_library_only() -> None:
    """They run with ``python -S`` (no site-packages) before anything else in their process:
    an import from elsewhere would fail there, or run code nobody checked."""
    programs = sorted(PROGRAMS.glob("*.py"))
    assert {p.stem for p in programs} == {"launcher", "prepare", "probe"}
    for path in programs:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            for name in names:
                assert name.split(".")[0] in sys.stdlib_module_names, (path.name, name)


def test_the_launcher_is_confine_s_definitions_then_the_launcher_program() -> None:
    python, flag, dash_c, text, spec = launcher_argv("/opt/python/bin/python3", {"argv": []})
    assert (python, flag, dash_c, json.loads(spec)) == (
        "/opt/python/bin/python3",
        "-S",
        "-c",
        {"argv": []},
    )
    compile(text, "launcher", "exec")
    # confine.py's command line stays out: -c code runs as __main__.
    assert '__name__ == "__main__"' not in text
    assert text.index("def confine_syscalls(") < text.rindex("confine_syscalls()")
    assert text.index("def restrict_paths(") < text.rindex("restrict_paths(**")
    assert text.endswith((PROGRAMS / "launcher.py").read_text(encoding="utf-8"))
