"""Grade submission zips: ``cs336-grade x.zip --out DIR`` (``make grade SUBMISSION=x.zip``).

Trust model: the student's code is hostile, so it never decides its own grade. For one zip the
grader

1. unpacks it strictly (``course/grading/unpack.py``): links, special files, odd or colliding names,
   deep folders, bad CRCs, unsupported compression and bombs refuse the whole zip; only
   ``cs336_basics/`` and ``tests/adapters.py`` are kept;
2. runs the fixed driver (``course/grading/driver.py``) in fresh sandboxes (``course/grading/sandbox/``, at
   the best isolation level the machine offers: namespaces, else container mode): first one,
   alone on the machine, for the public cases of every component, then (if the student's
   adapters imported in time there) a few for the hidden cases (``hidden_groups``: the
   components together, each in a process of its own, but a component whose sandbox's CPU time
   is a leaderboard entry alone; a component a shared sandbox did not finish runs again
   alone), each with the student's copy, the pristine case definitions, only those cases' inputs and a Python
   environment without the reference solution (and without the packages the rubric blocks);
   no network, no host files, no expected values; CPU-time, wall, memory, disk, process and
   output limits, and one time budget for the whole zip (``Budget``). The driver writes
   outputs only; a sandbox ends when its driver does;
3. after the sandbox is gone, the judge (``course/grading/judge.py``) compares those outputs, outside,
   with expected values the sandbox never saw;
4. always writes a Gradescope ``results.json`` (``score``, ``tests``: name, score, max_score,
   output; ``extra_data.isolation``: the level that ran) atomically into ``--out``, a folder the sandbox never sees, and prints a points
   table. Any failure on the grader's side becomes a zero-score result saying
   ``grader error: ...``; a component's failure never touches another's score. Points come
   from hidden cases only; what a hidden case says is a fixed text (``judge.hidden_feedback``),
   so nothing from the hidden sandboxes' inputs reaches the student. Public cases, run where
   no hidden input is, give the full diagnosis.

``--batch FOLDER`` grades every ``*.zip`` in a folder and writes ``grades.csv``; one zip's
trouble never stops the others. Without a working sandbox the grader refuses to run, except
with ``--no-sandbox`` (trusted code only: the reference in CI).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from course.grading.driver import (
    CASE_TIMEOUT_S,
    IMPORT_ENDED,
    IMPORT_REPORT,
    PAST_THE_LIMIT,
    WALL_FACTOR,
)
from course.grading.export import write_batch_outputs
from course.grading.judge import (
    IMPORT_FAILED,
    NO_OUTPUTS,
    CaseResult,
    Rubric,
    is_hidden,
    judge_component,
    load_rubric,
)
from course.grading.report import finish as finish_report
from course.grading.sandbox import (
    Isolation,
    Job,
    Runtime,
    SandboxLimits,
    SandboxResult,
    SandboxUnavailable,
    isolation,
    run_sandboxed,
)
from course.grading.settings import load_settings
from course.grading.unpack import UnsafeArchive, unpack_submission
from course.paths import DRIVER, HIDDEN, REPO_ROOT, RUBRIC, relative
from course.workspace import stage

OUTPUT_LIMIT = 6000
IMPORT_NOT_ENDED = "not run: your tests/adapters.py did not finish importing in time (see the top)"
# The pristine files the driver imports (GRADING_INTERFACE.md): the case definitions only.
CASE_FILES = (
    "tests/__init__.py",
    "tests/cases",
    "tests/common.py",
    "tests/snapshots.py",
    "tests/hints.py",
)
# Beside them in the public sandbox only: what the diagnoses pytest prints under a failed public
# case read (they run the student's code again on simpler inputs, and say where an error came out
# of it, tests/raised_in.py; the driver writes their lines into the case's outputs). Every one
# ships in the handout; a hidden sandbox never gets them, so nothing there diagnoses, and hidden
# feedback stays a fixed text.
DIAGNOSIS_FILES = ("tests/localize", "tests/measure.py", "tests/raised_in.py", "fixtures")
# [limits] keys of the rubric -> SandboxLimits fields (and the unit they are given in).
LIMIT_KEYS = {
    "wall_s": ("wall_s", 1),
    "cpu_s": ("cpu_s", 1),
    "memory_gib": ("memory_bytes", 2**30),
    "address_space_gib": ("address_space_bytes", 2**30),
    "processes": ("processes", 1),
    "file_size_mib": ("file_size_bytes", 2**20),
    "output_mib": ("out_bytes", 2**20),
    "work_mib": ("work_bytes", 2**20),
}


@dataclass(frozen=True)
class Course:
    """Where the instructor's grading material lives (the Gradescope bundle moves it)."""

    root: Path = REPO_ROOT  # holds course/grading/driver.py and the CASE_FILES
    inputs: Path = HIDDEN / "inputs"
    expected: Path = HIDDEN / "expected"


