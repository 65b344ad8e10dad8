"""Does the shipped lock install wherever students work? Resolve it for each platform, offline of
the wheels.

    python -m course.handout.check_platforms [--handout dist/handout | --build]

In the built handout (``make handout``; ``--build`` builds one in a temporary folder first, as
``make check-platforms`` does), ``uv export --locked`` turns ``uv.lock`` into pinned,
hashed requirements (``--locked`` first fails if the lock no longer matches the handout's
``pyproject.toml``); then, for each platform below, ``uv pip install --dry-run`` resolves them
with uv's cross-platform resolution (``--python-platform``, the handout's ``.python-version``,
no source builds, every hash checked). A dry run reads the index's listings and the wheels'
metadata, never the wheels themselves. Prints one line per platform (the torch it gets, or
uv's reason it cannot install) and exits 1 if any platform fails.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from course.handout.build import BUILD_ERRORS, build
from course.paths import BUILT_HANDOUT

# The uv that runs this (``uv run`` names itself in UV): a pyenv shim for ``uv`` would read the
# handout's .python-version and look for uv in that Python instead.
UV = os.environ.get("UV") or "uv"


@dataclass(frozen=True)
class Platform:
    name: str
    target: str  # uv's --python-platform
    macos: str | None = None  # the oldest macOS checked (MACOSX_DEPLOYMENT_TARGET)


# The oldest of each family the handout supports: glibc 2.28 (torch's manylinux_2_28 wheels),
# macOS 14 on Apple Silicon (torch's arm64 wheels; every Apple Silicon Mac runs macOS 14) and
# macOS 13 on Intel (wandb's x86_64 wheels; torch 2.2.2's need only 10.9).
PLATFORMS = (
    Platform("Linux x86_64", "x86_64-manylinux_2_28"),
    Platform("Linux aarch64", "aarch64-manylinux_2_28"),
    Platform("macOS arm64", "aarch64-apple-darwin", macos="14.0"),
    Platform("macOS x86_64", "x86_64-apple-darwin", macos="13.0"),
    Platform("Windows x86_64", "x86_64-pc-windows-msvc"),
)


def locked_requirements(handout: Path, out: Path) -> None:
    """The handout's lock as a requirements file (every group: what ``uv sync`` installs)."""
    command = [UV, "export", "--locked", "--format", "requirements.txt", "--all-groups"]
    command += ["--no-emit-project", "--quiet", "--output-file", str(out)]
    command += ["--python", sys.executable]  # the handout's .python-version would download one
    result = subprocess.run(command, cwd=handout, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"uv export --locked failed in {handout}:\n{result.stderr.strip()}")


def dry_run(platform: Platform, requirements: Path, python: str, scratch: Path) -> tuple[bool, str]:
    """Whether ``requirements`` install on ``platform``, and the torch it gets or uv's reason."""
    command = [UV, "pip", "install", "--dry-run", "--no-deps", "--no-build", "--require-hashes"]
    command += ["--python-platform", platform.target, "--python-version", python]
    command += ["--target", str(scratch / platform.target), "-r", str(requirements)]
    command += ["--python", sys.executable]
    env = {k: v for k, v in os.environ.items() if k != "MACOSX_DEPLOYMENT_TARGET"}
    if platform.macos:
        env["MACOSX_DEPLOYMENT_TARGET"] = platform.macos
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    lines = result.stderr.splitlines()
    if result.returncode != 0:
        reasons = [line.strip() for line in lines if line.strip().startswith(("error", "cause"))]
        return False, " ".join(reasons) or result.stderr.strip()
    torch = [line.split()[-1] for line in lines if line.strip().startswith("+ torch==")]
    return True, f"{torch[0] if torch else 'no torch'}, {sum('+ ' in x for x in lines)} packages"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--handout", type=Path, default=BUILT_HANDOUT, help="a built handout")
    source.add_argument(
        "--build", action="store_true", help="build the handout in a temporary folder and check it"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="cs336-platforms-") as scratch:
        if not args.build:
            return check_handout(args.handout, Path(scratch))
        try:
            handout = build(Path(scratch) / "dist").directory
        except BUILD_ERRORS as error:
            print(f"handout: {error}", file=sys.stderr)
            return 1
        return check_handout(handout, Path(scratch))


def check_handout(handout: Path, scratch: Path) -> int:
    """Resolve ``handout``'s lock for every platform; print a line each; 1 if any fails."""
    version_file = handout / ".python-version"
    if not version_file.is_file():
        print(f"{version_file} not found: build the handout first (make handout)", file=sys.stderr)
        return 2
    python = version_file.read_text(encoding="utf-8").strip()
    failed = []
    requirements = scratch / "requirements.txt"
    locked_requirements(handout, requirements)
    for platform in PLATFORMS:
        oldest = f" {platform.macos}+" if platform.macos else ""
        ok, detail = dry_run(platform, requirements, python, scratch)
        print(f"{'ok  ' if ok else 'FAIL'} {platform.name}{oldest}, Python {python}: {detail}")
        if not ok:
            failed.append(platform.name)
    if failed:
        print(f"the shipped lock does not install on: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
