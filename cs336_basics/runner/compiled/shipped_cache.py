"""The compiled encoder's kernels compiled ahead of time, so a fresh clone loads them (about a
second) rather than compiling them (about 15 s of CPU; a minute on a loaded 2-core machine).

numba caches each kernel's machine code beside its source (``__pycache__``), keyed to a hash of
the source file's bytes, the Python and numba versions and the CPU. ``kernel_cache/`` holds that
cache for Linux x86_64 and each Python the project supports, compiled for a generic x86_64 CPU
(``NUMBA_CPU_NAME=generic``: it runs on any x86_64 CPU, and these integer kernels measured as
fast as code for this machine's own CPU; docs/benchmarks.md). :func:`install` copies it into
``__pycache__`` before numba looks there. Where nothing in it matches (macOS, Windows, another
numba, an edited kernel) numba compiles as it always did, and where ``NUMBA_CACHE_DIR`` sends
numba's cache elsewhere nothing is copied. ``make kernel-cache`` rebuilds it, and
``reference_tests/test_kernel_cache.py`` fails once the kernels' source no longer matches it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHIPPED = HERE / "kernel_cache"
KERNELS = "fast_tokenizer_kernels"  # the module whose kernels numba caches


def use_portable_code() -> None:
    """Have numba compile (and look up) this process's kernels for a generic CPU of this
    architecture, the key the shipped cache is stored under, unless the user named a CPU. Only
    before numba's first import: it reads the setting then."""
    if "numba" not in sys.modules:
        os.environ.setdefault("NUMBA_CPU_NAME", "generic")


def python_tag() -> str:
    """The part of numba's cache file names that names the Python version (``py312``)."""
    return f"py{sys.version_info.major}{sys.version_info.minor}"


def install(cache_dir: Path = HERE / "__pycache__") -> int:
    """Copy each kernel's shipped cache for this Python into ``cache_dir`` where that kernel has
    no index there yet, and return how many kernels it copied. An index already there (this
    CPU's, or an older source's) is numba's to keep or replace."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return 0
    copied = 0
    for index in sorted(SHIPPED.glob(f"{KERNELS}.*.{python_tag()}.nbi")):
        if (cache_dir / index.name).exists():
            continue
        stem = index.name.removesuffix(".nbi")
        try:
            cache_dir.mkdir(exist_ok=True)
            for data in sorted(SHIPPED.glob(f"{stem}.*.nbc")):
                _copy_into_place(data, cache_dir / data.name)
            _copy_into_place(index, cache_dir / index.name)  # last: it names the data files
        except OSError:
            return copied  # a read-only tree: numba caches in the user's folder and compiles
        copied += 1
    return copied


def _copy_into_place(source: Path, target: Path) -> None:
    # Under a temporary name, then renamed: a process that starts meanwhile reads all or nothing.
    partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    shutil.copyfile(source, partial)
    os.replace(partial, target)


def build(out: Path = SHIPPED) -> list[Path]:
    """Compile every kernel for a generic CPU in a fresh process and an empty cache, and put this
    Python's cache files in ``out`` (in place of its old ones; other Pythons' stay)."""
    with tempfile.TemporaryDirectory(prefix="cs336-kernel-cache-") as scratch:
        env = os.environ | {"NUMBA_CACHE_DIR": scratch, "NUMBA_CPU_NAME": "generic"}
        warm_up = [sys.executable, "-m", "cs336_basics.runner.compiled.cold_start"]
        subprocess.run(warm_up, env=env, check=True)
        made = [
            path
            for path in Path(scratch).rglob(f"{KERNELS}.*")
            if path.suffix in (".nbi", ".nbc") and f".{python_tag()}." in path.name
        ]
        if not made:
            raise RuntimeError(f"compiling the kernels left no cache files in {scratch}")
        out.mkdir(exist_ok=True)
        for old in out.glob(f"{KERNELS}.*.{python_tag()}.*"):
            old.unlink()
        for path in made:
            shutil.copyfile(path, out / path.name)
    return sorted(out / path.name for path in made)