@dataclass
class ComponentResult:
    name: str
    score: float
    max_score: float
    output: str
    seconds: float = 0.0
    passed: int = 0
    total: int = 0
    # The two halves of ``output``, shown at different times (course/grading/visibility.py),
    # and the hidden sandbox's CPU seconds as the watchdog counted them (the leaderboard's).
    hidden_output: str = ""
    public_output: str = ""
    public_passed: int = 0
    public_total: int = 0
    cpu_seconds: float = 0.0


def sandbox_limits(limits: dict) -> SandboxLimits:
    unknown = set(limits) - set(LIMIT_KEYS)
    if unknown:
        raise ValueError(f"unknown [limits] keys in the rubric: {sorted(unknown)}")
    fields = {
        LIMIT_KEYS[k][0]: type_of(LIMIT_KEYS[k][0])(v * LIMIT_KEYS[k][1]) for k, v in limits.items()
    }
    return replace(SandboxLimits(), **fields)


def type_of(field_name: str) -> type:
    return type(getattr(SandboxLimits(), field_name))


# --- One phase: a sandbox, then the judge -------------------------------------------------------


def driver_argv(
    python: str, driver: str, cases: str, submission: str, inputs: str, components: str, out: str
) -> list[str]:
    return [
        python,
        "-S",  # no site-packages processing: an editable install's .pth stays inert
        driver,
        f"--cases-root={cases}",
        f"--submission={submission}",
        f"--inputs={inputs}",
        f"--component={components}",
        f"--out={out}",
    ]


DRIVER_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "MPLBACKEND": "Agg"}


