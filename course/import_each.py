"""Import each named module in a fresh process: ``python course/import_each.py MODULE...``.

Run by ``course/layers.py --import-each`` (not imported). Forks one child per module from this
process, which has imported only third-party libraries, and prints each module that fails to import
alone with the child's last line of error: a module that works only after another one was imported
is caught.
"""

import importlib
import os
import sys
import traceback

# Third-party only, never the project: a child's import of a project module starts from nothing.
import einops  # noqa: F401
import jaxtyping  # noqa: F401
import numpy  # noqa: F401
import regex  # noqa: F401
import safetensors  # noqa: F401
import torch  # noqa: F401


def failure_of(name: str) -> str | None:
    """The last line of the error importing ``name`` in a forked child, or None if it imports."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            importlib.import_module(name)
        except BaseException:
            os.write(write, traceback.format_exc().strip().splitlines()[-1].encode())
            os._exit(1)
        os._exit(0)
    os.close(write)
    message = os.read(read, 4096).decode()
    os.close(read)
    if os.waitpid(pid, 0)[1] == 0:
        return None
    return message or "the import killed its process"


if __name__ == "__main__":
    sys.path.pop(0)  # this script's folder (course/): the project comes from PYTHONPATH
    for module in sys.argv[1:]:
        if (failure := failure_of(module)) is not None:
            print(f"{module}: {failure}")
