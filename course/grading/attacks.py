"""``python -m course.grading attacks``: every hostile submission against the real sandbox.

Runs ``course/tests/test_grader_hostile.py`` at the namespaces level, then it and
``course/tests/test_grader.py`` in container mode, with the grader started the way a default
Docker container starts it (``python -m course.grading confine no-namespaces``), so that this
mode is tested where namespaces work too. ``CS336_REQUIRE_SANDBOX=1``: a level that does not
work here fails instead of skipping. ``--attacks smoke`` runs the subset CI's default suite
runs; ``--attacks hang`` only the full-rubric hang zip (a pool that never starts in train_bpe of
the reference: minutes per level, so not in CI; ``make grader-hang``); ``--level`` one level
only. Needs the checkout (the tests are instructor-only).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from course.grading.sandbox import CONTAINER, NAMESPACES
from course.paths import REPO_ROOT

HOSTILE_TESTS = "course/tests/test_grader_hostile.py"
# ``-n 0``: one process, whatever the repository's addopts say (each attack starts its own sandboxes).
PYTEST = [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "-m", ""]


def runs(level: str, attacks: str) -> list[tuple[dict[str, str], list[str]]]:
    """The (environment additions, command) of each pytest run at ``level`` (or both)."""
    planned = []
    for mode in (NAMESPACES, CONTAINER):
        if level not in (mode, "both"):
            continue
        env = {"CS336_GRADER_ATTACKS": attacks, "CS336_REQUIRE_SANDBOX": "1"}
        env["CS336_ISOLATION"] = mode
        tests = [HOSTILE_TESTS]
        if attacks == "hang":
            tests += ["-k", "hanging_train_bpe"]
        elif mode == CONTAINER:
            tests.append("course/tests/test_grader.py")
        if mode == NAMESPACES:
            planned.append((env, [*PYTEST, *tests]))
        else:
            confined = [sys.executable, "-m", "course.grading", "confine", "no-namespaces", "--"]
            planned.append((env, [*confined, *PYTEST, *tests]))
    return planned


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--level", choices=("both", NAMESPACES, CONTAINER), default="both")
    parser.add_argument(
        "--attacks",
        choices=("all", "smoke", "hang"),
        default="all",
        help="every attack, CI's subset, or the full-rubric hang zip alone",
    )
    args = parser.parse_args(argv)
    for env, command in runs(args.level, args.attacks):
        print(f"attacks at the {env['CS336_ISOLATION']} level: {' '.join(command)}", flush=True)
        code = subprocess.run(command, cwd=REPO_ROOT, env={**os.environ, **env}).returncode
        if code != 0:
            return code
    return 0


if __name__ == "__main__":
    sys.exit(main())
