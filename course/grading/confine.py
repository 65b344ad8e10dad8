"""Confine this process and everything it starts: a seccomp filter and Landlock rules.

Both are unprivileged (they need only ``no_new_privs``) and work where no namespace can be made,
as in a Docker container with the default security profile. The sandbox's launcher applies them
before any student code runs (``course/grading/sandbox/``); ``python -m course.grading.confine no-namespaces
-- CMD`` runs ``CMD`` the way such a container would (namespaces refused, Docker's default
capabilities), which is how CI tests the grader's container mode on a machine that has
namespaces.

Standard library only: the launcher receives this file's source as text and runs it with
``python -S``, before the student's environment is on the path.

* ``confine_syscalls()`` refuses (``EPERM``) what a graded run never needs and what could reach
  past the sandbox or hold memory the watchdog does not see: ``ptrace`` and cross-process memory
  access, mounts and namespaces (``clone`` with ``CLONE_NEW*`` flags too), keyrings, BPF, perf,
  ``userfaultfd``, ``io_uring`` (which bypasses seccomp), ``memfd_create``, SysV shared
  memory, semaphores and message queues and POSIX message queues (objects any other sandbox
  of the machine could open: a channel between sandboxes), ``setsid`` (a session of its own would also be a scheduling
  group of its own, out of its neighbours' fair share), modules, kexec, reboot and swap; and
  sockets other than ``AF_UNIX`` (no TCP, UDP, raw or netlink). ``clone3`` answers ``ENOSYS``,
  so the C library falls back to ``clone``, whose flags a filter can read.
* ``restrict_paths(read, write)`` lets the process read only below ``read`` and write only below
  ``write``; with Landlock ABI 4 no TCP port can be bound or connected, with ABI 6 no signal or
  abstract Unix socket reaches a process outside the sandbox.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct
import sys

# --- seccomp ------------------------------------------------------------------------------------

SYSCALLS = {  # the calls the filters name, per architecture (from the kernel's unistd headers)
    "x86_64": {
        "socket": 41, "ptrace": 101, "mount": 165, "umount2": 166, "pivot_root": 155,
        "chroot": 161, "unshare": 272, "setns": 308, "clone": 56, "clone3": 435, "keyctl": 250,
        "add_key": 248, "request_key": 249, "bpf": 321, "perf_event_open": 298,
        "userfaultfd": 323, "memfd_create": 319, "memfd_secret": 447, "shmget": 29,
        "msgget": 68, "process_vm_readv": 310, "process_vm_writev": 311, "kexec_load": 246,
        "kexec_file_load": 320, "init_module": 175, "finit_module": 313, "delete_module": 176,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
        "open_by_handle_at": 304, "name_to_handle_at": 303, "swapon": 167, "swapoff": 168,
        "reboot": 169, "acct": 163, "quotactl": 179, "mount_setattr": 442, "open_tree": 428,
        "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
        "pidfd_getfd": 438, "kcmp": 312, "syslog": 103, "setsid": 112, "semget": 64,
        "mq_open": 240,
    },
    "aarch64": {
        "socket": 198, "ptrace": 117, "mount": 40, "umount2": 39, "pivot_root": 41,
        "chroot": 51, "unshare": 97, "setns": 268, "clone": 220, "clone3": 435, "keyctl": 219,
        "add_key": 217, "request_key": 218, "bpf": 280, "perf_event_open": 241,
        "userfaultfd": 282, "memfd_create": 279, "memfd_secret": 447, "shmget": 194,
        "msgget": 186, "process_vm_readv": 270, "process_vm_writev": 271, "kexec_load": 104,
        "kexec_file_load": 294, "init_module": 105, "finit_module": 273, "delete_module": 106,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
        "open_by_handle_at": 265, "name_to_handle_at": 264, "swapon": 224, "swapoff": 225,
        "reboot": 142, "acct": 89, "quotactl": 60, "mount_setattr": 442, "open_tree": 428,
        "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
        "pidfd_getfd": 438, "kcmp": 272, "syslog": 116, "setsid": 157, "semget": 190,
        "mq_open": 180,
    },
}  # fmt: skip
LANDLOCK_CALLS = {
    "landlock_create_ruleset": 444,
    "landlock_add_rule": 445,
    "landlock_restrict_self": 446,
}  # the same number on every architecture
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
X32_SYSCALL_BIT = 0x40000000
NAMESPACE_CALLS = (
    "unshare", "setns", "mount", "umount2", "pivot_root", "mount_setattr", "open_tree",
    "move_mount", "fsopen", "fsconfig", "fsmount", "fspick",
)  # fmt: skip
SANDBOX_DENIED = (
    *NAMESPACE_CALLS, "chroot", "ptrace", "process_vm_readv", "process_vm_writev", "kcmp",
    "pidfd_getfd", "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "memfd_create", "memfd_secret",
    "shmget", "msgget", "semget", "mq_open", "setsid", "kexec_load", "kexec_file_load", "init_module",
    "finit_module", "delete_module", "open_by_handle_at", "name_to_handle_at", "swapon",
    "swapoff", "reboot", "acct", "quotactl", "syslog",
)  # fmt: skip
CLONE_NEW_FLAGS = 0x7E020080  # CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET|NEWTIME
AF_UNIX = 1
EPERM, ENOSYS, EAFNOSUPPORT = 1, 38, 97
RET_ALLOW, RET_ERRNO, RET_KILL_PROCESS = 0x7FFF0000, 0x00050000, 0x80000000
LD_ABS_W, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06  # classic BPF opcodes
OFFSET_NR, OFFSET_ARCH, OFFSET_ARG0 = 0, 4, 16  # struct seccomp_data (args: low word first)
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class ConfineError(OSError):
    """The kernel refused to apply a filter or a ruleset."""


def _check(result: int, what: str) -> int:
    if result < 0:
        number = ctypes.get_errno()
        raise ConfineError(number, f"{what}: {os.strerror(number)}")
    return result


def machine() -> str:
    return platform.machine().lower().replace("arm64", "aarch64")


def filter_program(
    denied: tuple[str, ...], unix_sockets_only: bool, arch: str, unknown: tuple[str, ...] = ()
) -> bytes:
    """A classic-BPF seccomp program: ``denied`` calls and ``clone`` with namespace flags fail
    with ``EPERM``; ``clone3`` and the ``unknown`` calls with ``ENOSYS``, as if the kernel
    lacked them; other sockets than ``AF_UNIX`` (if asked) with ``EAFNOSUPPORT``; a foreign
    architecture kills the process; everything else is allowed."""
    numbers = {**SYSCALLS[arch], **LANDLOCK_CALLS}
    code: list[tuple] = [
        (LD_ABS_W, OFFSET_ARCH),
        (JEQ, AUDIT_ARCH[arch], None, "kill"),
        (LD_ABS_W, OFFSET_NR),
    ]
    if arch == "x86_64":  # the x32 ABI numbers its calls differently: refuse all of it
        code.append((JGE, X32_SYSCALL_BIT, "eperm", None))
    code += [(JEQ, numbers[name], "eperm", None) for name in denied]
    code += [(JEQ, numbers[name], "enosys", None) for name in ("clone3", *unknown)]
    code.append((JEQ, numbers["clone"], "clone", None))
    if unix_sockets_only:
        code.append((JEQ, numbers["socket"], "socket", None))
    code += [
        (RET, RET_ALLOW),
        ("clone",),
        (LD_ABS_W, OFFSET_ARG0),
        (JSET, CLONE_NEW_FLAGS, "eperm", None),
        (RET, RET_ALLOW),
        ("socket",),
        (LD_ABS_W, OFFSET_ARG0),
        (JEQ, AF_UNIX, None, "eafnosupport"),
        (RET, RET_ALLOW),
        ("kill",),
        (RET, RET_KILL_PROCESS),
        ("eperm",),
        (RET, RET_ERRNO | EPERM),
        ("enosys",),
        (RET, RET_ERRNO | ENOSYS),
        ("eafnosupport",),
        (RET, RET_ERRNO | EAFNOSUPPORT),
    ]
    return _assemble(code)


def _assemble(code: list[tuple]) -> bytes:
    """Encode ``code``: labels are 1-tuples; a jump names its targets (None: the next one)."""
    labels, position = {}, 0
    for item in code:
        if len(item) == 1:
            labels[item[0]] = position
        else:
            position += 1
    program, position = b"", 0
    for item in code:
        if len(item) == 1:
            continue
        op, k, *targets = item
        jumps = [0 if t is None else labels[t] - position - 1 for t in targets] + [0, 0]
        if not all(0 <= j <= 255 for j in jumps):
            raise ValueError("seccomp program too long for its jumps")
        program += struct.pack("<HBBI", op, jumps[0], jumps[1], k)
        position += 1
    return program


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install_filter(program: bytes) -> None:
    """Apply ``program`` to this thread and its future children (after ``no_new_privs``)."""
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.addressof(buffer))
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "seccomp")


def confine_syscalls() -> str:
    """The sandbox's filter (see the module docstring); returns what it did, in words."""
    arch = machine()
    if arch not in SYSCALLS:
        return f"no seccomp filter (no syscall table for {arch})"
    install_filter(filter_program(SANDBOX_DENIED, True, arch))
    return "seccomp filter"


