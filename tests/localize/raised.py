"""When a case's call raised (get_batch, the schedule, AdamW, clipping, linear, embedding,
softmax, RMSNorm): simpler inputs it runs on say where the error lies."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import numpy as np
import torch

from tests.cases.core import Bundle
from tests.cases.optim import adamw_formula
from tests.localize.stages import raises, stage_error, to_array
from tests.measure import run_starts, schedule_phases, window_lines


def get_batch_raised(adapters: ModuleType, inputs: Bundle, expected: Bundle) -> list[str]:
    """get_batch raised: its rows measured on a longer dataset of distinct ids, with the same
    batch size and context length."""
    size, length, batch = len(inputs["dataset"]), inputs["context_length"], inputs["batch_size"]
    longer = torch.arange(100, 100 + size + 1000 * (length + 1))
    try:
        x, y = (
            torch.as_tensor(t) for t in adapters.run_get_batch(longer.numpy(), batch, length, "cpu")
        )
    except Exception:  # noqa: BLE001  (it raises there too: nothing located)
        return []
    lines = window_lines(longer, x, y, length)
    if not raises(lambda: adapters.run_get_batch(inputs["dataset"].numpy(), batch, length, "cpu")):
        return []  # it does not raise on the case's own dataset (or only seldom): not located
    if lines:
        return [f"on a dataset of {len(longer)} tokens your get_batch runs, and there " + lines[0]]
    shapes_right = x.shape == (batch, length) and y.shape == x.shape
    if not shapes_right or not run_starts(longer, x) or not run_starts(longer, y):
        return []
    return [
        f"your get_batch raised on {size} tokens with context_length={length} (valid window "
        f"starts 0 .. {size - length - 1}), but its windows are right on {len(longer)} tokens: "
        "look at the ends of the start range (a window holds context_length + 1 tokens)"
    ]


def schedule_raised(adapters: ModuleType, inputs: Bundle, expected: Bundle) -> list[str]:
    """The schedule raised: at which iteration, and the phases that differ (raising counts as
    differing)."""
    args = [inputs[k] for k in ("max", "min", "warmup", "cycle")]
    lrs, raised = [], []
    for it in inputs["its"]:
        try:
            lrs.append(float(adapters.run_get_lr_cosine_schedule(it, *args)))
        except Exception as error:  # noqa: BLE001  (student code: any exception)
            lrs.append(None)
            raised.append(f"{type(error).__name__} at it={it}")
    phases = schedule_phases(inputs, {"lrs": lrs}, expected)
    if not raised or len(raised) == len(lrs) or not phases:
        return []  # raising everywhere locates nothing
    return [
        f"your schedule raised {raised[0]} (warmup_iters={args[2]}, cosine_cycle_iters="
        f"{args[3]}); {phases[0]}"
    ]


def adamw_raised(adapters: ModuleType, inputs: Bundle, expected: Bundle) -> list[str]:
    """AdamW raised: at which step, and whether in the Python-float arithmetic of the scalars
    computed from the step count (a division by zero, a square root of a negative number)."""
    for step in range(1, inputs["steps"] + 1):
        try:
            adamw_formula.call(adapters, inputs | {"steps": step})
        except (ZeroDivisionError, ValueError) as error:
            if isinstance(error, ValueError) and "math domain" not in str(error):
                return []
            b1, b2 = inputs["defaults"]["betas"]
            return [
                f"your AdamW raised {type(error).__name__} in float arithmetic at step t={step} "
                f"(counting from 1): the scalars computed from t must stay positive, the bias "
                f"corrections 1 - beta1^t = {1 - b1**step:.4g} and 1 - beta2^t = {1 - b2**step:.4g} "
                "and the square root of the second"
            ]
        except Exception:  # noqa: BLE001  (another kind of error: nothing located)
            return []
    return []


def clipping_raised(clip: Callable) -> list[str]:
    """Clipping raised: does it run when no scaling is needed, and raise when it is?"""

    def runs(values: list[float], max_norm: float) -> bool:
        parameter = torch.nn.Parameter(torch.zeros(len(values)))
        parameter.grad = torch.tensor(values)
        return not raises(lambda: clip([parameter], max_norm), tries=1)

    if not runs([0.3, 0.4], 1.0) or runs([3.0, 4.0], 1.0):
        return []
    return [
        "your gradient clipping runs when the global norm is within max_l2_norm (0.5 of 1) and "
        "raises when it exceeds it (5 of 1): the error is in the scaling step"
    ]


def linear_raised(adapters: ModuleType, inputs: Bundle, expected: Bundle) -> list[str]:
    """Linear raised: with a square weight (d_in = d_out), does it run, and compute x W^T?"""
    weight, x = inputs["weight"], inputs["x"]
    d_out, d_in = weight.shape
    if d_out < d_in:
        return []
    square = weight[:d_in]
    try:
        out = adapters.run_linear(d_in, d_in, square, x)
    except Exception:  # noqa: BLE001  (it raises there too: nothing located)
        return []
    x64, w64 = to_array(x), to_array(square)
    if not stage_error(out, x64 @ w64.T):
        return [
            f"your linear runs with a square weight ({d_in}, {d_in}) but raised with weight "
            f"({d_out}, {d_in}): somewhere d_in and d_out are mixed up (the weight is stored "
            "(d_out, d_in))"
        ]
    if not stage_error(out, x64 @ w64):
        return [
            "with a square weight your linear returns x @ W, not x @ W.T: the weight is stored "
            "(d_out, d_in), so y = x W^T"
        ]
    return []


def embedding_raised(adapters: ModuleType, inputs: Bundle, expected: Bundle) -> list[str]:
    """Embedding raised: with a square table (vocab_size = d_model), does it run, and look up
    rows?"""
    weight, ids = inputs["weight"], inputs["ids"]
    vocab_size, d_model = weight.shape
    if vocab_size < d_model:
        return []
    square, square_ids = weight[:d_model], ids % d_model
    try:
        out = adapters.run_embedding(d_model, d_model, square, square_ids)
    except Exception:  # noqa: BLE001  (it raises there too: nothing located)
        return []
    table, at = to_array(square), to_array(square_ids).astype(np.int64)
    if not stage_error(out, table[at]):
        return [
            f"your embedding runs with a square table ({d_model}, {d_model}) but raised with "
            f"({vocab_size}, {d_model}): somewhere vocab_size and d_model are mixed up (the "
            "table is stored (vocab_size, d_model))"
        ]
    if not stage_error(out, table.T[at]):
        return [
            "with a square table your embedding returns column i of the table for id i, not row "
            "i: the table is (vocab_size, d_model), so look up rows, weight[token_ids]"
        ]
    return []


def right_on_one_row(
    call: Callable[[torch.Tensor], object], x: torch.Tensor, want: object, dim: int
) -> bool:
    """Whether ``call`` gives the expected output on the first 1-D row of ``x`` along ``dim``."""
    row = x.movedim(dim, -1).reshape(-1, x.shape[dim])[0]
    wanted_row = np.moveaxis(to_array(want), dim, -1).reshape(-1, x.shape[dim])[0]
    try:
        return not stage_error(call(row), wanted_row)
    except Exception:  # noqa: BLE001  (it raises on a row too: nothing located)
        return False


def row_raised_line(name: str, x: torch.Tensor, along: str) -> list[str]:
    return [
        f"your {name} is right on one row alone (a 1-D tensor) but raised on shape "
        f"{tuple(x.shape)}: each row's {along} must broadcast back along its axis (keep that axis, "
        "with size 1)"
    ]


def softmax_raised(adapters: ModuleType, inputs: Bundle, expected: Bundle) -> list[str]:
    """Softmax raised: is it right on one row alone, a 1-D tensor?"""
    x, dim = inputs["x"], inputs["dim"]
    if "out" not in expected or not right_on_one_row(
        lambda row: adapters.run_softmax(row, dim=0), x, expected["out"], dim
    ):
        return []
    return row_raised_line(f"softmax (dim={dim})", x, "max and sum")


def rmsnorm_raised(adapters: ModuleType, inputs: Bundle, expected: Bundle) -> list[str]:
    """RMSNorm raised: is it right on one position alone, a 1-D vector of features?"""
    x, weight = inputs["x"], inputs["weight"]
    call = lambda row: adapters.run_rmsnorm(len(weight), inputs["eps"], weight, row)  # noqa: E731
    if "out" not in expected or not right_on_one_row(call, x, expected["out"], -1):
        return []
    return row_raised_line("RMSNorm", x, "root mean square")
