"""The committed hidden cases: inputs and expected values apart, hidden inputs unlike the public
ones, the rule that keeps committed files when a regeneration says the same, and one truth and
some hidden instances for every case (none left over)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from course.cases.hidden_cases import computed_expected, same_value
from course.cases.hidden_inputs import HIDDEN_INSTANCES
from course.cases.truths import TRUTHS, truth_of
from course.cases.truths.tolerances import TOLERANCE_FROM_SPREAD
from course.grading.judge import EXPECTED_ROOT, INPUTS_ROOT
from tests.cases import CASES, Outputs, judge_case
from tests.cases.core import normalize
from tests.cases.wire import read_bundle


def bundles(root, component):
    return {
        p.stem: read_bundle(root / component, p.stem)[1] for p in (root / component).glob("*.json")
    }


def test_inputs_hold_no_expected_values_and_hidden_inputs_are_new():
    for folder in sorted(INPUTS_ROOT.iterdir()):
        inputs = bundles(INPUTS_ROOT, folder.name)
        assert inputs.keys() == bundles(EXPECTED_ROOT, folder.name).keys()
        public = [b for case, b in inputs.items() if "-public-" in case]
        for case, bundle in inputs.items():
            assert not any(k == "reveal" or k.endswith(".atol") for k in bundle), case
            if "-hidden-" not in case:
                continue
            for name, value in bundle.items():
                if isinstance(value, torch.Tensor) and value.numel() > 8:
                    same = [p for p in public if torch.equal(p.get(name, torch.empty(0)), value)]
                    assert not same, f"{case}: {name} repeats a public input"


def test_same_value_allows_rounding_but_not_behaviour_changes():
    x = torch.linspace(-3, 3, 50, dtype=torch.float64)
    assert same_value("out", x, x + 1e-15)
    assert not same_value("out", x, x + 1e-9)
    assert not same_value("out", x, x.float())
    assert same_value("out.atol", 1e-6, 2.5e-6) and not same_value("out.atol", 1e-6, 1e-5)
    assert not same_value("lr", 0.1, 0.1 + 1e-9)
    assert same_value("", {"ids": [1, 2], "x": x}, {"ids": [1, 2], "x": x.clone()})
    assert not same_value("", {"ids": [1, 2]}, {"ids": [1, 3]})
    assert not same_value("", {"ids": [1, 2]}, {"ids": [1, 2], "extra": 0})
    assert not same_value("n", torch.tensor([1, 2]), torch.tensor([1, 3]))


def test_a_public_case_and_its_hidden_instances_apply_the_same_check():
    # Clipping by max / sqrt(sum of squares + 1e-6) instead of max / (norm + 1e-6): a small
    # deviation from the handout's formula that the public small-norm instance catches, so the
    # hidden ones must too (and the right formula passes all of them).
    def clip(eps_under_root: bool):
        def run_gradient_clipping(parameters, max_l2_norm):
            grads = [p.grad for p in parameters if p.grad is not None]
            squares = sum(float((g.double() ** 2).sum()) for g in grads)
            norm = (squares + 1e-6) ** 0.5 if eps_under_root else squares**0.5 + 1e-6
            if norm > max_l2_norm:
                for g in grads:
                    g.mul_(max_l2_norm / norm)

        return SimpleNamespace(run_gradient_clipping=run_gradient_clipping)

    case = CASES["gradient_clipping", "small_norm"]
    inputs, expected = (
        bundles(INPUTS_ROOT, "gradient_clipping"),
        bundles(EXPECTED_ROOT, "gradient_clipping"),
    )
    ids = [i for i in inputs if i.startswith("gradient_clipping-") and "-small_norm" in i]
    assert any("-public-" in i for i in ids) and any("-hidden-" in i for i in ids)
    for case_id in ids:
        for eps_under_root, should_fail in ((False, False), (True, True)):
            outputs = Outputs(normalize(case.call(clip(eps_under_root), inputs[case_id])))
            verdict = judge_case(case, outputs, expected[case_id], inputs[case_id])
            assert (verdict is not None) == should_fail, (case_id, eps_under_root, verdict)


def test_every_case_has_one_truth_and_hidden_instances_and_nothing_is_left_over():
    assert sorted(TRUTHS) == sorted(CASES), "truths without a case, or cases without a truth"
    assert sorted(HIDDEN_INSTANCES) == sorted(CASES), "hidden instances without a case, or none"
    assert all(HIDDEN_INSTANCES[key] for key in CASES)


def test_a_missing_truth_is_named_and_only_out_is_derived_from_the_spread(monkeypatch):
    with pytest.raises(KeyError, match="case gelu/basic has no truth: add one to course/cases"):
        truth_of("gelu", "basic")
    case = CASES["silu", "basic"]
    derived = {"out": torch.zeros(2), "other.atol": TOLERANCE_FROM_SPREAD}
    monkeypatch.setitem(TRUTHS, ("silu", "basic"), lambda inputs: derived)
    with pytest.raises(ValueError, match="only out.atol can be derived from the spread, not other"):
        computed_expected(case, {"x": torch.zeros(2)})


def core_sizes(bundle) -> dict[tuple[str, int], int]:
    """The sizes of each input tensor's last two axes (the feature and sequence axes a mistake
    can confuse; leading batch axes are the ranks' business), by (input, axis from the end)."""
    return {
        (name, -axis): value.shape[-axis]
        for name, value in bundle.items()
        if isinstance(value, torch.Tensor)
        for axis in range(1, min(value.dim(), 2) + 1)
    }


def coincidences(public, hidden) -> list[tuple]:
    """Pairs of axes of the same size in the public inputs that a hidden instance tells apart:
    a mistake that confuses them passes the public case and fails the hidden one."""
    ours, theirs = core_sizes(public), core_sizes(hidden)
    shared = sorted(set(ours) & set(theirs))
    return [
        (a, b, ours[a])
        for i, a in enumerate(shared)
        for b in shared[i + 1 :]
        if ours[a] == ours[b] and theirs[a] != theirs[b]
    ]


def test_a_public_case_tells_apart_every_pair_of_sizes_its_hidden_instances_do():
    found = []
    for folder in sorted(INPUTS_ROOT.iterdir()):
        inputs = bundles(INPUTS_ROOT, folder.name)
        for case_id, public in inputs.items():
            if "-public-" not in case_id:
                continue
            kind = case_id.split("-public-")[1]
            for hidden_id, hidden in inputs.items():
                if f"-hidden-{kind}-" in hidden_id:
                    found += [(case_id, hidden_id, *c) for c in coincidences(public, hidden)]
    assert found == []


def test_a_size_coincidence_is_seen():
    square, wide = torch.zeros(2, 3, 3), torch.zeros(2, 3, 5)
    assert coincidences({"x": square}, {"x": wide}) == [(("x", -2), ("x", -1), 3)]
    assert coincidences({"x": wide}, {"x": square}) == []
    assert (
        coincidences({"q": torch.zeros(4, 16), "k": torch.zeros(3, 16)}, {"q": torch.zeros(4, 8)})
        == []
    )
