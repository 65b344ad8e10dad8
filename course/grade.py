"""Grade submission zips in isolation: ``cs336-grade x.zip`` (``make grade SUBMISSION=x.zip``).

For one zip the grader

1. unpacks it safely into a fresh workspace: absolute paths, ``..``, links, special files,
   too many files, too many bytes and compression-ratio bombs are refused;
2. takes only ``cs336_basics/`` and ``tests/adapters.py`` from it and puts them beside the
   instructor's pristine ``tests/`` and ``fixtures/`` (never the student's copies);
3. runs each rubric component (``course/rubric.toml``) as ``python -m pytest -k <select>`` in its
   own subprocess and its own copy of the workspace, with a wall-clock timeout, CPU, address
   space and file-size limits, no network, and — where user namespaces are available — every
   file system read-only except that copy;
4. always writes a Gradescope ``results.json`` (``score``, ``tests``: name, score, max_score,
   output) and prints a points table, whatever the student code does: syntax errors, hangs,
   memory exhaustion, crashes of the interpreter, edits to the tests or fixtures (that
   component scores zero).

``--batch FOLDER`` grades every ``*.zip`` in a folder in parallel and writes a CSV.

Threat model: this contains accidents and crude escapes (writes outside the workspace, network,
resource exhaustion, tampering with test files on disk). Student code runs in the same process
as the tests, so a determined attacker could still patch the test machinery in memory.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import hashlib
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import tomllib
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path, PurePosixPath

from course.handout import REPO_ROOT, is_instructor_test, source_files
from course.pytest_outcomes import summarize

RUBRIC = Path(__file__).with_name("rubric.toml")
PLUGIN = Path(__file__).with_name("pytest_outcomes.py")
PACKAGE = "cs336_basics"
ADAPTERS = "tests/adapters.py"
OUTPUT_LIMIT = 6000
# Runs the command with every mount read-only except the workspace (argument 1).
SANDBOX_SCRIPT = r"""
ws="$1"; shift
mount --bind "$ws" "$ws" || exit 97
# multiprocessing needs a writable /dev/shm: a fresh one, private to this namespace.
mount -t tmpfs -o size=512m,mode=1777 cs336-shm /dev/shm 2>/dev/null
for mp in $(cut -d' ' -f5 /proc/self/mountinfo); do
    [ "$mp" = "$ws" ] || [ "$mp" = /dev/shm ] || mount -o remount,bind,ro "$mp" 2>/dev/null
done
[ -w / ] && exit 98
cd "$ws" || exit 97  # the old working directory still points into the read-only mount
exec "$@"
"""
# Sets the resource limits (argument 1: JSON {RLIMIT name: value}), then becomes the command.
LIMITS_LAUNCHER = """
import json, os, resource, sys
for name, value in json.loads(sys.argv[1]).items():
    resource.setrlimit(getattr(resource, name), (value, value))
os.execvp(sys.argv[2], sys.argv[2:])
"""


@dataclass(frozen=True)
class Component:
    name: str
    points: float
    select: str


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 300
    cpu_s: int = 600
    memory_gib: float = 8
    file_size_mib: int = 256
    max_files: int = 500
    max_bytes: int = 20 * 2**20
    max_ratio: int = 200


@dataclass
class ComponentResult:
    component: Component
    score: float
    passed: int
    total: int
    output: str
    nodeids: list[str] = field(default_factory=list)
    seconds: float = 0.0


class UnsafeArchive(ValueError):
    """The zip is refused as a whole: nothing in it is run."""


def load_rubric(path: Path = RUBRIC) -> tuple[list[Component], Limits]:
    data = tomllib.loads(path.read_text())
    components = [
        Component(c["name"], float(c["points"]), c["select"]) for c in data.get("component", [])
    ]
    if not components:
        raise ValueError(f"{path}: the rubric has no [[component]] entries")
    names = [c.name for c in components]
    if len(set(names)) != len(names):
        raise ValueError(f"{path}: component names repeat: {names}")
    known = {f for f in Limits.__dataclass_fields__}
    unknown = set(data.get("limits", {})) - known
    if unknown:
        raise ValueError(f"{path}: unknown [limits] keys: {sorted(unknown)}")
    return components, Limits(**data.get("limits", {}))


# --- Unpacking ----------------------------------------------------------------------------------


def check_member(info: zipfile.ZipInfo, limits: Limits) -> PurePosixPath | None:
    """The member's safe relative path (None for a directory), or ``UnsafeArchive``."""
    name = info.filename
    mode = info.external_attr >> 16
    if stat.S_ISLNK(mode):
        raise UnsafeArchive(f"{name!r} is a symbolic link")
    if stat.S_IFMT(mode) and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise UnsafeArchive(f"{name!r} is not a regular file")
    if "\\" in name or name.startswith("/") or (len(name) > 1 and name[1] == ":") or "\0" in name:
        raise UnsafeArchive(f"{name!r} is an absolute or Windows-style path")
    path = PurePosixPath(name)
    if ".." in path.parts:
        raise UnsafeArchive(f"{name!r} points outside the submission (..)")
    if info.flag_bits & 0x1:
        raise UnsafeArchive(f"{name!r} is encrypted")
    if info.file_size > 2**20 and info.file_size > limits.max_ratio * max(info.compress_size, 1):
        raise UnsafeArchive(
            f"{name!r} expands {info.file_size / max(info.compress_size, 1):.0f}x (a zip bomb?)"
        )
    return None if info.is_dir() else path