def stage_grader_files(course: Course, names: list[str], hidden: bool, dest: Path) -> Path:
    """Copy what the driver reads (the driver, the case files, the inputs of ``names``' hidden
    or public cases, never both, and for public cases the diagnoses' files) into ``dest``,
    world-readable whatever the modes of the originals: the sandbox's uid reads it."""
    diagnoses = () if hidden else DIAGNOSIS_FILES
    stage(dest, (relative(DRIVER), *CASE_FILES, *diagnoses), source=course.root)
    for name in names:
        (dest / "inputs" / name).mkdir(parents=True)
        for path in sorted((course.inputs / name).glob("*")):
            if is_hidden(path.name.split(".")[0]) == hidden:
                shutil.copyfile(path, dest / "inputs" / name / path.name)
    for path in [dest, *dest.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return dest


def driver_job(
    staged: Path,
    names: list[str],
    submission: Path,
    runtime: Runtime,
    blocked: tuple[str, ...],
    case_s: float,
) -> Job:
    """The driver's command and read-only binds for one sandbox."""
    argv = driver_argv(
        runtime.python,
        "/grader/course/grading/driver.py",
        "/grader",
        "/work/submission",
        "/grader/inputs",
        ",".join(names),
        "/out",
    )
    argv += [f"--blocked={','.join(blocked)}", f"--case-timeout={case_s}"]
    env = {**runtime.env(), **DRIVER_ENV}
    return Job(
        runtime.python,
        argv,
        {"/grader": staged},
        submission,
        env,
        masks=runtime.masks(blocked),
        runtime=runtime.binds(),
    )


def run_unsandboxed(
    staged: Path,
    names: list[str],
    submission: Path,
    out_dir: Path,
    limits: SandboxLimits,
    case_s: float,
) -> SandboxResult:
    """The same driver as a plain subprocess, for trusted code only (``--no-sandbox``)."""
    work = staged.parent / f"{staged.name}-submission"
    shutil.copytree(submission, work)
    out_dir.mkdir(parents=True)
    runtime = Runtime.current()
    python = str(runtime.prefix / "bin" / Path(runtime.python).name)
    driver = str(staged / relative(DRIVER))
    argv = driver_argv(
        python,
        driver,
        str(staged),
        str(work),
        str(staged / "inputs"),
        ",".join(names),
        str(out_dir),
    )
    argv.append(f"--case-timeout={case_s}")
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(runtime.site_packages),
        **DRIVER_ENV,
    }
    started = time.monotonic()
    try:
        done = subprocess.run(argv, env=env, cwd=work, capture_output=True, timeout=limits.wall_s)
    except subprocess.TimeoutExpired:
        return SandboxResult(None, time.monotonic() - started, "", timed_out=True)
    log = (done.stdout + done.stderr).decode(errors="replace")[-limits.log_bytes :]
    files = sorted(p.name for p in out_dir.iterdir())
    return SandboxResult(done.returncode, time.monotonic() - started, log, output_files=files)


@dataclass
class Phase:
    """One sandbox's run and the judge's verdicts on it, per component; or a grader error."""

    run: SandboxResult | None
    cases: dict[str, list[CaseResult]]
    error: str | None = None
    seconds: float = 0.0
    limits: SandboxLimits | None = None  # what it ran under (its share of the budget)
    import_timeout: str | None = None  # the public run: why the hidden runs were not started


def run_phase(
    names: list[str],
    hidden: bool,
    submission: Path,
    scratch: Path,
    setting: Setting,
    budget: Budget,
) -> Phase:
    """Run the driver on ``names``' hidden (or public) cases in one sandbox, within its share
    of ``budget``, then judge them; never raises. The public run runs alone."""
    started = time.monotonic()
    label = "public" if not hidden else f"hidden-{names[0]}"
    label += f"-and-{len(names) - 1}-more" if hidden and len(names) > 1 else ""
    limits = budget.share(setting.limits)
    run = None
    try:
        staged = stage_grader_files(setting.course, names, hidden, scratch / "grader" / label)
        outputs = scratch / "outputs" / label
        if setting.level is None:
            run = run_unsandboxed(staged, names, submission, outputs, limits, setting.case_s)
        else:
            runtime = Runtime.current()
            blocked = setting.rubric.blocked_packages
            job = driver_job(staged, names, submission, runtime, blocked, setting.case_s)
            run = run_sandboxed(job, limits, outputs, setting.level, alone=not hidden)
        course = setting.course
        cases = {
            name: judge_component(
                name,
                outputs,
                course.expected,
                rubric=setting.rubric,
                inputs_root=course.inputs,
                hidden=hidden,
            )
            for name in names
        }
        phase = Phase(run, cases, limits=limits)
        report = None if hidden else import_report(outputs, run.log)
        # Outputs the grader could not read back say nothing either way: the hidden runs go on.
        if not hidden and not report and not run.output_error:
            phase.import_timeout = import_timeout(report, run, limits, setting.case_s)
    except Exception as error:  # noqa: BLE001  (a grader-side failure: this phase only)
        phase = Phase(None, {}, f"grader error: {describe(error)}", limits=limits)
    finally:
        budget.settle(limits, run.seconds if run else 0.0)
    phase.seconds = time.monotonic() - started
    return phase