# --- Landlock -----------------------------------------------------------------------------------

LANDLOCK_CREATE_RULESET, LANDLOCK_ADD_RULE, LANDLOCK_RESTRICT_SELF = 444, 445, 446  # all arches
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1
FS_EXECUTE, FS_WRITE_FILE, FS_READ_FILE, FS_READ_DIR = 1, 2, 4, 8
FS_TRUNCATE, FS_IOCTL_DEV = 1 << 14, 1 << 15
FS_RIGHTS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}
FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV
READ_RIGHTS = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR
NET_BIND_TCP, NET_CONNECT_TCP = 1, 2
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1, 2


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 where Landlock is missing or refused (a seccomp
    profile that does not know the call answers ENOSYS or EPERM)."""
    result = _libc.syscall(LANDLOCK_CREATE_RULESET, None, 0, LANDLOCK_CREATE_RULESET_VERSION)
    return max(int(result), 0)


def fs_rights(abi: int) -> int:
    return FS_RIGHTS_BY_ABI[max(v for v in FS_RIGHTS_BY_ABI if v <= abi)]


def restrict_paths(read: list[str], write: list[str], listed: list[str] = ()) -> str:
    """Allow reading (and executing) only below ``read``, reading and writing only below
    ``write``, and only listing the folders below ``listed``; paths that do not exist are
    skipped. Returns what was enforced, in words."""
    abi = landlock_abi()
    if abi < 1:
        return "no Landlock (not offered by this kernel or refused by its seccomp profile)"
    handled = fs_rights(abi)
    attr = _RulesetAttr(handled, (NET_BIND_TCP | NET_CONNECT_TCP) if abi >= 4 else 0, 0)
    if abi >= 6:
        attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
    ruleset = _check(
        _libc.syscall(LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.sizeof(attr), 0),
        "landlock_create_ruleset",
    )
    try:
        for paths, rights in ((read, READ_RIGHTS), (write, handled), (listed, FS_READ_DIR)):
            for path in paths:
                _allow(ruleset, path, rights & handled)
        _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
        _check(_libc.syscall(LANDLOCK_RESTRICT_SELF, ruleset, 0), "landlock_restrict_self")
    finally:
        os.close(ruleset)
    extras = (", no TCP" if abi >= 4 else "") + (
        ", no signals or abstract sockets out" if abi >= 6 else ""
    )
    return f"Landlock ABI {abi} (file system{extras})"


def _allow(ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if not os.path.isdir(path):
            rights &= FILE_RIGHTS
        rule = _PathBeneath(rights, fd)
        _check(
            _libc.syscall(
                LANDLOCK_ADD_RULE, ruleset, LANDLOCK_RULE_PATH_BENEATH, ctypes.byref(rule), 0
            ),
            f"landlock rule for {path}",
        )
    finally:
        os.close(fd)


# --- Emulating a default Docker container (CI) --------------------------------------------------

# Docker's default capability set; everything else is dropped from the bounding set.
DOCKER_CAPABILITIES = (0, 1, 3, 4, 5, 6, 7, 8, 10, 13, 18, 27, 29, 31)  # CHOWN ... SETFCAP
PR_CAPBSET_DROP, CAP_LAST_CAP = 24, 40
LINUX_CAPABILITY_VERSION_3 = 0x20080522


def emulate_default_container(landlock: bool = True) -> None:
    """What a default Docker container does to its processes, as far as the grader can tell:
    no namespace of any kind can be made (and no mount), and only Docker's default
    capabilities remain; with ``landlock`` False, also a seccomp profile (or a kernel) that
    does not know Landlock. Applies to this process and everything it runs."""
    arch = machine()
    if os.geteuid() == 0:
        keep = sum(1 << c for c in DOCKER_CAPABILITIES)
        for cap in range(CAP_LAST_CAP + 1):
            if not keep & (1 << cap):
                _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # unknown caps fail: fine
        header = struct.pack("<Ii", LINUX_CAPABILITY_VERSION_3, 0)
        data = struct.pack(
            "<6I", keep & 0xFFFFFFFF, keep & 0xFFFFFFFF, 0, keep >> 32, keep >> 32, 0
        )
        _check(_libc.syscall(126 if arch == "x86_64" else 91, header, data), "capset")
    unknown = () if landlock else tuple(LANDLOCK_CALLS)
    install_filter(filter_program(NAMESPACE_CALLS, False, arch, unknown))


USAGE = "usage: python -m course.grading.confine no-namespaces [--no-landlock] -- COMMAND [ARG...]"


def main(argv: list[str]) -> int:
    landlock = "--no-landlock" not in argv[:2]
    argv = [a for a in argv[:2] if a != "--no-landlock"] + argv[2:]
    if len(argv) < 3 or argv[0] != "no-namespaces" or argv[1] != "--":
        print(USAGE, file=sys.stderr)
        return 2
    emulate_default_container(landlock)
    os.execvp(argv[2], argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
