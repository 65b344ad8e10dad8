"""How long the test suites take: ``pytest`` in a fresh process, as a user runs it.

``benchmark`` is ``make bench``'s row (the repository's suite). ``python -m benchmarks.suite``
(``make bench-suite``) times, one after the other on this machine, the repository's
``uv run pytest``, the handout's whole suite with the reference solution in place of the
skeletons (the shipped tests and fixtures, as ``make check-solutions`` builds them), and, with
``--upstream PATH``, the suite of an upstream checkout (with its solution filled in) under this
environment's Python. Each row gives the wall time and pytest's own "in N s" test time; timings
on a shared machine are noisy, so compare rows of one run.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
# The repository's default suite (``-m "not slow"``) must take less wall time than this.
SUITE_TARGET_SECONDS = 60.0


def benchmark(pytest_args: list[str] | None = None, log=print) -> dict[str, Any]:
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *(pytest_args or [])]
    log(f"test suite: {' '.join(command[1:])}")
    start = time.perf_counter()
    finished = subprocess.run(
        command, capture_output=True, text=True, check=False
    )  # failures are reported
    seconds = time.perf_counter() - start
    summary = counts_line(finished.stdout) or finished.stderr.strip()[-200:]
    counts = {
        kind: int(n)
        for n, kind in re.findall(
            r"(\d+) (passed|failed|errors?|advice|skipped|xfailed|xpassed)", summary
        )
    }
    target = " ".join(pytest_args or ["(all)"])
    row = {
        "benchmark": "test suite wall time",
        "input": target,
        "ours": f"{seconds:.1f} s",
        "peer": "",
        "speed ours/peer": "",
        "spread s (ours; peer)": summary.strip("= "),
        "seconds": seconds,
        "max_seconds": SUITE_TARGET_SECONDS,
    }
    return {
        "command": command,
        "seconds": seconds,
        "exit_code": finished.returncode,
        "summary": summary,
        "counts": counts,
        "rows": [row],
    }


def counts_line(stdout: str) -> str | None:
    """pytest's count line ("3 passed, 1 advice in 2.0s"), which the suite's summary of what
    counts follows."""
    counts = [
        line
        for line in stdout.splitlines()
        if re.search(r"(passed|failed|error|advice).* in [0-9.]+s", line)
    ]
    return counts[-1].strip("= ") if counts else None


@dataclass(frozen=True)
class SuiteTime:
    name: str
    wall: float
    test_seconds: float | None  # pytest's "in N s", None when it printed none
    summary: str
    exit_code: int
    cpu: float = 0.0  # user + system seconds of the run's processes (0 where the OS keeps none)


def children_cpu() -> float:
    """CPU seconds of this process's finished children (user + system)."""
    times = os.times()
    return times.children_user + times.children_system


def time_suite(name: str, command: list[str], cwd: Path, env: dict[str, str]) -> SuiteTime:
    print(f"timing {name}: {' '.join(command)} (in {cwd})", file=sys.stderr, flush=True)
    start, cpu_before = time.perf_counter(), children_cpu()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    wall, cpu = time.perf_counter() - start, children_cpu() - cpu_before
    summary = counts_line(done.stdout) or (done.stdout + done.stderr).strip()[-200:]
    found = re.search(r" in ([0-9.]+)s", summary)
    test_seconds = float(found.group(1)) if found else None
    return SuiteTime(name, wall, test_seconds, summary, done.returncode, cpu)


def handout_suite() -> SuiteTime:
    """The shipped tests and fixtures with the reference's ``cs336_basics`` and adapters, run
    by an interpreter that sees that tree and the environment's packages only."""
    from course.handout.check_solutions import isolated_env, stage_solution

    with tempfile.TemporaryDirectory(prefix="bench-handout-") as scratch:
        root = Path(scratch)
        stage_solution(REPO_ROOT, root, set())
        command = [sys.executable, "-S", "-m", "pytest", "tests", "-q", "-p", "no:cacheprovider"]
        return time_suite("handout + reference solution", command, root, isolated_env(root))


def upstream_suite(checkout: Path) -> SuiteTime:
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    return time_suite(f"upstream ({checkout})", command, checkout, env)


def table(rows: list[SuiteTime]) -> str:
    upstream = next((r for r in rows if r.name.startswith("upstream")), None)
    lines = [
        f"{'suite':<44} {'wall s':>7} {'test s':>7} {'CPU s':>7} {'x upstream':>10}  pytest says"
    ]
    for row in rows:
        test = "" if row.test_seconds is None else f"{row.test_seconds:7.1f}"
        ratio = ""
        if upstream and upstream.test_seconds and row.test_seconds is not None:
            ratio = f"{row.test_seconds / upstream.test_seconds:9.2f}x"
        lines.append(
            f"{row.name[:44]:<44} {row.wall:7.1f} {test:>7} {row.cpu:7.1f} {ratio:>10}  {row.summary}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="the suites' times, side by side")
    parser.add_argument(
        "--upstream",
        type=Path,
        help="an upstream checkout (assignment1-basics) with its solution filled in",
    )
    args = parser.parse_args(argv)
    if args.upstream is not None and not (args.upstream / "tests").is_dir():
        parser.error(f"--upstream {args.upstream}: no tests/ folder there")
    pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    rows = [time_suite("repository (uv run pytest)", pytest, REPO_ROOT, dict(os.environ))]
    rows.append(handout_suite())
    if args.upstream is not None:
        rows.append(upstream_suite(args.upstream.resolve()))
    print(table(rows))
    if args.upstream is None:
        print("upstream: not timed (no checkout given; make bench-suite UPSTREAM=path/to/it)")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    cores = os.cpu_count()
    print(f"{cores} cores" + ("" if load is None else f", load average {load:.1f} at the end"))
    repository = rows[0]
    met = repository.wall < SUITE_TARGET_SECONDS
    print(
        f"repository suite under {SUITE_TARGET_SECONDS:g} s of wall time: {'yes' if met else 'NO'}"
    )
    return 0 if all(r.exit_code == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