class Budget:
    """The submission's time budget: wall-clock seconds its sandboxes may run in all (waiting
    for a turn does not count). Each sandbox may run for the smaller of ``wall_s`` and what the
    budget can give while keeping a floor for every sandbox not started yet (half the budget,
    split evenly); what it does not use goes back. So the whole zip is bounded, and a component
    that runs long costs no other component its points: each gets at least its floor, far more
    than an honest component needs."""

    def __init__(self, seconds: float, sandboxes: int) -> None:
        self.left, self.waiting = float(seconds), sandboxes
        self.floor = seconds / (2 * sandboxes)
        self._lock = threading.Lock()

    def share(self, limits: SandboxLimits) -> SandboxLimits:
        with self._lock:
            self.waiting = max(self.waiting - 1, 0)  # a sandbox run again is not counted ahead
            bound = max(1, int(min(limits.wall_s, self.left - self.floor * self.waiting)))
            self.left -= bound
        return replace(limits, wall_s=bound)

    def settle(self, limits: SandboxLimits, used: float) -> None:
        with self._lock:
            self.left += max(limits.wall_s - used, 0.0)


def import_report(outputs: Path, log: str) -> bool | None:
    """Whether importing the student's adapters ended in the public run within the driver's
    limits, as its driver reported before any case: in ``driver.IMPORT_REPORT``, or, where the
    run's outputs were lost (the watchdog stopped the sandbox later, so nothing of ``/out``
    came back), by the line ``driver.IMPORT_ENDED`` in its log. None without a report: the
    import never ended, because a limit stopped it (the watchdog's, or ``RLIMIT_CPU``'s
    SIGXCPU) or it ended the process, and each hidden run would spend the same. The student's
    code could forge either; that only costs its own submission time."""
    try:
        with open(outputs / IMPORT_REPORT, "rb") as stream:
            return json.loads(stream.read(100)) == {"ended": True}
    except (OSError, ValueError):
        return True if IMPORT_ENDED in log.splitlines() else None


def import_timeout(
    report: bool | None, run: SandboxResult, limits: SandboxLimits, case_s: float
) -> str:
    """The one sentence a student reads when the hidden runs were not started."""
    if report is None:
        how = f"the public run {death_note(run, limits) or 'ended first'}"
    else:
        how = (
            f"the driver's limit for importing it: {case_s:g} CPU-seconds, counted over every "
            f"process it started ({case_s * WALL_FACTOR:g} s of wall clock)"
        )
    return (
        "No hidden case was run, so every component scores 0: importing your tests/adapters.py "
        f"(with the cs336_basics modules it imports) did not finish ({how}); work at module "
        "level (a training run, a loop) runs on every import: move it into a function."
    )


def death_note(result: SandboxResult, limits: SandboxLimits) -> str | None:
    """Why the driver stopped early, in the student's terms, or None if it ended normally."""
    if result.timed_out:
        return f"stopped at the {limits.wall_s:g} s wall-clock limit (sleeping or waiting forever?)"
    if result.killed_for == "cpu":
        return f"stopped at the limit of {limits.cpu_s:g} CPU-seconds (an infinite loop?)"
    if result.killed_for == "memory":
        return f"stopped: your code used more than {limits.memory_bytes / 2**30:g} GiB of memory"
    if result.killed_for == "disk":
        return "stopped: your code wrote too much to disk"
    code = result.returncode
    if code is None or code == 0:
        return None
    if code == 128 + 9 or code == -9:
        return "the process was killed (memory or process limit?)"
    if code == 128 + 24 or code == -24:
        return f"stopped at the CPU-time limit ({limits.cpu_s} s)"
    if code > 128:
        return f"the process died with signal {code - 128} (a crash in native code?)"
    return f"the process exited with status {code} before finishing (os._exit or sys.exit in your code?)"


