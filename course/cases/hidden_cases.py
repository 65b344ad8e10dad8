"""``make hidden-cases``: the grader's case inputs and expected values, into ``course/cases/hidden/``.

``course/cases/hidden/inputs/<component>/<case id>.*`` holds every case's inputs, public and hidden
(the driver reads them inside the sandbox); ``course/cases/hidden/expected/<component>/<case id>.*``
holds their expected values (only the judge reads them). The public cases without a snapshot
also get their expected values copied to ``fixtures/expected/`` (they ship: the students' local
tests compare with them, since the computations that made them must not ship). Hidden instances use other seeds,
shapes and hyperparameters than the shipped fixtures, so a submission cannot look answers up;
``course/`` never ships, and the sandbox never mounts ``expected/``.

Expected values come from the one table of independent computations, ``course/cases/truths``
(``torch.nn.functional`` in float64, a naive Transformer, tiktoken, a naive BPE trainer); each
case is then run on the reference solution and must pass before anything is written. Float tolerances
are derived as the snapshots' are, from the spread of correct implementations
(``course/cases/fairness/spread.py``): ``atol = max(10 e_ref, 4 e_styles) + 8 eps_f32 max|truth|``,
from the float32 errors of the reference and of the correct styles against the truth.
Deterministic: rerunning rewrites identical files.
"""

from __future__ import annotations

import math
import shutil
import tempfile
from pathlib import Path

import torch

import tests.adapters as reference_adapters
from course.cases.checksums import write_checksums
from course.cases.fairness.spread import AGREEMENT, derived_atol, spread_error
from course.cases.hidden_inputs import HIDDEN_INSTANCES
from course.cases.truths import truth_of
from course.cases.truths.tolerances import TOLERANCE_FROM_SPREAD
from course.paths import HIDDEN
from tests.cases import CASES, Case, judge_case, run_case
from tests.cases.compare import expect_close, expect_snapshot
from tests.cases.core import Bundle
from tests.cases.public import EXPECTED as FIXTURES_EXPECTED
from tests.cases.public import public_inputs
from tests.cases.shipped import Shipped
from tests.cases.wire import read_bundle, write_bundle

f64 = torch.float64


def derived_expected(case: Case, inputs: Bundle, truth: torch.Tensor) -> Bundle:
    """``out``'s truth with its tolerance derived from the float32 errors of the reference and
    of the correct styles (``course/cases/fairness/spread.py``)."""
    reference = run_case(case, reference_adapters, inputs)
    if reference.raised:
        raise RuntimeError(f"{case.component}/{case.name}: the reference raised {reference.raised}")
    ours = reference.data["out"][:, 0] if "heads" in inputs else reference.data["out"]
    if ours.dtype != torch.float32 or ours.shape != truth.shape:
        raise RuntimeError(
            f"{case.component}/{case.name}: reference output {ours.dtype} {tuple(ours.shape)}"
        )
    scale = float(truth.abs().max())
    error = float((ours.to(f64) - truth).abs().max())
    if not error <= AGREEMENT * max(scale, 1.0):
        raise RuntimeError(
            f"{case.component}/{case.name}: reference disagrees with the truth ({error:.3e})"
        )
    return expect_close("out", truth, derived_atol(error, spread_error(case, inputs, truth), scale))


def computed_expected(case: Case, inputs: Bundle) -> Bundle:
    """The case's expected values from its entry in the truths table, with any tolerance left
    to the spread derived here."""
    expected = truth_of(case.component, case.name)(inputs)
    spread = [k for k, v in expected.items() if v is TOLERANCE_FROM_SPREAD]
    if not spread:
        return expected
    if spread != ["out.atol"]:
        raise ValueError(
            f"{case.component}/{case.name}: only out.atol can be derived from the spread, "
            f"not {', '.join(spread)}"
        )
    return expected | derived_expected(case, inputs, expected["out"])


def public_expected(case: Case, inputs: Bundle) -> Bundle:
    """A snapshot's values (tolerance and hints included) where the case has one."""
    if case.snapshot is not None:
        return expect_snapshot("out", case.snapshot) | {"reveal": True}
    return computed_expected(case, inputs) | {"reveal": True}


def instances() -> list[tuple[Case, str, Bundle, Bundle]]:
    """Every (case, id, inputs, expected): the public instances first, then the hidden ones."""
    shipped, found = Shipped(), []
    for key, case in sorted(CASES.items()):
        if case.public_inputs is not None:
            inputs = public_inputs(case, shipped)
            found.append((case, case.public_id, inputs, public_expected(case, inputs)))
        hidden = HIDDEN_INSTANCES.get(key, {})
        if not hidden:
            raise RuntimeError(
                f"case {key[0]}/{key[1]} has no hidden instances (course/cases/hidden_inputs.py)"
            )
        for instance, make in sorted(hidden.items()):
            inputs = make()
            expected = computed_expected(case, inputs) | {"reveal": False}
            found.append((case, case.hidden_id(instance), inputs, expected))
    return found


