"""Real English the project did not write, for tokenizer benchmarks: GCIDE, the GNU Collaborative
International Dictionary of English (Webster's 1913 and later additions; headwords with their
pronunciations, etymologies, definitions and quotations), as Debian's ``dict-gcide`` package
installs it (``apt-get install dict-gcide``; ``.ci/run`` does). About 40 MB of text.

The file is dictzip-compressed (gzip-compatible). A few bytes of it are not UTF-8; they are read
as U+FFFD, the only change made to the text.
"""

from __future__ import annotations

import gzip
import os

from cs336_basics.atomic_write import atomic_writer

GCIDE = "/usr/share/dictd/gcide.dict.dz"


def write_dictionary_text(path: str | os.PathLike, size_bytes: int) -> int:
    """Write the first ``size_bytes`` (or all, if fewer) of GCIDE's text to ``path``, cut after
    a line; return the bytes written."""
    if not os.path.isfile(GCIDE):
        raise FileNotFoundError(
            f"{GCIDE} not found: the dictionary corpus is Debian's dict-gcide package "
            "(sudo apt-get install dict-gcide)"
        )
    with gzip.open(GCIDE) as file:
        data = file.read(size_bytes + 1)
    if len(data) > size_bytes:
        data = data[: data.rfind(b"\n", 0, size_bytes) + 1]
    text = data.decode("utf-8", errors="replace").encode("utf-8")
    with atomic_writer(path) as out:
        out.write(text)
    return len(text)
