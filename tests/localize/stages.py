"""Shared by every module here: the reference's output at each stage of a composite
(``fixtures/stages.npz``, written by ``make fixtures``), how far an output is off it, the first
stage or probe that is off, the line naming it, and whether a student's call runs or raises."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import numpy as np
import torch

from tests.common import FIXTURES_PATH

STAGES = FIXTURES_PATH / "stages.npz"
# A stage is off when it differs from the reference's float64 output by more than this share of
# the output's scale: float32 code that is right is about a hundred times closer.
STAGE_RTOL = 1e-4
RMS_EPS = 1e-5


@cache
def stage_data() -> dict[str, np.ndarray]:
    if not STAGES.is_file():
        return {}
    with np.load(STAGES, allow_pickle=False) as data:
        return {name: data[name] for name in data.files}


def to_array(value: object) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", torch.float64).numpy()
    return np.asarray(value, dtype=np.float64)


def stage_error(actual: object, expected: np.ndarray) -> str:
    """``""`` when ``actual`` matches ``expected``; else how far off it is."""
    got = to_array(actual)
    if got.shape != expected.shape:
        return f"shape {got.shape}, expected {expected.shape}"
    if not np.isfinite(got).all():
        return "NaN or inf in the output"
    error = np.abs(got - expected)
    tolerance = STAGE_RTOL * max(float(np.abs(expected).max(initial=0.0)), 1e-6)
    if error.max(initial=0.0) <= tolerance:
        return ""
    return f"max abs error {error.max():.3g}, {np.count_nonzero(error > tolerance)} of {error.size} values off"


def first_off(checks: list[tuple[str, Callable[[], object], np.ndarray]]) -> tuple[str, str] | None:
    """The first ``(stage, error)`` whose output is off; ``None`` when all match or a stage's
    call fails (nothing measured there, so nothing to say)."""
    for stage, run, expected in checks:
        try:
            error = stage_error(run(), expected)
        except Exception:  # noqa: BLE001  (an unfinished adapter: no evidence either way)
            return None
        if error:
            return stage, error
    return None


def first_probe_off(
    probes: list[tuple[str, Callable[[], object], np.ndarray]],
) -> tuple[str, str] | None:
    """Like :func:`first_off`, but a probe whose call fails is skipped (the code may refuse an
    unusual configuration; the other probes still measure something)."""
    for probe in probes:
        found = first_off([probe])
        if found:
            return found
    return None


def heads_of(t: torch.Tensor, heads: int) -> torch.Tensor:
    return t.reshape(*t.shape[:-1], heads, -1).transpose(-2, -3)


def merge_heads(t: torch.Tensor) -> torch.Tensor:
    return t.transpose(-2, -3).flatten(-2)


def tensor(name: str) -> torch.Tensor:
    return torch.from_numpy(stage_data()[name]).float()


def stage_line(stage: str, error: str, checked: str) -> str:
    return (
        f"the first stage whose output leaves the reference's is {stage} ({error}); {checked} "
        "were computed with your own adapters on the reference's input to each stage"
    )


def ran(call: Callable[[], object]) -> bool | None:
    """``True`` when ``call`` runs, ``False`` when it raises, ``None`` when its adapter is not
    written yet (``NotImplementedError``: nothing measured)."""
    try:
        call()
    except NotImplementedError:
        return None
    except Exception:  # noqa: BLE001  (student code: any exception)
        return False
    return True


def first_stage_wrong(stages: list) -> tuple[str, str] | None:
    """Like :func:`first_off`, but a stage whose own call raises is named too (the error lies
    there); ``None`` when every stage is right or one is not written yet
    (``NotImplementedError`` locates nothing)."""
    for stage, run, expected in stages:
        try:
            error = stage_error(run(), expected)
        except NotImplementedError:
            return None
        except Exception as raised:  # noqa: BLE001  (student code: any exception)
            return stage, f"it raised {type(raised).__name__} there"
        if error:
            return stage, error
    return None


def raises(call: Callable[[], object], tries: int = 3) -> bool:
    """Whether ``call`` raises in one of ``tries`` calls (random code may raise only sometimes)."""
    for _ in range(tries):
        try:
            call()
        except Exception:  # noqa: BLE001  (student code: any exception)
            return True
    return False


def composite_raised(stages: list, checked: str, composite: str) -> list[str]:
    """A composite raised: the first of its stages that is off; or, when every stage runs and is
    right alone, that the error lies in how the composite builds or joins them."""
    off = first_off(stages)
    if off:
        return [stage_line(*off, checked)]
    try:
        right = all(not stage_error(run(), expected) for _, run, expected in stages)
    except Exception:  # noqa: BLE001  (a stage's own adapter fails: nothing located)
        return []
    if not right or not stages:
        return []
    return [
        f"{checked} are each right alone (your own adapters on the reference's input to each), "
        f"but your {composite} raised: the error is in how it builds or joins them (the sizes it "
        "configures, the shapes it passes on)"
    ]
