"""The prepare step: starts one run, on the host, as the grader's user (root, or the instructor).

``run.start_prepare`` runs it as ``python -S -c TEXT`` with its JSON spec on stdin, so that no
command line shows a host path. It sets the limits (in namespaces mode, as root, first exposing
the binds through a private mount namespace), then forks the run, which becomes the sandbox's
unprivileged uid and execs the launcher (or bwrap). This process stays outside the run, as its
parent and a child subreaper (orphans are reaped here), and a root process the run's uid cannot
signal. When the run's first process ends, or the grader dies (PR_SET_PDEATHSIG: SIGTERM),
every process of the run's uid is killed at once; then it exits with that status. Stdlib only.
"""

import ctypes
import json
import os
import resource
import signal
import sys
import time

spec = json.loads(sys.stdin.read())
os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
libc = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36
CLONE_NEWNS, MS_RDONLY, MS_BIND, MS_REC, MS_PRIVATE = 0x20000, 1, 4096, 16384, 1 << 18


def check(result, what):
    if result != 0:
        sys.exit(f"sandbox setup: {what}: {os.strerror(ctypes.get_errno())}")


def children_left():
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        return False
    return True


def become(uid):
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)


def end_run(*_):
    # Without a uid of its own the run is namespaces mode's: bwrap ends it (--die-with-parent).
    for _ in range(500 if spec["uid"] is not None else 0):
        helper = os.fork()
        if helper == 0:  # the run's uid signals everything it may: exactly the run
            try:
                become(spec["uid"])
                os.kill(-1, signal.SIGKILL)
            finally:
                os._exit(0)
        os.waitpid(helper, 0)
        if not children_left():
            break
        time.sleep(0.01)
    os._exit(status)


def stage_binds(stage):
    """Each (source, point, veil): bind the source at the point and, over a folder's bind, a
    read-only overlay at the veil, so that the run's mount table never names the source."""
    check(libc.unshare(CLONE_NEWNS), "unshare")
    check(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "private mounts")
    for source, point, veil in stage:
        check(libc.mount(source.encode(), point.encode(), None, MS_BIND | MS_REC, None), source)
        if veil is None:
            continue
        empty = os.path.join(os.path.dirname(point), "empty")
        layers = f"lowerdir={point}:{empty}".encode()
        if libc.mount(b"overlay", veil.encode(), b"overlay", MS_RDONLY, layers) != 0:
            # No overlay here: the bind itself (the mount table then names the original).
            check(libc.mount(point.encode(), veil.encode(), None, MS_BIND | MS_REC, None), veil)


def exec_run(parent):
    """In the forked child: become the run's uid and exec its first program."""
    if spec["uid"] is not None:
        become(spec["uid"])
    # Die with the prepare process (set after setuid, which clears it).
    check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "PR_SET_PDEATHSIG")
    if os.getppid() != parent:
        os._exit(1)
    try:
        os.execve(spec["argv"][0], spec["argv"], spec["env"])  # no PATH search
    except OSError as error:
        print(
            f"sandbox setup: cannot run {spec['argv'][0]} as uid {os.getuid()}: {error} "
            "(every user must be able to read the runtime: install it under /opt, as "
            "the Gradescope setup does)",
            file=sys.stderr,
        )
        os._exit(127)


status = 1
for name, value in spec["rlimits"].items():
    resource.setrlimit(getattr(resource, name), (value, value))
if spec["stage"]:
    stage_binds(spec["stage"])
check(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "PR_SET_CHILD_SUBREAPER")
signal.signal(signal.SIGTERM, end_run)
check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0), "PR_SET_PDEATHSIG")
if os.getppid() != spec["parent"]:  # the grader is gone already
    os._exit(1)
me = os.getpid()
child = os.fork()
if child == 0:
    exec_run(me)
while True:
    try:
        pid, code = os.wait()
    except ChildProcessError:
        break
    if pid == child:
        status = os.waitstatus_to_exitcode(code)
        status = status if status >= 0 else 128 - status
        break
end_run()