def safe_extract(zip_path: Path, dest: Path, limits: Limits) -> list[str]:
    """Extract ``zip_path`` into ``dest`` enforcing ``limits``; return the file names."""
    try:
        archive = zipfile.ZipFile(zip_path)
    except (zipfile.BadZipFile, OSError) as error:
        raise UnsafeArchive(f"{zip_path} is not a readable zip: {error}") from None
    with archive:
        members = archive.infolist()
        if len(members) > limits.max_files:
            raise UnsafeArchive(f"{len(members)} entries; at most {limits.max_files} are allowed")
        checked = [(m, check_member(m, limits)) for m in members]
        declared = sum(m.file_size for m in members)
        if declared > limits.max_bytes:
            raise UnsafeArchive(
                f"{declared} bytes unpacked; at most {limits.max_bytes} are allowed"
            )
        names: list[str] = []
        written = 0
        for info, path in checked:
            if path is None:
                continue
            target = dest.joinpath(*path.parts)
            if target.exists():
                raise UnsafeArchive(f"{info.filename!r} appears twice")
            target.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(info) as source, open(target, "wb") as sink:
                while chunk := source.read(1 << 16):
                    written += len(chunk)  # the real size, whatever the header claimed
                    if written > limits.max_bytes:
                        raise UnsafeArchive(f"more than {limits.max_bytes} bytes unpacked")
                    sink.write(chunk)
            names.append(path.as_posix())
    return names


def find_submission_root(unpacked: Path) -> Path:
    """The folder holding ``cs336_basics/``: the top of the zip or one folder down."""
    candidates = [unpacked] + sorted(p for p in unpacked.iterdir() if p.is_dir())
    for candidate in candidates:
        if (candidate / PACKAGE).is_dir():
            return candidate
    raise UnsafeArchive(f"no {PACKAGE}/ folder in the submission (pack it with `make submission`)")


# --- Workspace and sandbox ----------------------------------------------------------------------


def pristine_files(instructor_root: Path) -> list[Path]:
    """Instructor files every workspace gets: tests (minus toolchain tests), fixtures, pytest config."""
    return [
        p
        for p in source_files(instructor_root)
        if (
            p.parts[0] == "fixtures"
            or (
                p.parts[0] == "tests"
                and p.as_posix() != ADAPTERS
                and not is_instructor_test(instructor_root / p)
            )
        )
    ] + [Path("pyproject.toml")]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def prepare_workspace(
    instructor_root: Path, submission_root: Path, workspace: Path
) -> dict[str, str]:
    """Fill ``workspace``; return the hashes of the pristine files in it."""
    hashes = {}
    for rel in pristine_files(instructor_root):
        target = workspace / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(instructor_root / rel, target)
        hashes[rel.as_posix()] = digest(target)
    shutil.copytree(
        submission_root / PACKAGE,
        workspace / PACKAGE,
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    adapters = submission_root / ADAPTERS
    if adapters.is_file():
        shutil.copyfile(adapters, workspace / ADAPTERS)
    return hashes


def keyword_match(expression: str, nodeid: str) -> bool:
    """Approximately pytest's ``-k``: each name matches as a case-insensitive substring of the
    node id. Used only to pick which test files a component's run needs to import."""
    python = []
    for token in re.findall(r"\(|\)|[^\s()]+", expression):
        python.append(
            token if token in ("(", ")", "and", "or", "not") else f"{token.lower()!r} in s"
        )
    return bool(eval(" ".join(python), {"__builtins__": {}}, {"s": nodeid.lower()}))


@cache
def collected_nodeids(instructor_root: Path, plugin_autoload: bool = True) -> tuple[str, ...]:
    """Every test id of the instructor's suite (collected once, from the reference code)."""
    with tempfile.TemporaryDirectory(prefix="cs336-collect-") as tmp:
        shutil.copyfile(PLUGIN, Path(tmp) / PLUGIN.name)
        outcomes = Path(tmp) / "collected.jsonl"
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env.update(
            PYTHONPATH=f"{tmp}:{instructor_root}",
            CS336_OUTCOMES=str(outcomes),
            PYTHONDONTWRITEBYTECODE="1",
        )
        if not plugin_autoload:
            env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        files = sorted(
            {
                rel.as_posix()
                for rel in pristine_files(instructor_root)
                if rel.parts[0] == "tests" and rel.name.startswith("test_") and rel.suffix == ".py"
            }
        )
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "--collect-only",
                "-p",
                "pytest_outcomes",
                "-p",
                "no:cacheprovider",
                *files,
            ],
            cwd=instructor_root,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        return tuple(summarize(outcomes))


