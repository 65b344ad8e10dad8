"""Atomic file writes: readers see either the old file or the complete new one, never a part."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from typing import BinaryIO


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike) -> Iterator[BinaryIO]:
    """Open a temporary file beside ``path`` for binary writing; rename it over ``path`` on success.

    On an exception the temporary file is removed and ``path`` is left untouched. The result
    gets the usual permissions (0666 minus the umask), not ``mkstemp``'s private 0600.
    """
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, temp_path = tempfile.mkstemp(
        dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp"
    )
    try:
        with os.fdopen(fd, "wb") as file:
            yield file
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temp_path, 0o666 & ~umask)
        os.replace(temp_path, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp_path)
        raise


def remove_stale_temp_files(path: str | os.PathLike) -> list[str]:
    """Remove temporary files that a killed ``atomic_writer(path)`` left beside ``path``.

    Call it when a job that writes ``path`` starts again; a crash that skipped the cleanup
    (SIGKILL, power loss) otherwise leaves them forever. Returns the paths removed.
    """
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        return []
    prefix = f".{os.path.basename(path)}."
    removed = []
    for name in os.listdir(directory):
        if name.startswith(prefix) and name.endswith(".tmp"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(directory, name))
                removed.append(os.path.join(directory, name))
    return removed