def summarize(component, hidden: Phase, public: Phase, limits: SandboxLimits) -> ComponentResult:
    """Points (hidden cases only) and the student-facing text of one component. Hidden cases
    show fixed texts (``judge.hidden_feedback``); public ones the judge's full diagnosis."""
    cases = hidden.cases.get(component.name, [])
    shown = public.cases.get(component.name, [])
    passed = sum(c.passed for c in cases)
    score = round(min(sum(c.points for c in cases), component.points), 4)
    lines = [f"{passed}/{len(cases)} hidden cases passed (they carry the points)"] if cases else []
    note = death_note(hidden.run, limits) if hidden.run else hidden.error
    if note:
        lines.append(note + ".")
    lines += [f"FAILED {c.case} ({c.description}): {c.message}" for c in cases if not c.passed]
    lines += [f"NOTE {c.case}: {c.note}" for c in cases if c.note]
    public_lines = []
    if public.error is None:
        public_lines.append(
            f"{sum(c.passed for c in shown)}/{len(shown)} public cases passed (the handout's; "
            "feedback only, no points)"
        )
    failed = [c for c in shown if not c.passed]
    if failed and all(IMPORT_FAILED in c.message for c in failed):
        public_lines.append("FAILED every one: your tests/adapters.py did not import (see the top)")
    else:
        public_lines += [f"FAILED {c.case}: {c.message}" for c in failed]
    public_lines += [f"NOTE {c.case}: {c.note}" for c in shown if c.note]
    text = tail("\n".join(lines + public_lines), OUTPUT_LIMIT, keep_head=True)
    result = ComponentResult(component.name, score, component.points, text, 0.0, passed, len(cases))
    result.seconds = hidden.seconds
    result.hidden_output = tail("\n".join(lines), OUTPUT_LIMIT, keep_head=True)
    result.public_output = tail("\n".join(public_lines), OUTPUT_LIMIT, keep_head=True)
    result.public_passed, result.public_total = len(shown) - len(failed), len(shown)
    result.cpu_seconds = hidden.run.cpu_seconds if hidden.run else 0.0
    return result


def tail(text: str, limit: int, keep_head: bool = False) -> str:
    text = text.strip()
    if len(text) <= limit:
        return text
    return text[:limit] + "\n[... cut ...]" if keep_head else "[... cut ...]\n" + text[-limit:]


def describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"[:1500]


def public_note(public: Phase, results: list[ComponentResult], limits: SandboxLimits) -> str:
    """What the public run (one sandbox for all components, no hidden inputs in it) says once:
    why your adapters did not import and which components that cost, why the run stopped
    early and the end of its output."""
    if public.run is None:
        return f"The public cases could not run: {public.error}"
    notes = []
    failures = [c.message for cases in public.cases.values() for c in cases if not c.passed]
    imports = sorted({m[m.index(IMPORT_FAILED) :] for m in failures if IMPORT_FAILED in m})
    if imports:
        cost = [r.name for r in results if IMPORT_FAILED in r.output and r.score < r.max_score]
        notes.append(f"{imports[0][:1000]}\nThis cost every case of: {', '.join(cost) or 'none'}.")
    stopped = [
        c.case for cases in public.cases.values() for c in cases if PAST_THE_LIMIT in c.message
    ]
    if stopped:
        notes.append(
            "Stopped at the per-case limits (CPU time counted over every process a case starts; "
            f"see each component): {', '.join(stopped)}."
        )
    note = death_note(public.run, limits)
    if note:
        notes.append(
            f"The public cases' run {note}.\nLast output of that run:\n"
            + tail(public.run.log, 1000)
        )
    return "\n".join(notes)


# --- One zip ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Setting:
    """How every sandbox of one grading runs: the rubric, the limits, where the course's files
    are, and the isolation level (None: no sandbox, trusted code only)."""

    rubric: Rubric
    limits: SandboxLimits
    course: Course
    level: Isolation | None
    budget_s: float | None = None  # wall-clock seconds for all of a zip's sandboxes together
    case_s: float = CASE_TIMEOUT_S  # the driver's limit per case, in CPU-seconds
    # Components whose hidden cases run in a sandbox of their own: the leaderboard's measured
    # ones, whose sandbox's CPU time (counted by the watchdog, outside) is their entry.
    alone: frozenset[str] = frozenset()


