"""The compiled encoder's kernels ship compiled (cs336_basics/runner/compiled/shipped_cache.py):
the shipped cache must match the kernels' source, and a fresh copy of the package must load every
kernel it runs rather than compile it."""

from __future__ import annotations

import hashlib
import os
import pickle
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import numba
import pytest

from cs336_basics.runner.compiled import shipped_cache

KERNELS_SOURCE = shipped_cache.HERE / f"{shipped_cache.KERNELS}.py"
REBUILD = "the kernels changed since the shipped cache was built: run `make kernel-cache`"


def shipped_indexes(tag: str) -> list[Path]:
    return sorted(shipped_cache.SHIPPED.glob(f"{shipped_cache.KERNELS}.*.{tag}.nbi"))


def index_stamp(index: Path) -> tuple[str, bytes]:
    """numba's version and the source stamp (a SHA-256 of the source's bytes) an index was made
    for: numba writes its version, then the pickled stamp and entries."""
    with index.open("rb") as file:
        version = pickle.load(file)
        stamp, _entries = pickle.loads(file.read())
    return version, stamp


@pytest.mark.parametrize("tag", ["py312", "py313"])
def test_the_shipped_cache_is_for_this_source_and_numba(tag):
    indexes = shipped_indexes(tag)
    assert indexes, f"no shipped kernels for {tag}: run `make kernel-cache`"
    source_hash = hashlib.sha256(KERNELS_SOURCE.read_bytes()).digest()
    for index in indexes:
        version, stamp = index_stamp(index)
        assert version == numba.__version__, f"{index.name}: numba {version}; {REBUILD}"
        assert stamp == source_hash, f"{index.name}: {REBUILD}"
        stem = index.name.removesuffix(".nbi")
        assert list(index.parent.glob(f"{stem}.*.nbc")), f"{index.name} names no data file"


def test_both_pythons_ship_the_same_kernels():
    names = {
        tag: {p.name.replace(f".{tag}.", ".") for p in shipped_indexes(tag)}
        for tag in ("py312", "py313")
    }
    assert names["py312"] == names["py313"]


PROBE = """
from cs336_basics.runner.compiled import fast_tokenizer_kernels as kernels
from cs336_basics.runner.compiled.fast_tokenizer import FastTokenizer

vocab = {i: bytes([i]) for i in range(256)} | {256: b"th", 257: b"<|e|>"}
fast = FastTokenizer(vocab, [(b"t", b"h")], ["<|e|>"])
text = "the théâtre<|e|> naïve 東京\\n\\n  " + " ".join(f"w{i}" * (i % 40) for i in range(3000))
fast.encode(text)
list(fast.encode_iterable([text[:50], text[50:]]))
stats = [getattr(kernels, n).stats for n in dir(kernels) if hasattr(getattr(kernels, n), "stats")]
print(sum(sum(s.cache_hits.values()) for s in stats), sum(sum(s.cache_misses.values()) for s in stats))
"""


@pytest.mark.slow  # a fresh process that imports numba: `make test-all` and CI
@pytest.mark.skipif(
    (sys.platform, platform.machine()) != ("linux", "x86_64"),
    reason="the shipped cache is Linux x86_64's; elsewhere numba compiles on first use, as before",
)
def test_a_fresh_copy_loads_every_kernel_it_runs(tmp_path):
    package = shutil.copytree(
        shipped_cache.HERE.parents[1],
        tmp_path / "cs336_basics",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    env["PYTHONPATH"] = str(tmp_path)
    probe = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert probe.returncode == 0, probe.stderr[-3000:]
    hits, misses = map(int, probe.stdout.split())
    assert misses == 0, f"{misses} kernels compiled in a fresh copy; {REBUILD}"
    assert hits > 0
    assert list((package / "runner" / "compiled" / "__pycache__").glob("*.nbi"))
