"""Run untrusted code in a sandbox and collect the files it writes.

``run_sandboxed(job, limits, out_dir)`` runs ``job.argv`` confined at the best level this machine
offers (``isolation()`` finds it once and ``results.json`` names it):

* **namespaces** (``bwrap``, where namespaces can be made): new user, PID, mount, network, IPC,
  UTS and cgroup namespaces, no capabilities, no nested user namespaces, death with the grader;
  a file system made of read-only binds of exactly the job's files plus ``/usr``, a synthetic
  ``/etc/passwd``, fresh ``/proc``, a minimal ``/dev`` and size-capped private tmpfs mounts for
  ``/work`` (the student's copy), ``/tmp``, ``/dev/shm`` and ``/out``;
* **container** (an ordinary Docker container, where no namespace of any kind can be made): the
  run gets a private folder ("box") with ``work``, ``tmp`` and ``out`` that only its uid owns,
  and copies of the job's files that only its uid can read; Landlock, where the kernel offers
  it, lets it read only the system folders, the Python runtime and its box, write only below
  its box, open no TCP connection and signal nothing outside; without Landlock the file system
  is held by ownership alone, and ``isolation()`` refuses this mode unless the probe proves the
  instructor's files unreadable to the sandbox's uid.

In both, as root the run gets a uid of its own (one per concurrent slot) that owns nothing of
the grader; ``no_new_privs`` and a seccomp filter (``course/grading/confine.py``: no ptrace, mounts,
namespaces, sockets other than ``AF_UNIX``, ``memfd``/SysV shared memory, ``setsid``, io_uring,
BPF, keyrings) come before any student code; ``RLIMIT_AS``, ``RLIMIT_CPU``, ``RLIMIT_FSIZE``,
``RLIMIT_NPROC`` and no core dumps bind every process; a watchdog kills every process of the
run when its CPU time (all processes together, so a busy neighbour cannot make it time out),
its resident plus shared memory, its disk use in the box, or a generous wall clock pass their
limits. A run ends when its command does: the launcher then kills everything else it may
signal, and the process that started the run (outside it, as root) kills every process of the
uid when the launcher ends or the grader dies. Then, as root, the grader deletes whatever the
uid left in the places every user may write (``remove_files_of``). In container mode, where
runs share ``/dev/shm`` and the abstract socket names, no two runs overlap (``Slots.turn``).
Command lines, environments and mount tables inside a run name sandbox paths only.

When the command has finished, a small launcher inside the sandbox streams ``/out`` as a tar
to a pipe; the grader reads at most ``out_bytes`` from it and accepts only regular files with
plain names, written fresh into ``out_dir``. The stream comes from the sandbox, so it is
checked like any other untrusted input; the judge validates every file again.

Where each part lives: ``job`` (the job, its limits and result, the runtime, the levels'
names), ``levels`` (probing each mode, ``isolation()``, ``run_sandboxed``), ``run`` (one run,
start to end, and its outputs), ``namespaces`` (bwrap's command line and the staged binds),
``container`` (the box), ``watchdog`` (rlimits, the meter, killing and cleaning up), ``slots``
(uids and turns), ``launch`` (reading the programs); ``programs/`` holds the three programs
that run in other processes (``prepare.py`` on the host, ``launcher.py`` first inside the run,
``probe.py`` as the probe), each an ordinary file that ruff and the tests read.
"""

from course.grading.sandbox.job import (
    CONTAINER,
    NAMESPACES,
    Isolation,
    Job,
    Runtime,
    SandboxLimits,
    SandboxResult,
    SandboxUnavailable,
)
from course.grading.sandbox.levels import isolation, probe, run_sandboxed
from course.grading.sandbox.run import unpack_outputs
from course.grading.sandbox.slots import SANDBOX_UID_BASE, Slots
from course.grading.sandbox.watchdog import SHARED_PLACES

__all__ = [
    "CONTAINER",
    "NAMESPACES",
    "SANDBOX_UID_BASE",
    "SHARED_PLACES",
    "Isolation",
    "Job",
    "Runtime",
    "SandboxLimits",
    "SandboxResult",
    "SandboxUnavailable",
    "Slots",
    "isolation",
    "probe",
    "run_sandboxed",
    "unpack_outputs",
]
