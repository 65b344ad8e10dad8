"""The committed hidden cases: inputs and expected values apart, hidden inputs unlike the public
ones, and the rule that keeps committed files when a regeneration says the same."""

from __future__ import annotations

import torch

from course.hidden_cases import same_value
from course.judge import EXPECTED_ROOT, INPUTS_ROOT
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
