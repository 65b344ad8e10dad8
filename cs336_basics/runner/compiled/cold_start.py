"""Which encoder a job gets: the compiled one only where it pays for its start-up.

The compiled encoder (``FastTokenizer``) is 2-7x faster per byte than the readable
``Tokenizer``, but before its first byte it imports numba and loads its kernels from numba's
cache, or compiles them where the cache is cold: a changed kernel source, another numba, a
platform the repository ships no compiled kernels for (``shipped_cache``: a fresh clone on Linux
x86_64 starts warm). Compiling was most of the 75.6 s a first ``cs336 pipeline --tiny`` spent
encoding, which takes the readable encoder about a second. So a job is encoded by the
readable encoder unless it is large enough that the compiled one wins even after its start-up,
and where the cache is cold a process in the background fills it, so the next large job finds it
warm. Both give the same ids (``reference_tests/test_fast_tokenizer.py``).

The thresholds are per worker process: the start-up is paid once however many workers share the
bytes (forked workers inherit the loaded kernels, spawned ones load them side by side).
docs/benchmarks.md has the measurements.
"""

from __future__ import annotations

import os
import subprocess
import sys

from cs336_basics.tokenizer import Tokenizer

# Below this many bytes per worker the readable encoder finishes first even with a warm cache:
# importing numba and loading the kernels costs as much as the readable encoder's time on about
# 12 MB of English-like text (0.8 s idle; 10 s at a load of 12 on 2 cores), beyond which the
# compiled encoder's lower cost per byte wins.
LOAD_PAYS_OFF_BYTES = 12_000_000
# With a cold cache, compiling costs about 55 s at a load of 12 on 2 cores, what the compiled
# encoder saves on about 60 MB of English-like text (135 MB of stories).
COMPILE_PAYS_OFF_BYTES = 64_000_000


def compiled_encoder(tokenizer: Tokenizer, bytes_per_worker: float) -> Tokenizer | None:
    """A ``FastTokenizer`` with ``tokenizer``'s vocabulary, merges and special tokens where a job
    of ``bytes_per_worker`` bytes per worker finishes sooner with it, else None. A cold cache
    that is worth filling is filled in the background."""
    if bytes_per_worker < LOAD_PAYS_OFF_BYTES:
        return None  # (numba not even imported: that alone costs more than the job saves)
    from cs336_basics.runner.compiled.fast_tokenizer import FastTokenizer

    if bytes_per_worker < COMPILE_PAYS_OFF_BYTES and not kernels_cached():
        warm_in_background()
        return None
    return FastTokenizer(tokenizer.vocab, tokenizer.merges, tokenizer.special_tokens)


def kernels_cached() -> bool:
    """Whether numba's cache holds every kernel that Python calls (the others are compiled into
    these), compiled from this source for this CPU, so a ``FastTokenizer`` loads them rather than
    compiling them.

    numba has no public query for this, so each kernel's cache is asked what numba itself asks
    before compiling: is the index fresh for the source file, and does it hold a key for this
    machine and this bytecode (numba's private ``_cache`` API: a change there reads as a cold
    cache, which costs speed, never ids).
    """
    import numba

    from cs336_basics.runner.compiled import fast_tokenizer_kernels as k

    entry_kernels = (
        k._fill_pair_table, k.merge_pretokens, k.find_words, k.word_kinds, k.joined_words,
        k.ascii_word_pretoken_starts, k.look_up_words, k.gather_ids, k._rehash,
    )  # fmt: skip
    try:
        codegen = numba.core.registry.cpu_target.target_context.codegen()
        return all(_cached(kernel, codegen) for kernel in entry_kernels)
    except (AttributeError, TypeError, ValueError, OSError):
        return False


def _cached(kernel, codegen) -> bool:
    cache = kernel._cache
    index = cache._cache_file._load_index()
    return any(key == cache._index_key(key[0], codegen) for key in index)


def warm_in_background() -> subprocess.Popen:
    """Start a process that fills numba's cache (see ``warm_up``) and return at once.

    It is detached (its own session, no terminal input or output), so it outlives this command
    without holding up its exit and prints nothing over its output. It finds numba's cache where
    this process does (same environment). numba writes each cache file to a temporary name and
    renames it into place, so two of them at once, or one beside a command that compiles, only
    repeat work.
    """
    return subprocess.Popen(
        [sys.executable, "-m", "cs336_basics.runner.compiled.cold_start"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def warm_up() -> None:
    """Compile every entry kernel into numba's cache (or load it, where it is there already)."""
    if hasattr(os, "nice"):
        os.nice(10)  # the command that started it comes first (training, on a 2-core laptop)
    from cs336_basics.runner.compiled.fast_tokenizer import FastTokenizer

    vocab = {i: bytes([i]) for i in range(256)} | {256: b"wa"}
    fast = FastTokenizer(vocab, [(b"w", b"a")])  # builds load or compile all but one kernel
    # More new words than a word table holds at first: it grows, which compiles the last.
    fast.encode(" ".join(f"warm{i}" for i in range(1024)))


if __name__ == "__main__":
    warm_up()