def test_files_for(select: str, nodeids: tuple[str, ...]) -> list[str]:
    """The test files a ``-k select`` run needs; all of ``tests`` when nothing is known."""
    files = sorted({n.split("::")[0] for n in nodeids if "::" in n and keyword_match(select, n)})
    return files or ["tests"]


@cache
def namespaces_available() -> bool:
    """Whether ``unshare`` can give us a private network and read-only mounts here."""
    if not shutil.which("unshare"):
        return False
    with tempfile.TemporaryDirectory() as probe:
        real = os.path.realpath(probe)
        result = subprocess.run(
            ["unshare", "-rnm", "--", "sh", "-c", SANDBOX_SCRIPT, "sandbox", real, "true"],
            capture_output=True,
        )
    return result.returncode == 0


def with_limits(command: list[str], limits: Limits) -> list[str]:
    """``command`` run under the address-space, CPU-time, file-size and core-dump limits."""
    rlimits = {
        "RLIMIT_AS": int(limits.memory_gib * 2**30),
        "RLIMIT_CPU": int(limits.cpu_s),
        "RLIMIT_FSIZE": int(limits.file_size_mib * 2**20),
        "RLIMIT_CORE": 0,
    }
    return [sys.executable, "-S", "-c", LIMITS_LAUNCHER, json.dumps(rlimits), *command]


