"""Encoding a large text file into a ``.npy`` array of token ids, on all cores.

The file is cut at safe boundaries (see :mod:`cs336_basics.pretokenization`), so encoding the
pieces separately gives exactly the ids of encoding the whole. Worker processes each read their
own byte range and encode it; the parent writes the pieces in order straight into the output,
so neither the text nor the ids ever need to fit in memory at once.

The output is a standard ``.npy`` file (``numpy.load`` reads it, ``mmap_mode="r"`` included) of
``uint16`` when every id fits, else ``uint32``. It is written to a temporary file and renamed
into place, so an interrupted run never leaves a truncated array behind; on an error or Ctrl-C
the worker processes are terminated at once.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import struct
from collections.abc import Iterator
from multiprocessing.connection import Connection
from typing import NoReturn

import numpy as np

from cs336_basics.atomic_write import atomic_writer
from cs336_basics.chunking import find_chunk_boundaries, read_text_range
from cs336_basics.errors import RunFailedError
from cs336_basics.progress import progress_bar
from cs336_basics.tokenizer import Tokenizer

# Text per job: small enough for a smooth progress bar and bounded memory, big enough that
# per-job overhead is negligible.
CHUNK_BYTES = 4 * 1024 * 1024

# The .npy header is written with room for any length, then rewritten once the length is known.
_HEADER_SIZE = 128


def token_dtype(vocab_size: int) -> np.dtype:
    """The smallest unsigned dtype holding ids ``0 .. vocab_size - 1`` (uint16 or uint32)."""
    return np.dtype(np.uint16) if vocab_size <= 1 << 16 else np.dtype(np.uint32)


def with_compiled_merges(
    tokenizer: Tokenizer, input_bytes: int, num_workers: int | None = None
) -> Tokenizer:
    """``tokenizer`` with its merges compiled (same ids) where this checkout has a compiled
    encoder and a job of ``input_bytes`` on ``num_workers`` processes is large enough to pay for
    starting it, else ``tokenizer`` itself, so a student's commands encode with their own class."""
    try:
        from cs336_basics.runner.compiled.cold_start import compiled_encoder
    except ImportError:
        return tokenizer
    if type(tokenizer) is not Tokenizer:
        return tokenizer
    return compiled_encoder(tokenizer, input_bytes / worker_count(num_workers)) or tokenizer


def worker_count(num_workers: int | None) -> int:
    """The number of encoding processes for ``num_workers`` (None: all CPU cores)."""
    return max(1, num_workers if num_workers is not None else (os.cpu_count() or 1))


