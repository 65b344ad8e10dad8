"""The compiled encoder (``FastTokenizer``, numba kernels): the reference repository's fast path
for ``encode_file``. It never ships in a handout: it encodes exactly as the graded ``Tokenizer``
does, so it would hand students that solution. ``encode_file`` falls back to ``Tokenizer``
without it."""
