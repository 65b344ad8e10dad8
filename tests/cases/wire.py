"""Bundles on disk: the only way case inputs, outputs and expected values cross a process.

A bundle ``<stem>`` is ``<stem>.safetensors`` (its tensors, when it has any) plus
``<stem>.json`` (a header, its JSON values and the names of its tensors). No pickle anywhere.
Each file is written atomically and the JSON last, so a JSON file means a complete bundle.

Reading is strict for bundles written by untrusted code (a student's outputs): only regular
files, size caps, well-formed headers, tensor names that match; anything else is a
``WireError`` naming the problem, never another exception.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors

from tests.cases.core import Bundle

JSON_SUFFIX, TENSOR_SUFFIX = ".json", ".safetensors"


class WireError(ValueError):
    """A bundle is missing, too large or malformed."""


@dataclass(frozen=True)
class Caps:
    """Size caps for reading untrusted bundles (bytes)."""

    json_bytes: int = 2 * 2**20
    tensor_bytes: int = 64 * 2**20


def atomic_write(path: Path, data: bytes) -> None:
    """Write through a temporary file in the same folder and rename it into place."""
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_bundle(directory: Path, stem: str, bundle: Bundle, header: dict[str, Any]) -> None:
    # Own, packed copies: safetensors refuses views and tensors that share storage.
    tensors = {
        k: v.detach().cpu().contiguous().clone()
        for k, v in bundle.items()
        if isinstance(v, torch.Tensor)
    }
    values = {k: v for k, v in bundle.items() if not isinstance(v, torch.Tensor)}
    directory.mkdir(parents=True, exist_ok=True)
    if tensors:
        atomic_write(directory / f"{stem}{TENSOR_SUFFIX}", save_tensors(tensors))
    document = {**header, "values": values, "tensors": sorted(tensors)}
    text = json.dumps(document, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    atomic_write(directory / f"{stem}{JSON_SUFFIX}", text.encode("ascii"))


def read_capped(path: Path, limit: int | None) -> bytes | None:
    """The file's bytes; ``None`` when it does not exist; ``WireError`` for anything odd."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise WireError(f"{path.name}: cannot stat ({error.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        raise WireError(f"{path.name} is not a regular file")
    if limit is not None and info.st_size > limit:
        raise WireError(f"{path.name} is {info.st_size} bytes; at most {limit} are accepted")
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        with os.fdopen(os.open(path, flags), "rb") as file:
            data = file.read(-1 if limit is None else limit + 1)
    except OSError as error:
        raise WireError(f"{path.name}: cannot read ({error.strerror})") from None
    if limit is not None and len(data) > limit:
        raise WireError(f"{path.name} grew past {limit} bytes while being read")
    return data


def read_bundle(
    directory: Path, stem: str, caps: Caps | None = None
) -> tuple[dict[str, Any], Bundle] | None:
    """``(header, bundle)``, or ``None`` when the bundle's JSON file does not exist."""
    raw = read_capped(directory / f"{stem}{JSON_SUFFIX}", caps and caps.json_bytes)
    if raw is None:
        return None
    try:
        document = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as error:
        raise WireError(f"{stem}{JSON_SUFFIX} is not valid JSON: {str(error)[:200]}") from None
    if not isinstance(document, dict):
        raise WireError(f"{stem}{JSON_SUFFIX} does not hold a JSON object")
    values, names = document.pop("values", None), document.pop("tensors", None)
    if not isinstance(values, dict) or not isinstance(names, list):
        raise WireError(f"{stem}{JSON_SUFFIX} lacks its 'values' object or 'tensors' list")
    if not all(isinstance(n, str) for n in names) or set(names) & set(values):
        raise WireError(f"{stem}{JSON_SUFFIX}: tensor names must be strings unlike value names")
    tensors = read_tensors(directory, stem, caps) if names else {}
    if sorted(tensors) != sorted(names):
        raise WireError(
            f"{stem}{TENSOR_SUFFIX} holds tensors {sorted(tensors)[:10]}, "
            f"the header lists {sorted(names)[:10]}"
        )
    return document, {**values, **tensors}


def read_tensors(directory: Path, stem: str, caps: Caps | None) -> dict[str, torch.Tensor]:
    raw = read_capped(directory / f"{stem}{TENSOR_SUFFIX}", caps and caps.tensor_bytes)
    if raw is None:
        raise WireError(f"{stem}{TENSOR_SUFFIX} is missing")
    try:
        return load_tensors(raw)
    except Exception as error:  # noqa: BLE001  (safetensors raises its own error types)
        raise WireError(f"{stem}{TENSOR_SUFFIX} is not a valid safetensors file: {error}") from None
