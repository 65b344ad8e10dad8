"""Unpack a submission zip without trusting it.

Every member of the zip is checked before anything is written: a zip is refused as a whole
(``UnsafeArchive``, with a message naming the member and the problem) when any member is a
link, a device, a FIFO or another special file; is encrypted or uses a compression method other
than stored or deflated; has an absolute, ``..``, Windows-style or control-character name, a
path component over 255 bytes or a path deeper than 32 folders; repeats another member's name,
also up to case and Unicode normalisation, or is both a file and a folder; or when there are too
many members, too many bytes, or a member expands suspiciously (a compression bomb). Reading to
the end of each member verifies its CRC.

Only the student's code is taken: ``cs336_basics/`` and ``tests/adapters.py``, from the top of
the zip or from one folder down (a zipped project folder). Files are written fresh with mode
0644 (folders 0755) whatever the zip says, so no executable or set-id bit survives.
"""

from __future__ import annotations

import stat
import unicodedata
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

PACKAGE = "cs336_basics"
ADAPTERS = "tests/adapters.py"
SUPPORTED_COMPRESSION = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflated"}
NAME_BYTES = 255
MAX_DEPTH = 32
CHUNK = 1 << 16


class UnsafeArchive(ValueError):
    """The zip is refused as a whole: nothing in it is run."""


@dataclass(frozen=True)
class ArchiveLimits:
    """What one submission zip may hold."""

    max_members: int = 500
    max_bytes: int = 20 * 2**20  # unpacked, all members together
    max_ratio: int = 200  # unpacked / compressed, for members over 1 MiB


def _member_path(info: zipfile.ZipInfo) -> PurePosixPath:
    """The member's relative path, or ``UnsafeArchive`` naming what is wrong with it."""
    name = info.filename
    mode = info.external_attr >> 16
    if stat.S_ISLNK(mode):
        raise UnsafeArchive(f"{name!r} is a symbolic link; links are not accepted")
    if stat.S_IFMT(mode) and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise UnsafeArchive(f"{name!r} is a device, FIFO or socket, not a regular file")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise UnsafeArchive(f"{name!r} has control characters in its name")
    if "\\" in name or name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise UnsafeArchive(f"{name!r} is an absolute or Windows-style path")
    path = PurePosixPath(name)
    if ".." in path.parts:
        raise UnsafeArchive(f"{name!r} points outside the submission (..)")
    if len(path.parts) > MAX_DEPTH:
        raise UnsafeArchive(
            f"{name[:80]!r}... is {len(path.parts)} levels deep (at most {MAX_DEPTH})"
        )
    for part in path.parts:
        if len(part.encode()) > NAME_BYTES:
            raise UnsafeArchive(
                f"{name[:80]!r}... has a name of {len(part.encode())} bytes (at most {NAME_BYTES})"
            )
    if info.flag_bits & 0x1:
        raise UnsafeArchive(f"{name!r} is encrypted")
    if info.compress_type not in SUPPORTED_COMPRESSION:
        raise UnsafeArchive(
            f"{name!r} uses compression method {info.compress_type}; only stored and deflated "
            "are accepted (pack with `make submission`)"
        )
    return path


def _check_collisions(paths: list[tuple[PurePosixPath, bool]]) -> None:
    """Refuse repeated names (also up to case and Unicode form) and file-and-folder clashes."""
    files: dict[str, str] = {}
    folders: set[str] = set()
    for path, is_dir in paths:
        key = unicodedata.normalize("NFC", path.as_posix()).casefold()
        folders.update(p.as_posix() for p in PurePosixPath(key).parents if p.name)
        if is_dir:
            folders.add(key)
        elif key in files:
            raise UnsafeArchive(
                f"{path.as_posix()!r} and {files[key]!r} are the same name "
                "(repeated, or differing only in case)"
            )
        else:
            files[key] = path.as_posix()
    clash = sorted(files.keys() & folders)
    if clash:
        raise UnsafeArchive(f"{files[clash[0]]!r} is both a file and a folder")


def _wanted(path: PurePosixPath, prefix: PurePosixPath) -> PurePosixPath | None:
    """The path below ``prefix`` when it is student code we grade, else None."""
    try:
        rel = path.relative_to(prefix)
    except ValueError:
        return None
    if rel.parts[:1] == (PACKAGE,) and "__pycache__" not in rel.parts:
        return rel
    return rel if rel.as_posix() == ADAPTERS else None


