"""Timing discipline shared by every benchmark.

Contenders run *interleaved* (A, B, A, B, ... with the order rotated each round), so slow
drift of the machine (thermal, other load) hits both sides alike; each reports the median and
the spread (min..max) of its repetitions. Peak memory is measured in a fresh child process
(its ``ru_maxrss``), so one contender's allocations never count against another's; the peak of
the whole process tree (the child and its workers together, sampled) is measured beside it.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import platform
import resource
import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psutil

from cs336_basics.atomic_write import atomic_writer


@dataclass(frozen=True)
class Timing:
    median: float
    low: float
    high: float
    samples: list[float]

    @classmethod
    def of(cls, samples: list[float]) -> Timing:
        return cls(statistics.median(samples), min(samples), max(samples), samples)


def interleaved(
    contenders: dict[str, Callable[[], object]], repeats: int, warmup: int = 1
) -> dict[str, Timing]:
    """Wall-clock seconds of each contender over ``repeats`` interleaved rounds."""
    names = list(contenders)
    for _ in range(warmup):
        for name in names:
            contenders[name]()
    samples: dict[str, list[float]] = {name: [] for name in names}
    for round_index in range(repeats):
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            start = time.perf_counter()
            contenders[name]()
            samples[name].append(time.perf_counter() - start)
    return {name: Timing.of(values) for name, values in samples.items()}


def _peak_resident_bytes() -> int:
    """The largest resident set of this process or any of its finished worker processes."""
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss is bytes on macOS, KiB on Linux
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale
    try:
        # Linux keeps ru_maxrss across exec, so a spawned child would report its parent's peak;
        # VmHWM starts afresh with the new program.
        status = Path("/proc/self/status").read_text()
        own = next(
            int(line.split()[1]) * 1024 for line in status.splitlines() if line.startswith("VmHWM:")
        )
    except (OSError, StopIteration):
        pass
    return max(own, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * scale)


def _cpu_seconds() -> float:
    """User and system CPU seconds of this process and of its finished worker processes: unlike
    wall time, nearly independent of how busy the machine is."""
    own, children = (
        resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _child(
    target: Callable[..., object], args: tuple, queue: multiprocessing.Queue, start_method: str
) -> None:
    # A spawned child defaults to spawning its own workers; give it the start method an ordinary
    # process on this platform gets, so worker pools start as they would for a user.
    multiprocessing.set_start_method(start_method, force=True)
    try:
        start, cpu_start = time.perf_counter(), _cpu_seconds()
        result = target(*args)
        elapsed = time.perf_counter() - start
        measured = dict(result) if isinstance(result, dict) else {}
        measured.setdefault("seconds", elapsed)
        measured["cpu_seconds"] = _cpu_seconds() - cpu_start
        measured["peak_bytes"] = _peak_resident_bytes()
        queue.put(measured)
    except BaseException as error:
        queue.put({"error": f"{type(error).__name__}: {error}"})
        raise


class TreeMemorySampler:
    """Samples, on a thread, the summed memory of a process and all its descendants.

    ``ru_maxrss`` only gives each process's own peak; a trainer whose workers hold memory at the
    same time as their parent needs the sum, as the machine sees it. ``peak_bytes`` sums resident
    sets, where pages that forked workers share with their parent count once per process, so it
    errs high; ``peak_pss_bytes`` sums proportional set sizes, which split shared pages among
    their sharers.
    """

    def __init__(self, pid: int, interval_s: float = 0.01) -> None:
        self.root = psutil.Process(pid)
        self.interval_s = interval_s
        self.peak_bytes = self.peak_pss_bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def tree_bytes(self) -> tuple[int, int]:
        """The summed resident and proportional set sizes of the tree now."""
        rss = pss = 0
        try:
            processes = [self.root, *self.root.children(recursive=True)]
        except psutil.Error:  # the root has exited
            return 0, 0
        for process in processes:
            with contextlib.suppress(psutil.Error):  # a worker exited between listing and reading
                memory = process.memory_full_info()
                rss, pss = rss + memory.rss, pss + memory.pss
        return rss, pss

    def _run(self) -> None:
        while not self._stop.is_set():
            rss, pss = self.tree_bytes()
            self.peak_bytes, self.peak_pss_bytes = (
                max(self.peak_bytes, rss),
                max(self.peak_pss_bytes, pss),
            )
            self._stop.wait(self.interval_s)

    def __enter__(self) -> TreeMemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()


def measure_isolated(target: Callable[..., object], *args: Any) -> dict[str, Any]:
    """Run ``target(*args)`` in a fresh process; return its measurements.

    ``seconds`` is the wall time of the whole call, unless ``target`` returns a dict with its own
    ``seconds`` (to leave setup such as loading files out); any other keys of that dict come
    back too. ``peak_bytes`` is the largest resident set of the child or of any worker process
    it started and joined; it includes the interpreter and imported libraries. ``tree_peak_bytes``
    is the largest summed resident set of the child and its workers, ``tree_peak_pss_bytes`` the
    largest summed proportional set size (:class:`TreeMemorySampler`);
    ``cpu_seconds`` the CPU time of the call, workers included.
    """
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(
        target=_child, args=(target, args, queue, multiprocessing.get_start_method())
    )
    process.start()
    with TreeMemorySampler(process.pid) as sampler:
        measured = queue.get()
    process.join()
    measured["tree_peak_bytes"] = sampler.peak_bytes
    measured["tree_peak_pss_bytes"] = sampler.peak_pss_bytes
    if "error" in measured or process.exitcode != 0:
        reason = measured.get("error", f"exit code {process.exitcode}")
        raise RuntimeError(f"benchmark child {target.__name__} failed: {reason}")
    return measured


def run_isolated(target: Callable[..., object], *args: Any) -> tuple[float, int]:
    """Run ``target(*args)`` in a fresh process; return (seconds, peak resident bytes)."""
    measured = measure_isolated(target, *args)
    return measured["seconds"], measured["peak_bytes"]


def interleaved_isolated(
    contenders: dict[str, tuple[Callable[..., object], tuple]],
    repeats: int,
    log: Callable[[str], None] | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Each contender ``name: (target, args)`` run ``repeats`` times, each run in a fresh process,
    interleaved as in :func:`interleaved` (order rotated each round); the measurements per name."""
    names = list(contenders)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for round_index in range(repeats):
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            target, args = contenders[name]
            runs[name].append(measure_isolated(target, *args))
            if log:
                run = runs[name][-1]
                log(
                    f"  {name:28s} {run['seconds']:8.2f} s, CPU {run['cpu_seconds']:.1f} s, "
                    f"tree peak {run['tree_peak_bytes'] / 2**20:.0f} MB "
                    f"(PSS {run['tree_peak_pss_bytes'] / 2**20:.0f} MB), load {os.getloadavg()[0]:.1f}"
                )
    return runs