def run_component(
    component: Component,
    instructor_root: Path,
    submission_root: Path,
    scratch: Path,
    limits: Limits,
    sandbox: bool,
    plugin_autoload: bool = True,
) -> ComponentResult:
    """Grade one component in its own workspace and process.

    ``plugin_autoload=False`` keeps pytest from loading installed plugins (hypothesis,
    jaxtyping): faster, for suites that do not need them."""
    started = time.monotonic()
    workspace = Path(os.path.realpath(scratch / component.name))
    workspace.mkdir(parents=True)
    hashes = prepare_workspace(instructor_root, submission_root, workspace)
    private = workspace / ".grader"
    private.mkdir()
    shutil.copyfile(PLUGIN, private / PLUGIN.name)
    for name in ("home", "tmp"):
        (private / name).mkdir()
    outcomes = private / "outcomes.jsonl"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(private / "home"),
        "TMPDIR": str(private / "tmp"),
        "PYTHONPATH": f"{private}:{workspace}",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "CS336_OUTCOMES": str(outcomes),
        "CS336_NO_NETWORK": "1",
        "OMP_NUM_THREADS": "1",
        "MPLBACKEND": "Agg",
        "HF_HUB_OFFLINE": "1",
    }
    if not plugin_autoload:
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "pytest_outcomes",
        "-p",
        "no:cacheprovider",
        "-k",
        component.select,
        f"--basetemp={private / 'tmp' / 'pytest'}",
        *test_files_for(component.select, collected_nodeids(instructor_root, plugin_autoload)),
    ]
    if sandbox:
        command = [
            "unshare",
            "-rnm",
            "--",
            "sh",
            "-c",
            SANDBOX_SCRIPT,
            "sandbox",
            str(workspace),
            *command,
        ]
    command = with_limits(command, limits)
    log = private / "log.txt"
    with open(log, "wb") as log_stream:
        process = subprocess.Popen(
            command,
            cwd=workspace,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log_stream,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            returncode = process.wait(timeout=limits.timeout_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            returncode = process.wait()
            timed_out = True
    # Anything the tests left behind in the process group goes too.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    tampered = sorted(
        rel
        for rel, h in hashes.items()
        if not (workspace / rel).is_file() or digest(workspace / rel) != h
    )
    result = score_component(
        component,
        summarize(outcomes),
        returncode,
        timed_out,
        tampered,
        limits,
        log.read_text(errors="replace"),
    )
    result.seconds = time.monotonic() - started
    return result


def _death(returncode: int, timed_out: bool, limits: Limits) -> str | None:
    if timed_out:
        return f"the tests were stopped after the {limits.timeout_s:g} s time limit (an infinite loop?)"
    if returncode < 0:
        name = signal.Signals(-returncode).name
        why = {
            "SIGSEGV": "a segmentation fault",
            "SIGXCPU": "the CPU-time limit",
            "SIGKILL": "a kill (memory?)",
        }
        return f"the test process died with {name} ({why.get(name, 'a signal')})"
    if returncode in (97, 98):
        return "the grading sandbox could not be set up (grader problem, not yours)"
    return None


def score_component(
    component: Component,
    outcomes: dict[str, dict],
    returncode: int,
    timed_out: bool,
    tampered: list[str],
    limits: Limits,
    log: str,
) -> ComponentResult:
    tests = {k: v for k, v in outcomes.items() if v["outcome"] != "collect_error"}
    collect_errors = {k: v for k, v in outcomes.items() if v["outcome"] == "collect_error"}
    passed = sum(v["outcome"] == "passed" for v in tests.values())
    lines: list[str] = []
    death = _death(returncode, timed_out, limits)
    if death:
        lines.append(death + ".")
    if tampered:
        lines.append(
            "Your code changed the grader's tests or fixtures, so this component scores 0: "
            + ", ".join(tampered[:5])
        )
        passed = 0
    for nodeid, result in collect_errors.items():
        lines.append(
            f"Could not load {nodeid} (an import or syntax error in your code?):\n"
            + _tail(result["message"], 1500)
        )
    if collect_errors:
        passed = 0
    if not outcomes and not death:
        if returncode == 5:
            lines.append(
                f"No test matched -k {component.select!r} (rubric problem, tell the course staff)."
            )
        else:
            lines.append("pytest did not run:\n" + _tail(log, 1500))
    total = len(tests)
    for nodeid, result in sorted(tests.items()):
        if result["outcome"] == "passed":
            continue
        if result["outcome"] == "running":
            detail = "was running when the process stopped"
        elif result["outcome"] == "not run":
            detail = "never ran (the process stopped earlier)"
        else:
            detail = result["outcome"] + ":\n" + _tail(result["message"], 1200)
        lines.append(f"FAILED {nodeid}: {detail}")
    score = round(component.points * passed / total, 4) if total else 0.0
    header = f"{passed}/{total} tests passed"
    output = _tail("\n".join([header, *lines]), OUTPUT_LIMIT, keep_head=True)
    return ComponentResult(component, score, passed, total, output, sorted(tests))


def _tail(text: str, limit: int, keep_head: bool = False) -> str:
    text = text.strip()
    if len(text) <= limit:
        return text
    return text[:limit] + "\n[... cut ...]" if keep_head else "[... cut ...]\n" + text[-limit:]


# --- Grading one zip or a folder ----------------------------------------------------------------


def grade(
    zip_path: Path,
    out_dir: Path,
    rubric: Path = RUBRIC,
    instructor_root: Path = REPO_ROOT,
    jobs: int = 2,
    sandbox: bool | None = None,
    limits: Limits | None = None,
    quiet: bool = False,
    plugin_autoload: bool = True,
) -> dict:
    """Grade ``zip_path``; write ``out_dir/results.json`` and return its content."""
    components, rubric_limits = load_rubric(rubric)
    limits = limits or rubric_limits
    sandbox = namespaces_available() if sandbox is None else sandbox
    started = time.monotonic()
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="cs336-grade-") as tmp:
        scratch = Path(tmp)
        try:
            safe_extract(zip_path, scratch / "unpacked", limits)
            submission_root = find_submission_root(scratch / "unpacked")
        except UnsafeArchive as error:
            results = [
                ComponentResult(c, 0.0, 0, 0, f"Submission refused, nothing was run: {error}")
                for c in components
            ]
        else:
            collected_nodeids(instructor_root, plugin_autoload)  # once, before the workers need it
            with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
                results = list(
                    pool.map(
                        lambda c: run_component(
                            c,
                            instructor_root,
                            submission_root,
                            scratch / "runs",
                            limits,
                            sandbox,
                            plugin_autoload,
                        ),
                        components,
                    )
                )
    report = gradescope_results(results, sandbox, time.monotonic() - started)
    write_json(out_dir / "results.json", report)
    if not quiet:
        print(points_table(results, zip_path.name))
        for warning in overlap_warnings(results):
            print(f"warning: {warning}")
    return report


