"""Cases for the training loop's parts: cross-entropy, get_batch, checkpoints."""

from __future__ import annotations

import io
import tempfile
from pathlib import Path

import numpy as np
import torch

from tests.cases.compare import close_mismatch, first_failure
from tests.cases.core import Bundle, case
from tests.cases.draws import generator, integers, normal, permutation


def loss_problem(seed: int, shape: tuple[int, ...], scale: float = 1.0) -> Bundle:
    rng = generator(seed)
    logits = normal(rng, shape) * scale
    targets = integers(rng, 0, shape[-1], shape[:-1])
    return {"logits": logits, "targets": targets}


def check_loss(outputs: Bundle, expected: Bundle, inputs: Bundle) -> str | None:
    return first_failure(
        close_mismatch(outputs, expected, "loss"),
        close_mismatch(outputs, expected, "grad") if "grad" in outputs else None,
    )


def loss_case(name: str, public, *, gradient: bool = False):
    def call(adapters, inputs: Bundle) -> Bundle:
        """Cross-entropy of fixed logits and targets (and its gradient)."""
        logits = inputs["logits"].clone().requires_grad_(gradient)
        loss = adapters.run_cross_entropy(logits, inputs["targets"])
        if not gradient:
            return {"loss": loss}
        loss.backward()
        return {"loss": loss, "grad": logits.grad}

    check = check_loss if gradient else lambda o, e, i: close_mismatch(o, e, "loss")
    return case("cross_entropy", name, check=check, public=public)(call)


loss_case("basic", lambda s: loss_problem(0, (8, 5)))
loss_case("leading_dims", lambda s: loss_problem(1, (2, 3, 7)))
loss_case("large_logits", lambda s: loss_problem(2, (4, 6), scale=1000.0))
loss_case("gradient", lambda s: loss_problem(3, (4, 6)), gradient=True)


def check_windows(outputs: Bundle, expected: Bundle, inputs: Bundle) -> str | None:
    """Every row is a window of the dataset and its shifted targets; every start is drawn."""
    data = inputs["dataset"]
    draws, batch, length = inputs["draws"], inputs["batch_size"], inputs["context_length"]
    x, y = outputs.get("x"), outputs.get("y")
    for name, t in (("x", x), ("y", y)):
        if not isinstance(t, torch.Tensor) or t.shape != (draws, batch, length):
            return f"{name}: expected {draws} batches of shape ({batch}, {length}), got {getattr(t, 'shape', t)!r}"
        if t.is_floating_point() or t.dtype == torch.bool:
            return f"{name}: expected integer token ids, got dtype {t.dtype}"
    position = {int(v): i for i, v in enumerate(data.tolist())}  # the values are distinct
    windows = torch.stack([data[i : i + length + 1] for i in range(len(data) - length)])
    starts = [position.get(int(v), -1) for v in x[..., 0].flatten().tolist()]
    valid = len(data) - length
    bad = [s for s in starts if not 0 <= s < valid]
    if bad:
        return f"x: {len(bad)} rows do not start at a valid window start (0 .. {valid - 1})"
    chosen = windows[torch.tensor(starts)].reshape(draws, batch, length + 1)
    if not torch.equal(x.long(), chosen[..., :-1]):
        return "x: rows are not consecutive windows of the dataset"
    if not torch.equal(y.long(), chosen[..., 1:]):
        return "y: targets are not the inputs shifted by one position (y[i] = data[start + i + 1])"
    missing = sorted(set(range(valid)) - set(starts))
    if missing:
        hint = "\nhint: randint's upper bound is exclusive: draw starts from randint(0, len(dataset) - context_length)"
        return f"window starts {missing} were never drawn" + (
            hint if missing == [valid - 1] else ""
        )
    counts = np.bincount(starts, minlength=valid)
    mean = len(starts) / valid
    if np.abs(counts - mean).max() > 6 * mean**0.5 + 1:
        return f"window starts are far from uniform (counts from {counts.min()} to {counts.max()})"
    return None


def batch_problem(seed: int, size: int, batch: int, length: int, draws: int) -> Bundle:
    dataset = permutation(generator(seed), 60_000)[:size]
    return {"dataset": dataset, "batch_size": batch, "context_length": length, "draws": draws}


