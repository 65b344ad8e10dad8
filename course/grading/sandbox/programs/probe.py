"""The probe: a run that shows this machine's isolation level works and keeps the instructor's
files out of reach (``levels.probe`` runs it as ``python -S -c TEXT OUT PATHS``).

OUT: the run's outputs folder; PATHS: a JSON list of host paths it must fail to read or list (as
JSON, so that no sandbox path in them is translated). It writes ``ok``, or ``reached`` naming
what it could read.
"""

import json
import os
import sys

reached = []
for path in json.loads(sys.argv[2]):
    try:
        if os.path.isdir(path):
            os.listdir(path)
        else:
            open(path, "rb").close()
        reached.append(path)
    except OSError:
        pass
with open(os.path.join(sys.argv[1], "reached" if reached else "ok"), "w") as stream:
    stream.write("\n".join(reached))