def _submission_prefix(paths: list[PurePosixPath]) -> PurePosixPath:
    """Where ``cs336_basics/`` sits: the top of the zip, or one folder down."""
    tops = {p.parts[:2] for p in paths if len(p.parts) > 1}
    if any(t[0] == PACKAGE for t in tops):
        return PurePosixPath(".")
    nested = sorted({t[0] for t in tops if len(t) == 2 and t[1] == PACKAGE})
    if len(nested) == 1:
        return PurePosixPath(nested[0])
    if nested:
        raise UnsafeArchive(f"several folders hold {PACKAGE}/: {nested[:3]}; submit one")
    raise UnsafeArchive(f"no {PACKAGE}/ folder in the submission (pack it with `make submission`)")


def _copy_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, target: Path, budget: int) -> int:
    """Write one member to ``target`` (new file, 0644); return the bytes written."""
    target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    written = 0
    with archive.open(info) as source, open(target, "xb") as sink:
        target.chmod(0o644)
        while chunk := source.read(CHUNK):
            written += len(chunk)
            if written > budget:
                raise UnsafeArchive(f"{info.filename!r} unpacks to more bytes than allowed")
            sink.write(chunk)
    return written


def _read_all(archive: zipfile.ZipFile, info: zipfile.ZipInfo, budget: int) -> int:
    """Read a member we do not keep to its end, which checks its CRC; return its size."""
    size = 0
    with archive.open(info) as source:
        while chunk := source.read(CHUNK):
            size += len(chunk)
            if size > budget:
                raise UnsafeArchive(f"{info.filename!r} unpacks to more bytes than allowed")
    return size


def unpack_submission(
    zip_path: Path, dest: Path, limits: ArchiveLimits = ArchiveLimits()
) -> list[str]:
    """Check ``zip_path`` and write its student code into ``dest`` (which must not exist).

    Returns the written paths, relative to ``dest`` (``cs336_basics/...``, ``tests/adapters.py``).
    Raises ``UnsafeArchive`` for anything refused; ``dest`` may then hold a partial copy.
    """
    try:
        return _unpack(zip_path, dest, limits)
    except UnsafeArchive:
        raise
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, RuntimeError) as error:
        raise UnsafeArchive(f"the zip is damaged or unreadable: {error}") from None
    except NotImplementedError as error:
        raise UnsafeArchive(f"the zip uses an unsupported feature: {error}") from None


def _unpack(zip_path: Path, dest: Path, limits: ArchiveLimits) -> list[str]:
    with zipfile.ZipFile(zip_path) as archive:
        members = archive.infolist()
        if len(members) > limits.max_members:
            raise UnsafeArchive(f"{len(members)} entries; at most {limits.max_members} are allowed")
        paths = [_member_path(info) for info in members]
        _check_collisions([(p, info.is_dir()) for p, info in zip(paths, members, strict=True)])
        declared = sum(info.file_size for info in members)
        if declared > limits.max_bytes:
            raise UnsafeArchive(
                f"{declared} bytes unpacked; at most {limits.max_bytes} are allowed"
            )
        for info in members:
            ratio = info.file_size / max(info.compress_size, 1)
            if info.file_size > 2**20 and ratio > limits.max_ratio:
                raise UnsafeArchive(f"{info.filename!r} expands {ratio:.0f}x (a compression bomb?)")
        prefix = _submission_prefix(
            [p for p, info in zip(paths, members, strict=True) if not info.is_dir()]
        )
        dest.mkdir(mode=0o755)
        budget, written = limits.max_bytes, []
        for path, info in zip(paths, members, strict=True):
            if info.is_dir():
                continue
            rel = _wanted(path, prefix)
            if rel is None:
                budget -= _read_all(archive, info, budget)
            else:
                budget -= _copy_member(archive, info, dest.joinpath(*rel.parts), budget)
                written.append(rel.as_posix())
    if not any(name.startswith(f"{PACKAGE}/") and name.endswith(".py") for name in written):
        raise UnsafeArchive(f"{PACKAGE}/ holds no Python files")
    return sorted(written)
