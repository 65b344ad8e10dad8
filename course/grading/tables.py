"""Checks shared by the readers of the rubric's course-operations tables."""

from __future__ import annotations

from typing import Any


def reject_unknown(table: str, entry: dict, known: set[str]) -> None:
    """``ValueError`` naming the keys of ``entry`` that ``table`` does not have."""
    unknown = sorted(set(entry) - known)
    if unknown:
        raise ValueError(f"[{table}]: unknown keys {unknown}; known: {sorted(known)}")


def choice(table: str, key: str, value: Any, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ValueError(f"[{table}] {key} = {value!r}: must be one of {list(allowed)}")
    return value


def positive_number(table: str, key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"[{table}] {key} = {value!r}: must be a number above 0")
    return float(value)
