"""The diagnoses of the model's layers and of decoding (embedding init, RoPE, attention, the
block and LM, generation: tests/localize.py, tests/measure.py, the advice tests): silent on
right answers and where their evidence does not hold, naming the property a wrong answer
breaks."""

from __future__ import annotations

import pytest
import torch

from tests.test_init import check_truncated_normal

INIT_HINTS = dict(std_hint="std", cut_hint="cut")


def truncated_normal(mean: float, std: float) -> torch.Tensor:
    torch.manual_seed(0)
    weights = torch.empty(1_000_000)
    return torch.nn.init.trunc_normal_(weights, mean=mean, std=std, a=-3.0, b=3.0)


def test_a_centred_init_passes_the_init_check():
    check_truncated_normal(truncated_normal(0.0, 1.0), 1.0, "init", **INIT_HINTS)


def test_an_init_off_centre_names_the_mean():
    with pytest.raises(AssertionError) as failure:
        check_truncated_normal(truncated_normal(0.5, 1.0), 1.0, "init", **INIT_HINTS)
    assert "hint: the weights must be centred on 0" in str(failure.value)


def test_a_centred_init_of_the_wrong_spread_is_not_called_off_centre():
    with pytest.raises(AssertionError) as failure:
        check_truncated_normal(truncated_normal(0.0, 0.5), 1.0, "init", **INIT_HINTS)
    assert "centred" not in str(failure.value)
