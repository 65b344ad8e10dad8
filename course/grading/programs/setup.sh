#!/usr/bin/env bash
# Gradescope runs this once, as root, when the autograder image is built.
# (course/grading/gradescope.py writes it into the bundle with the Python minor filled in.)
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
OPT=/opt/cs336
apt-get update
# python3: for pip, should uv's installer fail; where it is the grader's Python, uv uses it.
apt-get install -y --no-install-recommends bubblewrap curl ca-certificates python3 python3-venv
mkdir -p $OPT/bin
if ! curl -LsSf https://astral.sh/uv/install.sh | env UV_INSTALL_DIR=$OPT/bin UV_NO_MODIFY_PATH=1 sh; then
    python3 -m venv $OPT/uv-venv && $OPT/uv-venv/bin/pip install --quiet uv
    ln -sf $OPT/uv-venv/bin/uv $OPT/bin/uv
fi
cd /autograder/source
# The environment lives outside /root so the sandbox's unprivileged uid can read it. Its Python
# is the handout's (.python-version): uv downloads it where the image has none, or uses the
# interpreter CS336_GRADER_PYTHON names (make gradescope-docker lends the host's: no download).
UV_PYTHON_INSTALL_DIR=$OPT/python UV_PROJECT_ENVIRONMENT=$OPT/venv \
    UV_PYTHON="${CS336_GRADER_PYTHON:-@GRADER_PYTHON@}" \
    $OPT/bin/uv sync --locked --compile-bytecode --no-install-project
chmod -R a+rX $OPT
# The grader's files and the blocked packages: root only. Then: which isolation works here.
$OPT/venv/bin/python -m course.grading.gradescope harden
$OPT/venv/bin/python -m course.grading.gradescope check