def seconds_of(value, key: str, rubric: Path):
    """A [limits] entry in seconds, checked (None stays None)."""
    if value is not None and not (isinstance(value, int | float) and value > 0):
        raise ValueError(f"{rubric}: [limits] {key} must be a positive number of seconds")
    return value


def protected_paths(course: Course) -> tuple[Path, ...]:
    """What the sandbox's probe must fail to read: expected values and the grader's files."""
    return (course.expected, course.root / "course")


def grade(
    zip_path: Path,
    out_dir: Path,
    rubric: Path = RUBRIC,
    course: Course = Course(),
    jobs: int = 2,
    sandbox: bool = True,
    quiet: bool = False,
    limits: SandboxLimits | None = None,
    metadata: Path | None = None,
) -> dict:
    """Grade ``zip_path``; write ``out_dir/results.json`` (always) and return its content.
    ``metadata``: Gradescope's submission_metadata.json (the rubric's ``[policy]`` reads it)."""
    started = time.monotonic()
    components: list = []
    level = None
    try:
        loaded = load_rubric(rubric)
        components = list(loaded.components)
        rubric_limits = dict(loaded.limits)
        budget_s = seconds_of(rubric_limits.pop("budget_s", None), "budget_s", rubric)
        case_s = seconds_of(rubric_limits.pop("case_cpu_s", CASE_TIMEOUT_S), "case_cpu_s", rubric)
        limits = limits or sandbox_limits(rubric_limits)
        level = isolation(protected_paths(course)) if sandbox else None
        measured = {entry.component for entry in load_settings(rubric).leaderboard.measured}
        setting = Setting(loaded, limits, course, level, budget_s, case_s, frozenset(measured))
        results, note = grade_components(zip_path, components, setting, jobs)
        report = gradescope_results(results, time.monotonic() - started, level, note)
        report = finish_report(report, results, rubric, zip_path, metadata)
    except Exception as error:  # noqa: BLE001  (the catch-all: every zip gets a result)
        message = f"grader error: {describe(error)}"
        if not quiet:
            traceback.print_exc()
        results = [ComponentResult(c.name, 0.0, c.points, message) for c in components]
        report = gradescope_results(results, time.monotonic() - started, level)
        report["output"] = message + " (tell the course staff; this is not your fault)"
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(out_dir / "results.json", report)
    if not quiet and components:
        print(points_table(results, zip_path.name))
    return report


def grade_components(
    zip_path: Path, components: list, setting: Setting, jobs: int
) -> tuple[list[ComponentResult], str]:
    """Every component's result, and a note on the public run: one sandbox runs the public
    cases of every component, then a few sandboxes the hidden ones (``hidden_phases``). The
    public run comes first and runs alone (``alone``: no sandbox that holds hidden inputs runs
    beside the one whose output the student reads, and each sandbox's writable places die or
    are wiped with it, so nothing of a hidden run reaches a later public one); the hidden runs
    follow, ``jobs`` at a time, within the submission's time budget, and only if the public
    run's driver imported the adapters in time (every case goes through them)."""
    with tempfile.TemporaryDirectory(prefix="cs336-grade-") as tmp:
        scratch = Path(tmp)
        submission = scratch / "submission"
        try:
            unpack_submission(zip_path, submission)
        except UnsafeArchive as error:
            refused = f"Submission refused, nothing was run: {error}"
            return [ComponentResult(c.name, 0.0, c.points, refused) for c in components], ""
        names = [c.name for c in components]
        groups = hidden_groups(names, setting.alone)
        budget = Budget(
            setting.budget_s or (len(names) + 1) * setting.limits.wall_s, len(groups) + 1
        )
        public = run_phase(names, False, submission, scratch, setting, budget)
        if public.import_timeout:
            hidden = {n: Phase(None, {}, IMPORT_NOT_ENDED) for n in names}
        else:
            run_hidden = partial(
                run_phase,
                hidden=True,
                submission=submission,
                scratch=scratch,
                setting=setting,
                budget=budget,
            )
            hidden = hidden_phases(groups, run_hidden, jobs)
    results = [
        summarize(c, hidden[c.name], public, hidden[c.name].limits or setting.limits)
        for c in components
    ]
    note = public_note(public, results, public.limits or setting.limits)
    return results, "\n".join(text for text in (public.import_timeout, note) if text)