def encode_file(
    tokenizer: Tokenizer,
    input_path: str | os.PathLike,
    output_path: str | os.PathLike,
    *,
    num_workers: int | None = None,
    progress: bool = False,
) -> int:
    """Encode the UTF-8 text file ``input_path`` into the ``.npy`` file ``output_path``.

    Args:
        tokenizer: the tokenizer to encode with.
        input_path: the text to encode.
        output_path: where the 1-D array of ids goes (replaced atomically).
        num_workers: encoding processes (default: all CPU cores).
        progress: show a progress bar over the input bytes.

    Returns:
        The number of tokens written.
    """
    path = os.fspath(input_path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"text file to encode not found (or not a file): {path!r}")
    num_workers = worker_count(num_workers)
    dtype = token_dtype(max(tokenizer.vocab) + 1).newbyteorder("<")
    file_size = os.path.getsize(path)
    num_chunks = max(num_workers * 2 if num_workers > 1 else 1, -(-file_size // CHUNK_BYTES))
    boundaries = find_chunk_boundaries(path, num_chunks, tokenizer.special_tokens)
    jobs = [
        (path, start, end, dtype) for start, end in zip(boundaries, boundaries[1:], strict=False)
    ]

    total = 0
    with (
        atomic_writer(output_path) as out,
        progress_bar(
            total=file_size, unit="B", unit_scale=True, desc="encoding", disable=not progress
        ) as bar,
        # Closed on the way out, so the workers are gone before the error is reported.
        contextlib.closing(_encode_jobs(tokenizer, jobs, num_workers)) as results,
    ):
        out.write(_npy_header(dtype, 0))
        for (_, start, end, _), ids in zip(jobs, results, strict=True):
            out.write(ids.tobytes())
            total += len(ids)
            bar.update(end - start)
        out.seek(0)
        out.write(_npy_header(dtype, total))
    return total


def _encode_jobs(tokenizer: Tokenizer, jobs: list, num_workers: int) -> Iterator[np.ndarray]:
    """Yield each job's ids in order, at most ``2 * num_workers`` jobs ahead of the consumer.

    Job ``i`` goes to worker ``i % num_workers`` (the jobs are of about one size). Whatever ends
    the loop early (an error, Ctrl-C, the consumer closing the generator) kills the workers at
    once. Each worker has a pipe of its own, so a worker killed mid-message holds no lock that
    anyone else waits on: ``multiprocessing.Pool.terminate`` could hang for good when a worker
    was sending a result larger than the pipe's buffer, since it puts its sentinel through the
    shared result queue (whose lock that worker holds) before it kills the workers.
    """
    if num_workers == 1 or len(jobs) == 1:
        _init_worker(tokenizer)
        yield from map(_encode_range, jobs)
        return
    workers = [_Worker(tokenizer) for _ in range(min(num_workers, len(jobs)))]
    try:
        sent = 0
        for i in range(len(jobs)):
            while sent < min(len(jobs), i + 2 * len(workers)):
                workers[sent % len(workers)].send(jobs[sent])
                sent += 1
            yield workers[i % len(workers)].receive()
    finally:
        for worker in workers:
            worker.stop()


class _Worker:
    """One encoding process and the pipe to it: jobs go in, ids (or the job's error) come back in
    the order the jobs were sent."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.connection, child_end = multiprocessing.Pipe()
        self.process = multiprocessing.Process(
            target=_serve, args=(child_end, tokenizer), daemon=True
        )
        self.process.start()
        child_end.close()  # the child's end lives in the child: its death then reads as EOF

    def send(self, job: tuple) -> None:
        try:
            self.connection.send(job)
        except OSError:
            self._died()

    def receive(self) -> np.ndarray:
        # A worker that dies (the out-of-memory killer, a signal) never replies, but its end of
        # the pipe closes with it, which ends the wait as EOF, even in the middle of a reply.
        try:
            ok, value = self.connection.recv()
        except (EOFError, OSError):
            self._died()
        if not ok:
            raise value
        return value

    def stop(self) -> None:
        self.process.kill()  # a worker owns nothing another process needs, so it may die anywhere
        self.process.join()
        self.connection.close()

    def _died(self) -> NoReturn:
        self.process.join()
        code = self.process.exitcode
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        raise RunFailedError(
            f"an encoding worker process {how}; if the system ran out of memory "
            "(the kernel's out-of-memory killer sends SIGKILL, signal 9), use fewer workers"
        )


def _serve(connection: Connection, tokenizer: Tokenizer) -> None:
    """Worker process: encode each job received until the parent closes the pipe."""
    _init_worker(tokenizer)
    while True:
        try:
            job = connection.recv()
        except EOFError:
            return
        try:
            reply = (True, _encode_range(job))
        except Exception as error:  # noqa: BLE001  (the parent re-raises it as the job's error)
            reply = (False, error)
        connection.send(reply)


_worker_tokenizer: Tokenizer | None = None


def _init_worker(tokenizer: Tokenizer) -> None:
    global _worker_tokenizer
    _worker_tokenizer = tokenizer
    if multiprocessing.parent_process() is not None:
        # A terminal's Ctrl-C reaches every process of the group; the parent alone handles it
        # (and terminates the workers), so they do not each print a traceback.
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _encode_range(job: tuple[str, int, int, np.dtype]) -> np.ndarray:
    """Worker: the ids of bytes ``[start, end)`` of the file."""
    path, start, end, dtype = job
    return np.array(_worker_tokenizer.encode(read_text_range(path, start, end)), dtype=dtype)


def _npy_header(dtype: np.dtype, length: int) -> bytes:
    """A version 1.0 ``.npy`` header for a 1-D little-endian array, padded to ``_HEADER_SIZE``."""
    description = {"descr": dtype.newbyteorder("<").str, "fortran_order": False, "shape": (length,)}
    text = repr(description).encode("latin1")
    padding = _HEADER_SIZE - 10 - len(text) - 1
    return (
        b"\x93NUMPY\x01\x00" + struct.pack("<H", _HEADER_SIZE - 10) + text + b" " * padding + b"\n"
    )
