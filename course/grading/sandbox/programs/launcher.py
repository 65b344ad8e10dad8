"""The launcher: the first program of a run, inside the sandbox, before anything of the student's.

``launch.launcher_argv`` runs it as ``python -S -c TEXT SPEC``, where TEXT is the definitions of
``course/grading/confine.py`` followed by this file (stdlib only: ``-S`` reads no ``.pth``), and
SPEC its JSON spec. It copies the submission (namespaces mode), confines itself (Landlock where
asked, then seccomp), runs the command, ends whatever the command left running, and streams the
outputs folder as a tar to the channel. Sandbox paths only: the run can read this command line.
"""

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile

spec = json.loads(sys.argv[1])
if spec["copy_from"]:
    shutil.copytree(spec["copy_from"], spec["cwd"])
    os.makedirs(spec["env"]["HOME"])
try:
    # restrict_paths and confine_syscalls: confine.py's, whose text comes before this one.
    enforced = [restrict_paths(**spec["landlock"])] if spec["landlock"] else []  # noqa: F821
    enforced.append(confine_syscalls())  # noqa: F821
except OSError as error:
    sys.exit(f"sandbox: could not confine the run, nothing was run: {error}")
if spec["report"]:
    with open(os.path.join(spec["out"], "isolation.json"), "w") as stream:
        json.dump(enforced, stream)
code = subprocess.call(spec["argv"], stdin=subprocess.DEVNULL, cwd=spec["cwd"], env=spec["env"])
# The command has ended: so does everything it left running (all this uid's processes but this
# one, or all of the PID namespace's but its init), before its outputs are read.
with contextlib.suppress(OSError):  # none left, or (Landlock's scope) none it may signal
    os.kill(-1, signal.SIGKILL)
with os.fdopen(spec["channel"], "wb") as channel, tarfile.open(fileobj=channel, mode="w|") as tar:
    tar.add(spec["out"], arcname="out")
sys.exit(code if code >= 0 else 128 - code)
