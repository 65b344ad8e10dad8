"""References for the training-loop cases: cross-entropy in float64 (with two common mistakes
for hints), and the checkpoint case's run without a checkpoint (torch's AdamW, no save/load)."""

from __future__ import annotations

import torch.nn.functional as F

from course.cases.truths.tolerances import float32_atol
from tests.cases.compare import expect_close
from tests.cases.core import Bundle
from tests.cases.training import flat_parameters, optimizer_for, small_model, train


def cross_entropy_expected(inputs: Bundle) -> Bundle:
    logits, targets = inputs["logits"].double(), inputs["targets"]
    flat, flat_targets = logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)
    truth = F.cross_entropy(flat, flat_targets)
    hints = {
        "summed": (
            "the loss is summed over positions; average it over every leading position",
            F.cross_entropy(flat, flat_targets, reduction="sum"),
        ),
        "negated": ("this is the log-probability without the minus sign", -truth),
    }
    leaf = flat.clone().requires_grad_(True)
    F.cross_entropy(leaf, flat_targets).backward()
    return {
        **expect_close("loss", truth, float32_atol(truth, logits), hints),
        **expect_close("grad", leaf.grad.reshape(logits.shape), 1e-6),
    }


def checkpoint_expected(inputs: Bundle) -> Bundle:
    model = small_model(inputs, "w.")
    train(model, optimizer_for(model), inputs["batches"])
    return expect_close("continued", flat_parameters(model), 1e-10) | {
        "iteration": inputs["saved_at"]
    }


def nothing(inputs: Bundle) -> Bundle:
    """A case checked by properties of its outputs alone."""
    return {}


TRUTHS = {
    **{
        ("cross_entropy", n): cross_entropy_expected
        for n in ("basic", "leading_dims", "large_logits", "gradient")
    },
    ("get_batch", "windows"): nothing,
    ("get_batch", "one_window"): nothing,
    ("checkpoint", "path"): checkpoint_expected,
    ("checkpoint", "bytesio"): checkpoint_expected,
}
