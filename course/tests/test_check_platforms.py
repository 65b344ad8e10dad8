"""The platform check covers what ``uv lock`` is told to require (and the reverse), and checks
the handout it builds when asked to."""

from __future__ import annotations

import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest
from packaging.markers import Marker

from course.handout import check_platforms
from course.handout.build import ManifestError
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


def test_build_checks_the_handout_it_just_built(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[Path] = []
    checked: list[Path] = []

    def fake_build(out_dir: Path) -> SimpleNamespace:
        built.append(out_dir / "handout")
        built[0].mkdir(parents=True)
        return SimpleNamespace(directory=built[0])

    monkeypatch.setattr(check_platforms, "build", fake_build)
    monkeypatch.setattr(check_platforms, "check_handout", lambda path, _: checked.append(path) or 0)
    assert check_platforms.main(["--build"]) == 0
    assert checked == built and not built[0].exists()  # checked there, then cleaned up


def test_a_failed_build_is_named_and_nothing_is_checked(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken_build(out_dir: Path) -> None:
        raise ManifestError("manifest.toml: 'gone.py' matches no file")

    monkeypatch.setattr(check_platforms, "build", broken_build)
    monkeypatch.setattr(check_platforms, "check_handout", lambda *_: pytest.fail("checked"))
    assert check_platforms.main(["--build"]) == 1
    assert "handout: manifest.toml: 'gone.py' matches no file" in capsys.readouterr().err


def test_build_and_handout_exclude_each_other(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exit_info:
        check_platforms.main(["--build", "--handout", str(tmp_path)])
    assert exit_info.value.code == 2
