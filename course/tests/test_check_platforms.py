"""The platform check covers what ``uv lock`` is told to require (and the reverse)."""

from __future__ import annotations

import tomllib

from packaging.markers import Marker

from course.handout.check_platforms import PLATFORMS
from course.paths import REPO_ROOT

# How each of uv's --python-platform targets fills in the markers pyproject.toml uses.
TARGET_MARKERS = {
    "x86_64-manylinux_2_28": ("linux", "x86_64"),
    "aarch64-manylinux_2_28": ("linux", "aarch64"),
    "aarch64-apple-darwin": ("darwin", "arm64"),
    "x86_64-apple-darwin": ("darwin", "x86_64"),
    "x86_64-pc-windows-msvc": ("win32", "AMD64"),
}


def test_every_required_environment_is_checked_once() -> None:
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    required = [Marker(m) for m in pyproject["tool"]["uv"]["required-environments"]]
    assert len(required) == len(PLATFORMS) == 5
    for platform in PLATFORMS:
        system, machine = TARGET_MARKERS[platform.target]
        env = {"sys_platform": system, "platform_machine": machine}
        assert sum(marker.evaluate(env) for marker in required) == 1, platform
        assert (platform.macos is not None) == (system == "darwin"), platform
