"""Pack your code for upload: ``make submission`` (or ``python make_submission.py``).

Writes ``submission.zip`` holding ``cs336_basics/``, ``tests/adapters.py`` and, if present, a
write-up PDF (``writeup.pdf`` at the top level, or ``--writeup PATH``) and your self-reported
leaderboard entries (``leaderboard.json`` at the top level), plus ``MANIFEST.json``
with the size and SHA-256 of every file. Data, checkpoints, virtual environments and caches
are left out. Above the size limit it prints a clear warning (the upload may be rejected).

This script uses only the standard library: it ships inside the handout as
``make_submission.py``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import zipfile
from pathlib import Path

PACKAGE = "cs336_basics"
ADAPTERS = "tests/adapters.py"
WRITEUP = "writeup.pdf"
LEADERBOARD = "leaderboard.json"
MANIFEST = "MANIFEST.json"
SIZE_LIMIT_BYTES = 5 * 1024 * 1024
# Folders and file types that are never code: caches, environments, data and model state.
EXCLUDED_DIRS = {
    "__pycache__",
    ".venv",
    "venv",
    ".git",
    ".pytest_cache",
    ".hypothesis",
    ".ipynb_checkpoints",
    "data",
    "runs",
    "checkpoints",
    "wandb",
}
EXCLUDED_SUFFIXES = {
    ".pyc",
    ".pyo",
    ".so",
    ".npy",
    ".npz",
    ".bin",
    ".pt",
    ".pth",
    ".ckpt",
    ".safetensors",
    ".pkl",
    ".pickle",
    ".zip",
    ".tar",
    ".gz",
    ".dat",
    ".arrow",
    ".parquet",
}
ZIP_DATE = (1980, 1, 1, 0, 0, 0)


def collect(root: Path, writeup: Path | None = None) -> tuple[dict[str, Path], list[str]]:
    """Map archive names to files; also return what was skipped and why."""
    package = root / PACKAGE
    if not package.is_dir():
        raise FileNotFoundError(
            f"no {PACKAGE}/ folder in {root}: run this from the assignment's top folder"
        )
    adapters = root / ADAPTERS
    if not adapters.is_file():
        raise FileNotFoundError(f"missing {adapters}")
    files: dict[str, Path] = {}
    skipped: list[str] = []
    for path in sorted(package.rglob("*")):
        rel = path.relative_to(root)
        if any(part in EXCLUDED_DIRS for part in rel.parts):
            continue
        if path.is_symlink():
            skipped.append(f"{rel.as_posix()} (a link)")
        elif path.is_file():
            if path.suffix.lower() in EXCLUDED_SUFFIXES:
                skipped.append(f"{rel.as_posix()} (data, checkpoint or build output)")
            else:
                files[rel.as_posix()] = path
    files[ADAPTERS] = adapters
    for path in sorted((root / "tests").rglob("*/adapters.py")):  # tests with adapters of their own
        if path.is_file() and not path.is_symlink():
            files[path.relative_to(root).as_posix()] = path
    if writeup is None and (root / WRITEUP).is_file():
        writeup = root / WRITEUP
    if writeup is not None:
        if not writeup.is_file():
            raise FileNotFoundError(f"write-up not found: {writeup}")
        if writeup.suffix.lower() != ".pdf":
            raise ValueError(f"the write-up must be a PDF, got {writeup}")
        files[WRITEUP] = writeup
    if (root / LEADERBOARD).is_file() and not (root / LEADERBOARD).is_symlink():
        files[LEADERBOARD] = root / LEADERBOARD
    return files, skipped


def manifest(files: dict[str, Path], root: Path) -> dict:
    version_file = root / "HANDOUT_VERSION"
    return {
        "handout_version": version_file.read_text(encoding="utf-8").strip()
        if version_file.is_file()
        else None,
        "files": {
            name: {
                "bytes": path.stat().st_size,
                "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            }
            for name, path in sorted(files.items())
        },
    }


def pack(root: Path, out: Path, writeup: Path | None = None) -> tuple[int, list[str]]:
    """Write the submission zip atomically; return its size in bytes and the skipped files."""
    files, skipped = collect(root, writeup)
    partial = out.with_name(out.name + ".partial")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, path in sorted(files.items()):
            info = zipfile.ZipInfo(name, date_time=ZIP_DATE)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, path.read_bytes())
        info = zipfile.ZipInfo(MANIFEST, date_time=ZIP_DATE)
        info.external_attr = 0o644 << 16
        archive.writestr(info, json.dumps(manifest(files, root), indent=2, sort_keys=True) + "\n")
    os.replace(partial, out)
    return out.stat().st_size, skipped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--root", type=Path, default=Path.cwd(), help="assignment folder (default: here)"
    )
    parser.add_argument("--out", type=Path, default=Path("submission.zip"), help="zip to write")
    parser.add_argument(
        "--writeup", type=Path, help=f"write-up PDF (default: {WRITEUP} if present)"
    )
    parser.add_argument("--size-limit-mb", type=float, default=SIZE_LIMIT_BYTES / 2**20)
    args = parser.parse_args(argv)
    try:
        size, skipped = pack(args.root.resolve(), args.out, args.writeup)
    except (FileNotFoundError, ValueError) as error:
        print(f"submission: {error}", file=sys.stderr)
        return 1
    for entry in skipped:
        print(f"  left out: {entry}")
    print(f"wrote {args.out} ({size / 1024:.1f} KiB)")
    limit = args.size_limit_mb * 2**20
    if size > limit:
        print(
            f"WARNING: {args.out} is {size / 2**20:.1f} MiB, above the {args.size_limit_mb:g} MiB limit; "
            f"the upload may be rejected. Look for large files in {PACKAGE}/ (data, weights, logs).",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