def same_value(key: str, old: object, new: object) -> bool:
    """Whether a committed value says what a regenerated one says: integers, strings, dtypes
    and shapes exactly, floats within a few dozen ulps of their scale, derived tolerances
    (which follow the reference's rounding errors on this CPU) within a factor of 4."""
    if isinstance(old, torch.Tensor) and isinstance(new, torch.Tensor):
        if old.dtype != new.dtype or old.shape != new.shape:
            return False
        if not old.is_floating_point() or old.numel() == 0:
            return torch.equal(old, new)
        scale = max(float(new.abs().max()), float(torch.finfo(new.dtype).tiny))
        error = float((old.double() - new.double()).abs().max())
        return error <= 64 * float(torch.finfo(new.dtype).eps) * scale
    if type(old) is not type(new):
        return False
    if isinstance(old, float):
        if key.endswith(".atol"):
            return new / 4 <= old <= 4 * new
        return math.isclose(old, new, rel_tol=1e-12)
    if isinstance(old, dict):
        return old.keys() == new.keys() and all(same_value(k, old[k], new[k]) for k in old)
    if isinstance(old, list):
        return len(old) == len(new) and all(
            same_value(key, a, b) for a, b in zip(old, new, strict=True)
        )
    return old == new


def read_case(root: Path, case: Case, case_id: str) -> tuple[Bundle, Bundle] | None:
    """A written case's (inputs, expected), if it has both."""
    found = [read_bundle(root / side / case.component, case_id) for side in ("inputs", "expected")]
    return None if None in found else (found[0][1], found[1][1])


def write_case(
    target: Path, scratch: Path, case: Case, case_id: str, inputs: Bundle, expected: Bundle
) -> None:
    """Write a case into ``scratch`` after the reference passes it; keep the committed files
    in ``target`` when they say the same (so regenerating on another CPU rewrites only what
    changed in behaviour)."""
    outputs = run_case(case, reference_adapters, inputs)
    message = judge_case(case, outputs, expected, inputs)
    if message is not None:
        raise RuntimeError(f"{case_id}: the reference solution fails its own case:\n{message}")
    header = {"case": case_id, "component": case.component, "kind": case.name}
    write_bundle(scratch / "inputs" / case.component, case_id, inputs, header)
    write_bundle(scratch / "expected" / case.component, case_id, expected, header)
    old, new = read_case(target, case, case_id), read_case(scratch, case, case_id)
    if old is None or not all(same_value("", a, b) for a, b in zip(old, new, strict=True)):
        return
    if judge_case(case, outputs, old[1], old[0]) is not None:
        return
    for side in ("inputs", "expected"):
        for path in (target / side / case.component).glob(f"{case_id}.*"):
            shutil.copyfile(path, scratch / side / case.component / path.name)


def write_hidden_cases(target: Path = HIDDEN) -> int:
    """Build everything in a scratch folder, verify it, then swap it into place."""
    torch.use_deterministic_algorithms(True)
    found = instances()
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".hidden-", dir=target.parent))
    try:
        for case, case_id, inputs, expected in found:
            write_case(target, scratch, case, case_id, inputs, expected)
        if target.exists():
            shutil.rmtree(target)
        scratch.rename(target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    publish_public_expected([c for c, case_id, _, _ in found if case_id == c.public_id], target)
    return len(found)


def publish_public_expected(
    cases: list[Case], source: Path, shipped: Path = FIXTURES_EXPECTED
) -> None:
    """Copy the written expected bundles of the public cases without a snapshot to the shipped
    fixtures, replacing what was there."""
    scratch = Path(tempfile.mkdtemp(prefix=".expected-", dir=shipped.parent))
    try:
        for case in cases:
            if case.snapshot is not None:
                continue
            (scratch / case.component).mkdir(exist_ok=True)
            for path in (source / "expected" / case.component).glob(f"{case.public_id}.*"):
                shutil.copyfile(path, scratch / case.component / path.name)
        if shipped.exists():
            shutil.rmtree(shipped)
        scratch.rename(shipped)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> int:
    count = write_hidden_cases()
    write_checksums()  # fixtures/expected changed with them
    print(f"wrote {count} cases (inputs and expected values) to {HIDDEN}")
    print(f"and the public cases' expected values to {FIXTURES_EXPECTED}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