def _cpu_model() -> str:
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
        return next(
            line.split(":", 1)[1].strip()
            for line in cpuinfo.splitlines()
            if line.startswith("model name")
        )
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def machine() -> dict[str, Any]:
    import torch

    return {
        "cpu_model": _cpu_model(),
        "load_average_1_5_15_min": list(os.getloadavg()),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "cuda": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
    }


def format_table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    cells = [[str(row.get(c, "")) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]

    def line(values):
        return "| " + " | ".join(v.ljust(w) for v, w in zip(values, widths, strict=False)) + " |"

    return "\n".join(
        [line(columns), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, cells)]
    )


def write_json(path: str | os.PathLike, payload: dict[str, Any]) -> None:
    def default(value: Any) -> Any:
        return asdict(value) if isinstance(value, Timing) else str(value)

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with atomic_writer(path) as out:
        out.write((json.dumps(payload, indent=2, default=default) + "\n").encode())


def matmul_peak_flops(n: int = 2048, repeats: int = 5, device: str = "cpu") -> float:
    """The machine's practical float32 peak: FLOP/s of a large square matmul, median of repeats."""
    import torch

    a, b = (torch.randn(n, n, device=device) for _ in range(2))

    def multiply() -> None:
        torch.mm(a, b)
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    timing = interleaved({"matmul": multiply}, repeats)["matmul"]
    return 2 * n**3 / timing.median
