"""Cross-entropy: does the loss change when the batch or the sequence is repeated, or when a
constant is added to a row of logits; is it right where the answer is known in closed form; and
where it raised."""

from __future__ import annotations

import math
from types import ModuleType

import torch

from tests.cases.core import Bundle


def closed_form_lines(adapters: ModuleType, vocab: int, rows: int) -> list[str]:
    """Losses known in closed form, on ``rows`` rows over ``vocab`` classes: uniform logits
    (log(vocab)), the target's logit or another logit raised by 10."""
    targets = torch.arange(rows) % vocab
    uniform = torch.zeros(rows, vocab)
    spread = math.log(math.exp(10.0) + vocab - 1)
    probes = [
        ("uniform logits (all 0)", uniform, math.log(vocab)),
        (
            "the target's logit 10 above the others",
            uniform.scatter(1, targets[:, None], 10.0),
            spread - 10,
        ),
        (
            "another logit 10 above the target's",
            uniform.scatter(1, (targets[:, None] + 1) % vocab, 10.0),
            spread,
        ),
    ]
    for described, logits, wanted in probes:
        got = float(adapters.run_cross_entropy(logits, targets))
        if not math.isclose(got, wanted, rel_tol=1e-4, abs_tol=1e-5):
            return [
                f"with {described} ({rows} rows, {vocab} classes) your loss is {got:.6g}, not "
                f"{wanted:.6g}: the log of the sum of a row's exps, minus its target's logit"
            ]
    return []


def localize_cross_entropy(adapters: ModuleType, inputs: Bundle) -> list[str]:
    logits, targets = inputs["logits"], inputs["targets"]

    def loss(x: torch.Tensor, t: torch.Tensor) -> float:
        return float(adapters.run_cross_entropy(x, t))

    try:
        base = loss(logits, targets)
        hints = []
        for axis in range(logits.dim() - 1):
            doubled = loss(torch.cat([logits, logits], axis), torch.cat([targets, targets], axis))
            if not math.isclose(doubled, base, rel_tol=1e-4, abs_tol=1e-6):
                what = "batch" if axis == 0 else "sequence"
                hints.append(
                    f"repeating the {what} (axis {axis}) changes your loss from {base:.6g} to "
                    f"{doubled:.6g}: the loss must be the mean over every leading axis, not a "
                    "sum or a mean over some of them"
                )
        hints += closed_form_lines(adapters, logits.shape[-1], logits.shape[0])
        shifted = loss(
            logits + 50.0 * torch.arange(logits.shape[-2]).reshape(-1, 1).expand(logits.shape),
            targets,
        )
    except Exception:  # noqa: BLE001  (nothing measured)
        return []
    if not math.isclose(shifted, base, rel_tol=1e-4, abs_tol=1e-5):
        hints.append(
            f"adding a constant to every logit of a row changes your loss ({base:.6g} to "
            f"{shifted:.6g}), which log-softmax must not do: subtract the row's max from every "
            "logit, the target's included, before exp"
        )
    return hints[:1]


def detached_line(adapters: ModuleType, vocab: int) -> list[str]:
    """Whether the loss of logits that require grad requires grad too (a gradient case's
    ``backward()`` raises when it does not)."""
    logits = torch.zeros(2, vocab, requires_grad=True)
    try:
        loss = adapters.run_cross_entropy(logits, torch.zeros(2, dtype=torch.long))
    except Exception:  # noqa: BLE001  (it raises here too: the shapes below say where)
        return []
    if not isinstance(loss, torch.Tensor) or loss.requires_grad:
        return []
    return [
        "your loss does not require grad although the logits do: it is cut off from them "
        "somewhere (a .detach(), .item(), .numpy() or torch.no_grad()), so backward() cannot "
        "reach the logits"
    ]


def cross_entropy_raised(adapters: ModuleType, inputs: Bundle, expected: Bundle) -> list[str]:
    """Cross-entropy raised: is its loss cut off from the logits' graph? Else on uniform logits
    (every loss is log(vocab_size)), from one row to a batch to leading dimensions, the first
    shape where it raises or is wrong."""
    vocab = inputs["logits"].shape[-1]
    detached = detached_line(adapters, vocab)
    if detached:
        return detached
    rows = max(2, inputs["logits"].shape[0])
    shapes = [("one row", (1,)), (f"{rows} rows", (rows,)), ("leading dims (2, 3)", (2, 3))]
    right_on = None
    for described, shape in shapes:
        try:
            got = float(
                adapters.run_cross_entropy(
                    torch.zeros(*shape, vocab), torch.zeros(shape, dtype=torch.long)
                )
            )
        except Exception:  # noqa: BLE001  (where it raises is the measurement)
            if right_on is None:
                return []
            return [
                f"on uniform logits your cross_entropy is right on {right_on} but raised on "
                f"{described}: what changes between them is how many rows are reduced and "
                "broadcast back (every axis but the last is a batch axis)"
            ]
        if not math.isclose(got, math.log(vocab), rel_tol=1e-5):
            return [
                f"on uniform logits (all 0) over {vocab} classes, {described}, your loss is "
                f"{got:.6g}, not log({vocab}) = {math.log(vocab):.6g}: the log of the sum of the "
                "exps over the last axis, minus the target's logit"
            ]
        right_on = described
    return []
