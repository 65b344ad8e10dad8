"""The compiled encoder (``FastTokenizer``, numba kernels): the reference repository's fast path
for ``encode_file``. It never ships in a handout: it encodes exactly as the graded ``Tokenizer``
does, so it would hand students that solution. ``encode_file`` falls back to ``Tokenizer``
without it."""

from cs336_basics.runner.compiled import shipped_cache

# Before numba's first import and before numba looks for a kernel (see shipped_cache).
shipped_cache.use_portable_code()
shipped_cache.install()
