"""The runner: what turns the assignment's parts into runs — the ``cs336`` CLI and its commands,
the end-to-end pipeline, the story corpus, the parallel encoder and its compiled tokenizer.

It sits above the core (``cs336_basics``) and may use the architecture variants where they are
installed (see ``extensions``); the core never imports it.
"""
