"""The test suite's wall time: ``pytest`` in a fresh process, as a user runs it."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from typing import Any


def benchmark(pytest_args: list[str] | None = None, log=print) -> dict[str, Any]:
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *(pytest_args or [])]
    log(f"test suite: {' '.join(command[1:])}")
    start = time.perf_counter()
    finished = subprocess.run(
        command, capture_output=True, text=True, check=False
    )  # failures are reported
    seconds = time.perf_counter() - start
    lines = finished.stdout.strip().splitlines()
    summary = lines[-1] if lines else finished.stderr.strip()[-200:]
    counts = {
        kind: int(n)
        for n, kind in re.findall(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed)", summary)
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
        "max_seconds": 90.0,
    }
    return {
        "command": command,
        "seconds": seconds,
        "exit_code": finished.returncode,
        "summary": summary,
        "counts": counts,
        "rows": [row],
    }
