"""Which encoder ``cs336 encode`` and the pipeline use (``runner/compiled/cold_start.py``): the
readable one for jobs too small to pay for the compiled one's start-up, or while numba's cache is
cold (filled meanwhile in the background), with the same ids either way."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import cs336_basics.runner.compiled.cold_start as cold_start
from cs336_basics.runner.compiled.fast_tokenizer import FastTokenizer
from cs336_basics.runner.encode_file import encode_file, with_compiled_merges
from cs336_basics.tokenizer import Tokenizer
from tests.conftest import FIXTURES

LOAD, COMPILE = cold_start.LOAD_PAYS_OFF_BYTES, cold_start.COMPILE_PAYS_OFF_BYTES


@pytest.fixture(scope="module")
def reference() -> Tokenizer:
    directory = FIXTURES / "tokenizer"
    return Tokenizer.from_files(directory / "vocab.json", directory / "merges.txt", ["<|eot|>"])


@pytest.fixture
def warm_ups(monkeypatch) -> list[None]:
    """Background warm-ups started (none really is), and a cold numba cache."""
    started = []
    monkeypatch.setattr(cold_start, "warm_in_background", lambda: started.append(None))
    monkeypatch.setattr(cold_start, "kernels_cached", lambda: False)
    return started


def test_a_small_job_on_a_cold_cache_is_encoded_readably_with_the_same_ids(
    reference, warm_ups, monkeypatch, tmp_path
) -> None:
    text = (FIXTURES / "corpora" / "stories-400k.txt").read_text()[:50_000] + "<|eot|> é 😀"
    path = tmp_path / "text.txt"
    path.write_text(text, encoding="utf-8")
    size = path.stat().st_size
    readable = with_compiled_merges(reference, size, num_workers=2)
    assert readable is reference
    assert warm_ups == []  # too small to use the compiled encoder even once it is warm
    # The same file, counted as large enough to compile for: the compiled encoder's ids.
    monkeypatch.setattr(cold_start, "COMPILE_PAYS_OFF_BYTES", size // 2)
    monkeypatch.setattr(cold_start, "LOAD_PAYS_OFF_BYTES", size // 4)
    compiled = with_compiled_merges(reference, size, num_workers=2)
    assert type(compiled) is FastTokenizer
    encode_file(readable, path, tmp_path / "readable.npy", num_workers=1)
    encode_file(compiled, path, tmp_path / "compiled.npy", num_workers=1)
    ids = np.load(tmp_path / "readable.npy")
    assert ids.tolist() == reference.encode(text)
    np.testing.assert_array_equal(np.load(tmp_path / "compiled.npy"), ids)


def test_a_cold_cache_is_warmed_in_the_background_while_a_middle_sized_job_runs_readably(
    reference, warm_ups, monkeypatch
) -> None:
    assert with_compiled_merges(reference, 3 * LOAD, num_workers=4) is reference
    assert warm_ups == []  # under LOAD per worker: not worth loading the kernels, cold or warm
    assert with_compiled_merges(reference, 3 * LOAD, num_workers=1) is reference
    assert len(warm_ups) == 1
    # A job that saves more than compiling costs compiles now; nothing runs beside it.
    assert type(with_compiled_merges(reference, 2 * COMPILE, num_workers=1)) is FastTokenizer
    assert len(warm_ups) == 1
    monkeypatch.setattr(cold_start, "kernels_cached", lambda: True)
    assert type(with_compiled_merges(reference, 2 * LOAD, num_workers=1)) is FastTokenizer
    assert len(warm_ups) == 1


def test_students_and_handouts_encode_with_their_own_class(reference, monkeypatch) -> None:
    student_subclass = type("StudentTokenizer", (Tokenizer,), {})(reference.vocab, reference.merges)
    assert with_compiled_merges(student_subclass, 10 * COMPILE) is student_subclass
    compiled = FastTokenizer(reference.vocab, reference.merges, reference.special_tokens)
    assert with_compiled_merges(compiled, 10 * COMPILE) is compiled
    # The handout ships without cs336_basics.runner.compiled (and may lack numba).
    monkeypatch.setitem(sys.modules, "cs336_basics.runner.compiled.cold_start", None)
    assert with_compiled_merges(reference, 10 * COMPILE) is reference


def test_the_cache_reads_warm_once_a_fast_tokenizer_has_encoded(reference) -> None:
    fast = FastTokenizer(reference.vocab, reference.merges)
    fast.encode(" ".join(f"w{i}" for i in range(2000)))  # (the word table grows: _rehash)
    assert cold_start.kernels_cached()


@pytest.mark.slow
def test_the_background_warm_up_leaves_a_cache_the_next_job_loads(tmp_path) -> None:
    # In a process of its own, with a numba cache of its own that starts empty.
    script = textwrap.dedent(f"""
        import numba
        import cs336_basics.runner.compiled.cold_start as cold_start
        import cs336_basics.runner.compiled.fast_tokenizer_kernels as kernels
        from cs336_basics.runner.encode_file import with_compiled_merges
        from cs336_basics.tokenizer import Tokenizer

        assert not cold_start.kernels_cached()
        assert cold_start.warm_in_background().wait(timeout=600) == 0
        assert cold_start.kernels_cached()
        directory = {str(FIXTURES / "tokenizer")!r}
        reference = Tokenizer.from_files(directory + "/vocab.json", directory + "/merges.txt")
        fast = with_compiled_merges(reference, 2 * cold_start.LOAD_PAYS_OFF_BYTES, 1)
        assert type(fast).__name__ == "FastTokenizer"  # (the next job of that size)
        text = open({str(FIXTURES / "corpora" / "stories-400k.txt")!r}).read()
        assert fast.encode(text) == reference.encode(text)
        misses = {{
            name: dict(kernel.stats.cache_misses)
            for name, kernel in vars(kernels).items()
            if isinstance(kernel, numba.core.registry.CPUDispatcher) and kernel.stats.cache_misses
        }}
        assert not misses, misses
        """)
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=Path(__file__).parents[1],
        env={**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