def hidden_groups(names: list[str], alone: frozenset[str]) -> list[list[str]]:
    """The hidden sandboxes' components: every component together (the driver runs each in a
    process of its own, with per-case limits over all its processes, so one that hangs or
    crashes costs only its own cases), but those in ``alone`` each in a sandbox of its own."""
    together = [n for n in names if n not in alone]
    return ([together] if together else []) + [[n] for n in names if n in alone]


def hidden_phases(groups: list[list[str]], run_hidden, jobs: int) -> dict[str, Phase]:
    """Each component's hidden phase: ``run_hidden(group)`` for every group, ``jobs`` at a time,
    then, alone, each component of a group whose sandbox stopped before that component's cases
    all wrote outputs (a limit of the sandbox's, an exit of the driver) or failed on the
    grader's side: it gets what it would have had in a sandbox of its own."""
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        shared = list(pool.map(run_hidden, groups))
    phases, again = {}, []
    for group, phase in zip(groups, shared, strict=True):
        if len(group) == 1:
            phases[group[0]] = phase
            continue
        for name in group:
            if unfinished(phase, name):
                again.append([name])
            else:  # its cases' outcomes are its own, whatever stopped the sandbox later
                phases[name] = replace(phase, run=None, cases={name: phase.cases[name]})
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        phases |= {
            group[0]: phase for group, phase in zip(again, pool.map(run_hidden, again), strict=True)
        }
    return phases


def unfinished(phase: Phase, name: str) -> bool:
    """Whether ``name``'s cases in a shared sandbox lack outputs because the sandbox stopped
    (or the grader failed): the driver writes every case's outputs, a message at worst."""
    if phase.run is None or name not in phase.cases:
        return True
    stopped = phase.run.returncode != 0 or phase.run.timed_out or phase.run.killed_for
    return bool(stopped) and any(c.message.startswith(NO_OUTPUTS) for c in phase.cases[name])


def gradescope_results(
    results: list[ComponentResult], seconds: float, level: Isolation | None, note: str = ""
) -> dict:
    where = (
        f" in a sandbox: {level.describe()}."
        if level
        else " WITHOUT a sandbox (trusted code only)."
    )
    report = {
        "score": round(sum(r.score for r in results), 4),
        "execution_time": round(seconds, 1),
        "output": f"Graded {len(results)} components{where} Points come from hidden cases only; "
        "the public cases (the handout's) are feedback." + (f"\n{note}" if note else ""),
        "tests": [
            {"name": r.name, "score": r.score, "max_score": r.max_score, "output": r.output}
            for r in results
        ],
    }
    if level:
        report["extra_data"] = {
            "isolation": {
                "mode": level.mode,
                "enforced": list(level.enforced),
                "missing": list(level.missing),
            }
        }
    return report


def points_table(results: list[ComponentResult], title: str) -> str:
    width = max(len("component"), *(len(r.name) for r in results))
    rows = [title, f"{'component':<{width}}  {'score':>6}  {'max':>5}  {'cases':>7}  {'time':>6}"]
    for r in results:
        rows.append(
            f"{r.name:<{width}}  {r.score:>6.2f}  {r.max_score:>5g}  "
            f"{f'{r.passed}/{r.total}':>7}  {r.seconds:>5.1f}s"
        )
    total = sum(r.score for r in results)
    rows.append(f"{'total':<{width}}  {total:>6.2f}  {sum(r.max_score for r in results):>5g}")
    return "\n".join(rows)


