"""The grading driver: run one component's cases on a student's code and write outputs only.

    python driver.py --cases-root DIR --submission DIR --inputs DIR --component NAME --out DIR

A small fixed script, not pytest and no file of the student's: it runs inside the grader's
sandbox, imports the pristine case definitions (``<cases-root>/tests/cases``) first, then the
student's ``cs336_basics`` and ``tests/adapters.py``, runs each case of the component and
writes the case's outputs to ``<out>/<case id>.{safetensors,json}`` as soon as it finishes.
It never sees a hidden case's expected values: the judge (``course/grading/judge.py``) compares
outside, afterwards. In the public run it judges a public case with its shipped expected values
only to add pytest's diagnosis lines to a failure (``public_explainer``).
Each case runs in a child process of its own (forked after the import), so whatever the
student's code does there (raise, exit, crash, print, start processes, hang) costs that case
only: the driver counts the CPU time of every process the case started (pools, daemons, their
children) against the case's limit, with a wall-clock bound four times as long for code that
sleeps, and at a limit, or when the case ends leaving processes running, stops them all. A
component whose case hit a limit gets a tenth of the limits for its later cases of the run,
so a hang costs about one case's limit. The grader's watchdog stays the hard limit. Packages
the rubric blocks (``--blocked``) cannot be imported by the student's code: the import fails
with a message naming the policy.
See course/GRADING_INTERFACE.md.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import importlib.util
import itertools
import json
import math
import os
import resource  # noqa: F401  (os.wait4 imports it: before the student's code may hide it)
import select
import signal
import sys
import threading
import time
from pathlib import Path

EXIT_BAD_ARGUMENTS = 2
IMPORT_FAILED = "importing your tests/adapters.py failed: "  # course/grading/judge.py reads it back
BLOCKED = "blocked while grading"  # in the message for a package the rubric blocks
CASE_TIMEOUT_S = 60.0
# The components whose cases build a torch optimizer. Its first ``add_param_group`` imports
# torch._dynamo, seconds of CPU: the driver imports it once, before it forks each component's
# process, so that cost is paid once per sandbox, not once per component.
OPTIMIZER_COMPONENTS = frozenset(("adamw", "checkpoint"))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases-root", type=Path, required=True, help="holds pristine tests/cases")
    parser.add_argument(
        "--submission", type=Path, required=True, help="holds cs336_basics/ and tests/adapters.py"
    )
    parser.add_argument(
        "--inputs", type=Path, required=True, help="case inputs: <component>/<case id>.*"
    )
    parser.add_argument("--component", required=True, help="a component, or several: a,b")
    parser.add_argument("--out", type=Path, required=True, help="an empty writable folder")
    parser.add_argument("--cases", default="", help="comma-separated case ids (default: all)")
    parser.add_argument(
        "--case-timeout",
        type=float,
        default=CASE_TIMEOUT_S,
        help="CPU seconds per case, over every process it starts (and for importing the "
        "adapters); 0: none, every case in this process (trusted code only)",
    )
    parser.add_argument("--blocked", default="", help="comma-separated packages to refuse")
    return parser.parse_args(argv)


def isolate_paths(cases_root: Path) -> None:
    """The pristine cases first; never this script's folder or the working directory."""
    here = str(Path(__file__).resolve().parent)
    rest = [p for p in sys.path if p not in ("", ".", here)]
    sys.path[:] = [str(cases_root), *rest]