def gradescope_results(results: list[ComponentResult], sandbox: bool, seconds: float) -> dict:
    score = round(sum(r.score for r in results), 4)
    return {
        "score": score,
        "execution_time": round(seconds, 1),
        "output": f"Graded {len(results)} components "
        + (
            "in a sandbox (no network, read-only file system)."
            if sandbox
            else "without namespaces (network blocked in-process)."
        ),
        "tests": [
            {
                "name": r.component.name,
                "score": r.score,
                "max_score": r.component.points,
                "output": r.output,
            }
            for r in results
        ],
    }


def overlap_warnings(results: list[ComponentResult]) -> list[str]:
    owners: dict[str, list[str]] = {}
    for r in results:
        for nodeid in r.nodeids:
            owners.setdefault(nodeid, []).append(r.component.name)
    return [
        f"{nodeid} counts for several components: {', '.join(names)}"
        for nodeid, names in sorted(owners.items())
        if len(names) > 1
    ]


def points_table(results: list[ComponentResult], title: str) -> str:
    width = max(len("component"), *(len(r.component.name) for r in results))
    rows = [
        f"{title}",
        f"{'component':<{width}}  {'score':>6}  {'max':>5}  {'tests':>7}  {'time':>6}",
    ]
    for r in results:
        rows.append(
            f"{r.component.name:<{width}}  {r.score:>6.2f}  {r.component.points:>5g}  "
            f"{f'{r.passed}/{r.total}':>7}  {r.seconds:>5.1f}s"
        )
    total = sum(r.score for r in results)
    maximum = sum(r.component.points for r in results)
    rows.append(f"{'total':<{width}}  {total:>6.2f}  {maximum:>5g}")
    return "\n".join(rows)


def write_json(path: Path, data: dict) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(partial, path)


def grade_batch(folder: Path, out_dir: Path, jobs: int, **kwargs) -> Path:
    """Grade every zip in ``folder`` (``jobs`` at a time); write ``out_dir/grades.csv``."""
    zips = sorted(folder.glob("*.zip"))
    if not zips:
        raise FileNotFoundError(f"no .zip files in {folder}")
    components, _ = load_rubric(kwargs.get("rubric", RUBRIC))

    def one(zip_path: Path) -> dict:
        report = grade(zip_path, out_dir / zip_path.stem, jobs=1, quiet=True, **kwargs)
        print(f"{zip_path.name}: {report['score']:g}", flush=True)
        return report

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        reports = list(pool.map(one, zips))
    csv_path = out_dir / "grades.csv"
    partial = csv_path.with_name(csv_path.name + ".partial")
    with open(partial, "w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(["submission", "total", *(c.name for c in components)])
        for zip_path, report in zip(zips, reports, strict=False):
            writer.writerow(
                [zip_path.name, report["score"], *(t["score"] for t in report["tests"])]
            )
    os.replace(partial, csv_path)
    return csv_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cs336-grade", description=__doc__.splitlines()[0])
    parser.add_argument(
        "submission", type=Path, help="a submission zip, or a folder of zips with --batch"
    )
    parser.add_argument(
        "--batch", action="store_true", help="grade every zip in the folder; write grades.csv"
    )
    parser.add_argument("--out", type=Path, help="where results go (default: grading/<zip name>/)")
    parser.add_argument("--rubric", type=Path, default=RUBRIC)
    parser.add_argument(
        "--jobs", type=int, default=2, help="components (or zips with --batch) at a time"
    )
    parser.add_argument(
        "--expect",
        choices=("full", "zero"),
        help="exit 1 unless the score is full marks / zero (CI smoke tests)",
    )
    args = parser.parse_args(argv)
    try:
        if args.batch:
            out = args.out or Path("grading")
            print(f"wrote {grade_batch(args.submission, out, args.jobs, rubric=args.rubric)}")
            return 0
        if not args.submission.is_file():
            parser.error(f"no such file: {args.submission}")
        out = args.out or Path("grading") / args.submission.stem
        report = grade(args.submission, out, rubric=args.rubric, jobs=args.jobs)
    except (FileNotFoundError, ValueError) as error:
        print(f"cs336-grade: {error}", file=sys.stderr)
        return 1
    print(f"results: {out / 'results.json'}")
    maximum = sum(t["max_score"] for t in report["tests"])
    if args.expect == "full" and report["score"] < maximum:
        print(f"expected full marks ({maximum:g}), got {report['score']:g}", file=sys.stderr)
        return 1
    if args.expect == "zero" and report["score"] > 0:
        print(f"expected zero, got {report['score']:g}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