@case(
    "get_batch",
    "windows",
    check=check_windows,
    public=lambda s: batch_problem(0, 40, 16, 7, 60),
)
def get_batch(adapters, inputs: Bundle) -> Bundle:
    """Many draws from a small dataset of distinct ids (a numpy array)."""
    dataset = inputs["dataset"].numpy()
    pairs = [
        adapters.run_get_batch(dataset, inputs["batch_size"], inputs["context_length"], "cpu")
        for _ in range(inputs["draws"])
    ]
    return {
        "x": torch.stack([torch.as_tensor(x) for x, _ in pairs]),
        "y": torch.stack([torch.as_tensor(y) for _, y in pairs]),
    }


case(
    "get_batch",
    "one_window",
    check=check_windows,
    public=lambda s: batch_problem(1, 5, 3, 4, 2),
)(get_batch.call)


CHECKPOINT_LR = 1e-2


def small_model(weights: Bundle, prefix: str) -> torch.nn.Module:
    model = torch.nn.Sequential(
        torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)
    ).double()
    model.load_state_dict(
        {k.removeprefix(prefix): v for k, v in weights.items() if k.startswith(prefix)}
    )
    return model


def train(model: torch.nn.Module, optimizer: torch.optim.Optimizer, batches: torch.Tensor) -> None:
    for inputs in batches:
        loss = model(inputs).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def flat_parameters(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def checkpoint_problem(seed: int, saved_at: int, after: int, target: str) -> Bundle:
    rng = generator(seed)
    shapes = {"0.weight": (8, 4), "0.bias": (8,), "2.weight": (2, 8), "2.bias": (2,)}
    inputs: Bundle = {"saved_at": saved_at, "after": after, "target": target}
    for prefix in ("w.", "other."):
        for name, shape in shapes.items():
            inputs[prefix + name] = normal(rng, shape, torch.float64) * 0.5
    inputs["batches"] = normal(rng, (saved_at + after, 16, 4), torch.float64)
    return inputs


def optimizer_for(model: torch.nn.Module, lr: float = CHECKPOINT_LR) -> torch.optim.Optimizer:
    # torch's own AdamW, so this case grades checkpointing alone, not the student's optimizer.
    return torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.1)


def iteration_offset(got: object, saved: int) -> str:
    """A diagnosis line when the iteration comes back shifted by a small amount."""
    if not isinstance(got, int) or not 0 < abs(got - saved) <= 2:
        return ""
    return (
        f"\n  diagnosis: the iteration is off by {got - saved:+d} between save and load: store "
        "the iteration you are given and return exactly that"
    )


def check_checkpoint(outputs: Bundle, expected: Bundle, inputs: Bundle) -> str | None:
    iteration = outputs.get("iteration")
    resumed = {"continued": outputs.get("resumed")}
    return first_failure(
        iteration != expected["iteration"]
        and f"load returned iteration {iteration!r}, saved was {expected['iteration']}"
        + iteration_offset(iteration, expected["iteration"]),
        close_mismatch(outputs, expected, "continued", "training on after saving"),
        close_mismatch(
            resumed,
            expected,
            "continued",
            "training on after loading into a fresh model and optimizer",
        ),
    )


@case(
    "checkpoint",
    "path",
    check=check_checkpoint,
    public=lambda s: checkpoint_problem(0, 3, 4, "path"),
)
def checkpoint(adapters, inputs: Bundle) -> Bundle:
    """Train, save, train on; then load into a fresh model and optimizer and train on again."""
    saved_at, batches = inputs["saved_at"], inputs["batches"]
    model = small_model(inputs, "w.")
    optimizer = optimizer_for(model)
    train(model, optimizer, batches[:saved_at])
    with tempfile.TemporaryDirectory() as scratch:
        target = Path(scratch) / "checkpoint.pt" if inputs["target"] == "path" else io.BytesIO()
        adapters.run_save_checkpoint(model, optimizer, saved_at, target)
        train(model, optimizer, batches[saved_at:])
        fresh = small_model(inputs, "other.")
        fresh_optimizer = optimizer_for(fresh, lr=0.5)  # the loaded state must restore the lr
        if isinstance(target, io.BytesIO):
            target.seek(0)
        iteration = adapters.run_load_checkpoint(target, fresh, fresh_optimizer)
    train(fresh, fresh_optimizer, batches[saved_at:])
    iteration = (
        int(iteration) if isinstance(iteration, int | torch.Tensor) else repr(iteration)[:100]
    )
    return {
        "iteration": iteration,
        "continued": flat_parameters(model),
        "resumed": flat_parameters(fresh),
    }


case(
    "checkpoint",
    "bytesio",
    check=check_checkpoint,
    public=lambda s: checkpoint_problem(1, 2, 3, "bytesio"),
)(checkpoint.call)