def write_json(path: Path, data: dict) -> None:
    """Write ``data`` atomically (a reader sees the old file or the new one, never half)."""
    with tempfile.NamedTemporaryFile(
        "w", dir=path.parent, prefix=f".{path.name}.", delete=False
    ) as stream:
        json.dump(data, stream, indent=2)
        stream.write("\n")
    os.replace(stream.name, path)


# --- A folder of zips ---------------------------------------------------------------------------


def grade_batch(folder: Path, out_dir: Path, jobs: int = 2, **kwargs) -> Path:
    """Grade every zip in ``folder`` (``jobs`` at a time); write ``out_dir/grades.csv`` and
    ``summary.txt`` (``course/grading/export.py``)."""
    zips = sorted(folder.glob("*.zip"))
    if not zips:
        raise FileNotFoundError(f"no .zip files in {folder}")

    def one(zip_path: Path) -> dict:
        report = grade(zip_path, out_dir / zip_path.stem, jobs=1, quiet=True, **kwargs)
        print(f"{zip_path.name}: {report['score']:g}", flush=True)
        return report

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        reports = list(pool.map(one, zips))
    return write_batch_outputs({z.name: r for z, r in zip(zips, reports, strict=True)}, out_dir)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cs336-grade", description=__doc__.splitlines()[0])
    parser.add_argument("submission", type=Path, help="a zip, or a folder of zips with --batch")
    parser.add_argument("--batch", action="store_true", help="grade every zip; write grades.csv")
    parser.add_argument("--out", type=Path, help="where results go (default: grading/<zip name>/)")
    parser.add_argument("--rubric", type=Path, default=RUBRIC)
    parser.add_argument(
        "--jobs", type=int, default=2, help="components (zips with --batch) at once"
    )
    parser.add_argument(
        "--expected", type=Path, help="expected values (default: course/cases/hidden/expected)"
    )
    parser.add_argument(
        "--no-sandbox",
        action="store_true",
        help="run the driver without a sandbox: ONLY for trusted code (the reference in CI)",
    )
    parser.add_argument(
        "--expect",
        choices=("full", "zero"),
        help="exit 1 unless full marks / zero (CI smoke tests)",
    )
    args = parser.parse_args(argv)
    sandbox = not args.no_sandbox
    course = Course(expected=args.expected) if args.expected else Course()
    if not sandbox:
        print(
            "WARNING: --no-sandbox: the submission runs unconfined; use it for trusted code only.",
            file=sys.stderr,
        )
    else:
        try:
            level = isolation(protected_paths(course))
        except SandboxUnavailable as error:
            print(f"cs336-grade: refusing to grade without a sandbox: {error}", file=sys.stderr)
            return 2
        print(f"isolation: {level.describe()}", file=sys.stderr)
    options = {"rubric": args.rubric, "course": course, "sandbox": sandbox}
    if args.batch:
        try:
            csv_path = grade_batch(
                args.submission, args.out or Path("grading"), args.jobs, **options
            )
        except FileNotFoundError as error:
            print(f"cs336-grade: {error}", file=sys.stderr)
            return 1
        print(f"wrote {csv_path}")
        return 0
    if not args.submission.is_file():
        parser.error(f"no such file: {args.submission}")
    out = args.out or Path("grading") / args.submission.stem
    report = grade(args.submission, out, jobs=args.jobs, **options)
    print(f"results: {out / 'results.json'}")
    return check_expectation(report, args.expect)


def check_expectation(report: dict, expect: str | None) -> int:
    maximum = sum(t.get("max_score", 0) for t in report["tests"])
    if "grader error" in report["output"] or not report["tests"]:
        print(f"cs336-grade: {report['output']}", file=sys.stderr)
        return 1
    if expect == "full" and report["score"] < maximum:
        print(f"expected full marks ({maximum:g}), got {report['score']:g}", file=sys.stderr)
        return 1
    if expect == "zero" and report["score"] > 0:
        print(f"expected zero, got {report['score']:g}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