def load_student_adapters(submission: Path):
    """The student's ``tests/adapters.py`` as ``tests.adapters`` beside the pristine cases."""
    path = submission / "tests" / "adapters.py"
    spec = importlib.util.spec_from_file_location("tests.adapters", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["tests.adapters"] = module
    spec.loader.exec_module(module)
    return module


WALL_FACTOR = 4  # the wall-clock limit, for code that sleeps: this many times the CPU limit
AFTER_A_LIMIT = 0.1  # the share of the limits a component's later cases get once one hit them
POLL_S = 0.1  # the longest wait between two looks at a case's processes
PR_SET_CHILD_SUBREAPER = 36
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAST_THE_LIMIT = "ran past the per-case limit"  # course/grading/grade.py finds such cases
IMPORT_REPORT = "import.json"  # in --out: whether importing the adapters ended in time
IMPORT_ENDED = "cs336-driver: importing the adapters ended"  # the same, as a line of the log


def become_subreaper() -> None:
    """Orphans of the student's processes (double forks, daemons) become the driver's children
    rather than the sandbox init's, so a case's limit still counts and stops them (Linux only:
    elsewhere they escape the count, and the watchdog ends them with the run)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def process_table() -> dict[int, tuple[int, int, int, bool]]:
    """``pid: (parent, start time, CPU ticks with its reaped children's, zombie)`` of every
    process in /proc. The watchdog reads the same fields, but the driver sees only the standard
    library, torch and the cases (GRADING_INTERFACE.md): it cannot import the watchdog."""
    table = {}
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                if entry.isdigit():
                    with open(f"/proc/{entry}/stat", "rb") as stream:
                        fields = stream.read().rsplit(b")", 1)[1].split()
                    ticks = sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
                    table[int(entry)] = (int(fields[1]), int(fields[19]), ticks, fields[0] == b"Z")
    return table


class Processes:
    """What a case (or the import) started: the driver's descendants that were not there when
    it began (a pid with its start time, so a reused pid is no mistake), and the CPU time they
    used, the reaped ones' included. Never any other process of the machine."""

    def __init__(self) -> None:
        table = process_table()
        self.before = {(pid, table[pid][1]) for pid in self.below_driver(table)}
        self.known: set[int] = set()  # ours, not reaped by the driver yet
        self.reaped_s = self.peak_s = 0.0
        self.ended: dict[int, int] = {}  # reaped children of the driver: their wait status
        self.seen: set[int] = set()  # ours ever seen (Worker.run counts them per case)

    @staticmethod
    def below_driver(table: dict) -> list[int]:
        children: dict[int, list[int]] = {}
        for pid, row in table.items():
            children.setdefault(row[0], []).append(pid)
        found, todo = [], [os.getpid()]
        while todo:
            below = children.get(todo.pop(), [])
            found += below
            todo += below
        return found

    def members(self, table: dict) -> list[int]:
        """Ours now: only the driver's descendants, so nothing else is ever counted or killed."""
        found = [p for p in self.below_driver(table) if (p, table[p][1]) not in self.before]
        self.known.update(found)  # whose CPU counts when the driver reaps them
        self.seen.update(found)
        return found

    def cpu_s(self, table: dict, own: bool = False) -> float:
        """CPU seconds used so far (``own``: the driver's too, for the import, which runs in it)."""
        pids = self.members(table) + ([os.getpid()] if own else [])
        ticks = sum(table[p][2] for p in pids if p in table)
        self.peak_s = max(self.peak_s, ticks / CLOCK_TICKS + self.reaped_s)
        return self.peak_s

    def running(self) -> list[int]:
        table = process_table()
        return [p for p in self.members(table) if not table[p][3]]

    def reap(self) -> None:
        """Reap the driver's ended children (into ``ended``); the CPU of ours counts."""
        with contextlib.suppress(ChildProcessError):
            while (reaped := os.wait4(-1, os.WNOHANG))[0]:
                pid, status, usage = reaped
                if pid in self.known:
                    self.known.discard(pid)
                    self.reaped_s += usage.ru_utime + usage.ru_stime
                self.ended[pid] = status

    def stop(self, spare: int | None = None) -> list[int]:
        """SIGKILL every process of ours (but ``spare``), again while any is left (one may fork
        meanwhile), and reap those that come to the driver; the ones that were running."""
        found = [pid for pid in self.running() if pid != spare]
        running = found
        for _ in range(200):
            if not running:
                break
            for pid in running:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.005)
            self.reap()
            running = [pid for pid in self.running() if pid != spare]
        self.reap()
        return found


class CaseTimeout(BaseException):
    """Raised when importing the adapters runs past its limits (a BaseException, so
    ``except Exception`` misses it)."""


class ImportLimit(threading.Thread):
    """The import's limits, counted as a case's (the import runs in the driver, so the driver's
    own CPU counts too): at a limit, stop what it started and raise CaseTimeout in the main
    thread. It reaps nothing, so the student's own waits for their processes work."""

    def __init__(self, limit_s: float) -> None:
        super().__init__(daemon=True)
        self.limit_s, self.processes = limit_s, Processes()
        self.main, self.began = threading.get_ident(), time.monotonic()
        self.armed, self.ended = True, threading.Event()
        self.before_s = self.processes.cpu_s(process_table(), own=True)  # importing torch

    def run(self) -> None:
        while not self.ended.wait(POLL_S):
            cpu_s = self.processes.cpu_s(process_table(), own=True) - self.before_s
            if cpu_s > self.limit_s or time.monotonic() - self.began > self.limit_s * WALL_FACTOR:
                if self.armed:  # the alarm first: the import must not go on when they end
                    signal.pthread_kill(self.main, signal.SIGALRM)
                    self.processes.stop()
                return

    def on_alarm(self, signum, frame) -> None:
        if self.armed:  # at most once, and never once the import has ended
            self.armed = False
            raise CaseTimeout(
                f"importing it ran past the limit of {self.limit_s:g} CPU-seconds (counted over "
                f"every process it started) or {self.limit_s * WALL_FACTOR:g} s of wall clock"
            )

    def disarm(self) -> None:
        self.armed = False  # first: from here on the alarm raises nothing
        self.ended.set()
        if self.is_alive():
            self.join()


def report_import(out: Path, error: BaseException | None) -> None:
    """Say whether importing the adapters ended within its limits (the grader starts the hidden
    runs only if it did): in ``out``, and, for a run whose ``out`` is lost (a sandbox stopped
    at its limits), as a line of the log. The student's code runs in this process and could
    write either: a forgery only costs its own submission time."""
    ended = not isinstance(error, CaseTimeout)
    with contextlib.suppress(BaseException), open(out / IMPORT_REPORT, "w") as stream:
        stream.write(json.dumps({"ended": ended}))
    if ended:
        with contextlib.suppress(OSError):
            os.write(2, f"\n{IMPORT_ENDED}\n".encode())


class BlockedPackages:
    """A meta-path finder that refuses the packages the grading policy blocks (first on
    ``sys.meta_path``). The sandbox also hides their files where it can; this gives the
    student a message that names the policy instead of a bare "No module named"."""

    def __init__(self, names: list[str]) -> None:
        self.names = names

    def find_spec(self, fullname: str, path=None, target=None):
        if fullname.split(".")[0] in self.names:
            raise ModuleNotFoundError(
                f"{fullname} is {BLOCKED}: the course's grading policy does not "
                f"allow packages that implement graded parts ({', '.join(self.names)})",
                name=fullname,
            )
        return None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = args.out.resolve()
    if not out.is_dir() or not args.inputs.is_dir():
        print(f"driver: --out {out} and --inputs {args.inputs} must be folders", file=sys.stderr)
        return EXIT_BAD_ARGUMENTS
    # The student's prints go to stderr; stdout carries nothing the grader trusts anyway.
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    isolate_paths(args.cases_root.resolve())

    import torch

    from tests.cases.core import describe_exception

    torch.set_num_threads(1)
    components = args.component.split(",")
    if OPTIMIZER_COMPONENTS.intersection(components):
        import torch._dynamo  # noqa: F401
    selected = {c for c in args.cases.split(",") if c}
    instances = load_instances(args.inputs, components, selected)
    if not instances:
        print(f"driver: no case inputs for {args.component!r} in {args.inputs}", file=sys.stderr)
        return EXIT_BAD_ARGUMENTS
    run_cases = case_runner(args.submission)
    # Only now may the student's files shadow module names: everything the driver itself needs
    # (torch, numpy, safetensors, the cases and their `tests` package) is imported already.
    # First on the path, so their cs336_basics wins over any other copy (the cases root, an
    # editable install of the reference in an unsandboxed run).
    sys.path.insert(0, str(args.submission.resolve()))
    blocked = [name for name in args.blocked.split(",") if name]
    sys.meta_path.insert(0, BlockedPackages(blocked))
    become_subreaper()
    adapters, failure = import_adapters(args.submission.resolve(), args.case_timeout)
    import_error = None if failure is None else IMPORT_FAILED + describe_exception(failure)
    report_import(out, failure)
    run_cases(instances, adapters, import_error, out, args.case_timeout)
    with contextlib.suppress(BaseException):  # the student may have closed or replaced stderr
        sys.stderr.flush()
    # Skip the student's atexit handlers and wait for none of their threads.
    os._exit(0)


def import_adapters(submission: Path, limit_s: float):
    """``(the student's adapters module or None, what importing it raised or None)``, the
    import stopped at ``ImportLimit``'s limits (none with ``limit_s`` 0)."""
    limit = ImportLimit(limit_s)
    signal.signal(signal.SIGALRM, limit.on_alarm)
    try:
        if limit_s:
            limit.start()
        try:
            return load_student_adapters(submission), None
        finally:
            limit.disarm()
    except BaseException as error:  # noqa: BLE001  (syntax errors, exits, anything)
        limit.disarm()  # again: the alarm may have cut the first short (it raises only once)
        return None, error


def load_instances(inputs: Path, component_names: list[str], selected: set[str]) -> list:
    """``(case id, case, inputs)`` for every case of the components with inputs present."""
    from tests.cases import CASES
    from tests.cases.wire import read_bundle

    instances = []
    for component in component_names:
        folder = inputs / component
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            header, bundle = read_bundle(folder, path.stem)
            if not selected or header["case"] in selected:
                case = CASES[(header["component"], header["kind"])]
                instances.append((header["case"], case, bundle))
    return instances


# Failures where the grader's versions are the likely cause: code that parses or imports on the
# student's Python and libraries but not on the grader's.
VERSION_SENSITIVE = frozenset(
    ("SyntaxError", "IndentationError", "TabError", "ImportError", "ModuleNotFoundError")
)


def grader_versions() -> str:
    """One line naming the grader's Python and the libraries students' code imports most."""
    import numpy
    import torch

    python = ".".join(map(str, sys.version_info[:3]))
    return f"graded with Python {python}, torch {torch.__version__}, numpy {numpy.__version__}"


def with_versions(message: str, versions: str) -> str:
    """``message`` (``"Name: text"``, perhaps after the import prefix), with the grader's
    versions appended when it is a parse or import failure the versions may explain (not a
    blocked package, nor a name missing from the student's own package)."""
    name = message.removeprefix(IMPORT_FAILED).split(":", 1)[0]
    if name not in VERSION_SENSITIVE or BLOCKED in message or "'cs336_basics" in message:
        return message
    return f"{message} ({versions}; code must parse and import there)"


def case_runner(submission: Path | None = None):
    """``run_cases(instances, adapters, import_error, out, timeout)``, with what it calls bound
    now, before any student code runs: whatever that code later does to ``sys.modules`` or
    ``sys.path``, the driver keeps its own functions and goes on writing outputs.
    ``submission``: the folder holding the student's code (default: this checkout's, where
    ``tests/raised_in.py`` looks for it)."""
    from tests.cases import Outputs
    from tests.cases.core import attempt_case, describe_exception
    from tests.cases.wire import read_bundle, write_bundle

    clock, noted, versions = time.perf_counter, with_versions, grader_versions()
    explain = public_explainer(submission)

    def save(out: Path, case_id: str, outputs, started: float, extra: dict | None = None) -> None:
        if outputs.raised is not None:
            outputs = Outputs(outputs.data, noted(outputs.raised, versions))
        header = {"case": case_id, "seconds": round(clock() - started, 3), **(extra or {})}
        try:
            write_bundle(out, case_id, outputs.data, header | status_of(outputs))
        except BaseException as error:  # noqa: BLE001  (unsavable outputs)
            problem = f"the outputs could not be saved: {describe_exception(error)}"
            write_bundle(out, case_id, {}, header | status_of(Outputs({}, problem)))

    def run_one(out: Path, case_id: str, case, inputs, adapters, timeout: float) -> None:
        """Run one case on the student's code and write its outputs (with, for a failed
        public case, the diagnosis lines pytest prints under it)."""
        started = clock()
        outputs, error = attempt_case(case, adapters, inputs)
        save(
            out,
            case_id,
            outputs,
            started,
            explain(case_id, case, adapters, inputs, outputs, error, timeout),
        )

    def run_component(out: Path, group: list, adapters, timeout: float) -> None:
        """Run one component's cases in a process of its own (``Worker``), each within
        ``timeout``. A case that ends that process (a limit, an exit, a crash) gets a message
        saying why, and the cases after it a new process; once one ran past its limits, they
        get a share of them (AFTER_A_LIMIT)."""
        limit_s, worker = timeout, None
        for index, (case_id, case, _) in enumerate(group):
            worker = worker or Worker(lambda i: run_one(out, *group[i], adapters, timeout))
            started = clock()
            hit, status, stopped = worker.run(index, limit_s, limit_s * WALL_FACTOR)
            if hit or status is not None:
                why = f" (an earlier case of {case.component} ran past its limits)"
                why = why if limit_s < timeout else ""
                spawned = len(worker.processes.seen - {worker.pid})
                problem = ended_early(hit, status, limit_s, stopped, spawned, why)
                save(out, case_id, Outputs({}, problem), started)
                worker.close()
                limit_s, worker = timeout * AFTER_A_LIMIT if hit else limit_s, None
            elif stopped:  # noted, without changing the outcome
                note = f"it left {counted(stopped)} running; stopped"
                with contextlib.suppress(Exception):  # malformed outputs: the judge says so
                    header, data = read_bundle(out, case_id)
                    write_bundle(out, case_id, data, header | {"note": note})
        if worker:
            worker.close()

    def run_cases(instances: list, adapters, import_error: str | None, out: Path, timeout: float):
        """Run each case and write its outputs the moment it finishes: each component's in a
        process of its own (``run_component``), or, with ``timeout`` 0, all in this one."""
        if import_error is not None or not timeout:
            for case_id, case, inputs in instances:
                if import_error is None:
                    run_one(out, case_id, case, inputs, adapters, timeout)
                else:
                    save(out, case_id, Outputs({}, import_error), clock())
            return
        for _, group in itertools.groupby(instances, key=lambda i: i[1].component):
            run_component(out, list(group), adapters, timeout)

    return run_cases


# --- Public feedback: what pytest prints under a failed public case -----------------------------

# CPU seconds a public case's diagnosis may take (it runs the student's code again, on simpler
# inputs): the public run's share of the time budget is spent on cases first.
DIAGNOSIS_TIMEOUT_S = 20.0


def diagnosis_alarm(signum, frame) -> None:
    raise CaseTimeout("the diagnosis ran past its share of the case's limit")


def public_explainer(submission: Path | None = None):
    """``explain(case_id, case, adapters, inputs, outputs, error, timeout)``: for a public case
    that fails, the header entry ``{"diagnosis": [lines]}`` with the lines pytest prints under it
    (``tests.localize.public_diagnosis``: judged with the shipped expected values, then measured
    with the student's code again, under the alarm; then, when the case raised ``error`` out of
    the student's code in ``submission``, where: ``tests.raised_in``, as conftest.py adds it);
    ``{}`` otherwise. Only the public sandbox holds what that reads (grade.DIAGNOSIS_FILES: the
    shipped fixtures, tests/localize, tests/measure.py, tests/raised_in.py), so in a hidden run
    the import fails and nothing is diagnosed (``raised_in`` describes the values the failing
    line held: a hidden case's inputs among them). Bound before any student code runs, as
    ``run_cases`` is. The lines are feedback text only: the judge scores the outputs."""
    try:
        from tests.localize import public_diagnosis
        from tests.raised_in import ROOT, raised_in_lines
    except ImportError:
        return lambda *args: {}
    root = ROOT if submission is None else submission.resolve()

    def explain(case_id: str, case, adapters, inputs, outputs, error, timeout: float) -> dict:
        # Only a case that returned gets here (run_one, after the import): a stopped one never does.
        if "-public-" not in case_id:
            return {}
        lines: list[str] = []
        try:  # in the case's process: its own CPU alarm, under the case's limit
            signal.signal(signal.SIGPROF, diagnosis_alarm)
            signal.setitimer(signal.ITIMER_PROF, min(timeout / 4 or math.inf, DIAGNOSIS_TIMEOUT_S))
            lines = [str(line) for line in public_diagnosis(case, adapters, inputs, outputs)]
            # Describing the student's values may run their code (a property, a repr): last,
            # under the same alarm, and a failure there keeps the lines measured before it.
            lines += [str(line) for line in raised_in_lines(error, root)] if error else []
        except BaseException:  # noqa: BLE001  (the alarm, or whatever the student's code does)
            pass
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
        return {"diagnosis": lines} if lines else {}

    return explain


class Worker:
    """A child process that runs one component's cases when told to (the driver writes a
    case's index to a pipe; the child runs it, writes its outputs, answers), so the cases of a
    component share what they warm (modules imported on first use) as in one process, while
    the driver counts the CPU of every process each case starts (``Processes``)."""

    def __init__(self, run) -> None:
        self.processes = Processes()
        orders, self.orders = os.pipe()
        self.answers, answers = os.pipe()
        with contextlib.suppress(BaseException):  # what this process printed, printed once
            sys.stderr.flush()
        self.pid = os.fork()
        if self.pid == 0:
            try:
                os.close(self.orders)
                with open(orders, "rb", buffering=0) as stream:
                    for line in stream:
                        run(int(line))
                        os.write(answers, b"done\n")
            finally:
                os._exit(0)
        os.close(orders)
        os.close(answers)
        self.processes.known.add(self.pid)

    def run(self, index: int, limit_s: float, wall_s: float) -> tuple[str | None, int | None, int]:
        """Have case ``index`` run within ``limit_s`` CPU-seconds over every process it starts
        and ``wall_s`` of wall clock; stop what it leaves running. Returns the limit it hit
        ("cpu", "wall" or None), the child's wait status if the case ended it, and how many
        processes were stopped besides the child."""
        before_s = self.processes.cpu_s(process_table())
        self.processes.seen = set()
        began = time.monotonic()
        os.write(self.orders, f"{index}\n".encode())
        while True:  # the answer wakes it at once; /proc is read once per POLL_S at most
            answered = select.select([self.answers], [], [], POLL_S)[0]
            if answered and os.read(self.answers, 64):
                return None, None, self.stop_others()
            self.processes.reap()
            if answered or self.pid in self.processes.ended:  # it ended (the pipe closed)
                status = self.wait(tries=100)
                stopped = set(self.processes.stop()) - {self.pid}
                return None, self.wait() if status is None else status, len(stopped)
            if self.processes.cpu_s(process_table()) - before_s > limit_s:
                return "cpu", None, len(set(self.processes.stop()) - {self.pid})
            if time.monotonic() - began > wall_s:
                return "wall", None, len(set(self.processes.stop()) - {self.pid})

    def stop_others(self) -> int:
        """Stop what the case left running (after a moment to end on its own: a pool shutting
        down), the child excepted; how many."""
        for _ in range(5):
            if set(self.processes.running()) <= {self.pid}:
                return 0
            time.sleep(0.05)
            self.processes.reap()
        return len(self.processes.stop(spare=self.pid))

    def wait(self, tries: int = 1000) -> int | None:
        """The child's wait status, once it has ended (None if it has not within ``tries``)."""
        for _ in range(tries):
            self.processes.reap()
            if self.pid in self.processes.ended:
                return self.processes.ended[self.pid]
            time.sleep(0.01)
        return None

    def close(self) -> None:
        """End the child (its loop ends with the orders) and whatever is left."""
        os.close(self.orders)
        self.wait(tries=100)
        self.processes.stop()
        os.close(self.answers)


def ended_early(
    hit: str | None, status: int | None, limit_s: float, stopped: int, started: int, why: str
) -> str:
    """Why a case in its own process has no outputs of its own, in the student's terms (an
    exception's "Name: text", as ``run_case`` reports one)."""
    left = f"; it started {counted(started)}, {stopped} still running (stopped)" if started else ""
    pool = "a multiprocessing pool whose workers keep failing, or a child that never ends?"
    if hit == "cpu":
        return (
            f"CaseTimeout: {PAST_THE_LIMIT} of {limit_s:g} CPU-seconds{why}, counted over every "
            f"process the case started{left} ({pool if started else 'an endless loop?'})"
        )
    if hit == "wall":
        return (
            f"CaseTimeout: {PAST_THE_LIMIT} of {limit_s * WALL_FACTOR:g} s of wall clock{why}"
            f"{left} ({pool if started else 'sleeping or waiting forever?'})"
        )
    how = (
        f"signal {os.WTERMSIG(status)}: a crash in native code?"
        if status is not None and os.WIFSIGNALED(status)
        else f"exit status {os.waitstatus_to_exitcode(status or 0)}: os._exit in your code?"
    )
    return f"CaseEnded: the case ended its process before writing its outputs ({how}){left}"


def counted(processes: int) -> str:
    return "1 process" if processes == 1 else f"{processes} processes"


def status_of(outputs) -> dict:
    if outputs.raised is None:
        return {"status": "ok", "error": None}
    return {"status": "raised", "error": outputs.raised}


if __name__ == "__main__":
    raise SystemExit(main())
