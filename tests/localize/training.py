"""Checkpoints and the training loop: what your save wrote and your load restored, and which
part of a training step or an evaluation raised."""

from __future__ import annotations

import copy
import io
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import torch

from tests.cases.core import Bundle
from tests.cases.training import CHECKPOINT_LR, optimizer_for, small_model, train
from tests.localize.stages import raises, ran

# A checkpoint is probed with the case's own model and optimizer: saved with your save, read back
# with torch.load, and loaded with your load into fresh ones, each compared with what was saved.


def same_state(a: object, b: object) -> bool:
    """Whether two state dicts (nested dicts, lists, tensors and numbers) hold the same values."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_state(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(map(same_state, a, b))
    return type(a) is type(b) and a == b


# How deep in a checkpoint's nested dicts and lists its state dicts are looked for.
SEARCHED_LEVELS = 4


def nested(contents: object, depth: int) -> Iterator[object]:
    """``contents`` and everything it holds within ``depth`` levels of dicts, lists and tuples,
    depth first."""
    yield contents
    if depth > 0 and isinstance(contents, dict | list | tuple):
        for item in contents.values() if isinstance(contents, dict) else contents:
            yield from nested(item, depth - 1)


def holds_state(saved: object, wanted: dict) -> bool:
    """Whether ``saved`` is, or contains within ``SEARCHED_LEVELS`` levels of dicts and lists,
    ``wanted``."""
    return any(same_state(node, wanted) for node in nested(saved, SEARCHED_LEVELS))


def checkpoint_at_save(adapters: ModuleType, inputs: Bundle, scratch: Path):
    """The case's model and optimizer trained to the save, their state dicts then, and where
    your save wrote them (a path or a rewound BytesIO, as the case does)."""
    model = small_model(inputs, "w.")
    optimizer = optimizer_for(model)
    train(model, optimizer, inputs["batches"][: inputs["saved_at"]])
    saved = copy.deepcopy((model.state_dict(), optimizer.state_dict()))
    target = scratch / "checkpoint.pt" if inputs["target"] == "path" else io.BytesIO()
    adapters.run_save_checkpoint(model, optimizer, inputs["saved_at"], target)
    if isinstance(target, io.BytesIO):
        target.seek(0)
    return saved, target


def fresh_model_and_optimizer(inputs: Bundle):
    fresh = small_model(inputs, "other.")
    return fresh, optimizer_for(fresh, lr=0.5)


def checkpoint_restored(adapters: ModuleType, inputs: Bundle) -> list[str]:
    """Training on after your load differs: is the model, or the optimizer, what was saved?"""
    with tempfile.TemporaryDirectory() as scratch:
        (model_state, optimizer_state), target = checkpoint_at_save(adapters, inputs, Path(scratch))
        fresh, fresh_optimizer = fresh_model_and_optimizer(inputs)
        adapters.run_load_checkpoint(target, fresh, fresh_optimizer)
    restored = fresh_optimizer.state_dict()
    if not same_state(fresh.state_dict(), model_state):
        return [
            "after your load the model's weights differ from those saved (fresh weights loaded "
            "from your checkpoint): restore the model's state dict"
        ]
    if not same_state(restored["param_groups"], optimizer_state["param_groups"]):
        lr = fresh_optimizer.param_groups[0]["lr"]
        return [
            f"after your load the optimizer's learning rate is {lr:g}, not the saved "
            f"{CHECKPOINT_LR:g} (the fresh optimizer was made with 0.5): restore the optimizer's "
            "state dict (param_groups and state), not only the model's"
        ]
    if not same_state(restored["state"], optimizer_state["state"]):
        return [
            "after your load the optimizer's state (AdamW's step count and moments) differs "
            "from the saved one, though the model's weights and the learning rate are right"
        ]
    return []


def checkpoint_raised(adapters: ModuleType, inputs: Bundle, expected: Bundle) -> list[str]:
    """Loading raised: does your checkpoint file (read back with torch.load) hold the model's
    and the optimizer's state dicts as saved? Then the error is in loading them."""
    with tempfile.TemporaryDirectory() as scratch:
        try:
            (model_state, optimizer_state), target = checkpoint_at_save(
                adapters, inputs, Path(scratch)
            )
        except Exception:  # noqa: BLE001  (saving raised: nothing located)
            return []
        try:
            contents = torch.load(target, weights_only=True)
        except Exception as error:  # noqa: BLE001  (a file torch cannot read back as data)
            contents, pickled = None, pickled_global(error)
        if isinstance(target, io.BytesIO):
            target.seek(0)
        if not raises(
            lambda: adapters.run_load_checkpoint(target, *fresh_model_and_optimizer(inputs)),
            tries=1,
        ):
            return []  # the probe's load runs: not located
    if contents is None:
        return pickled_lines(pickled)
    return saved_file_lines(contents, model_state, optimizer_state)


def pickled_global(error: Exception) -> str:
    """The object a weights-only ``torch.load`` refused to unpickle, named in its error; ``""``
    when the error is another."""
    found = re.search(r"Unsupported global: GLOBAL ([\w.]+)", str(error))
    return found.group(1) if found else ""


def pickled_lines(name: str) -> list[str]:
    if not name:
        return []
    return [
        f"your checkpoint file pickles an object of {name}: torch.load(..., weights_only=True) "
        "refuses anything but tensors and plain containers, so save model.state_dict() and "
        "optimizer.state_dict(), not the model or optimizer itself"
    ]


WRAPPER_PREFIXES = ("_orig_mod.", "module.")


def prefixed_key(contents: object) -> str:
    """A state-dict key in ``contents``, within ``SEARCHED_LEVELS`` levels (a dict's keys one
    level below it), that starts with a wrapper's prefix (torch.compile's,
    DistributedDataParallel's); ``""`` when none does."""
    keys = (
        key
        for node in nested(contents, SEARCHED_LEVELS - 1)
        if isinstance(node, dict)
        for key in node
        if isinstance(key, str) and key.startswith(WRAPPER_PREFIXES)
    )
    return next(keys, "")


def saved_file_lines(contents: object, model_state: dict, optimizer_state: dict) -> list[str]:
    """What a checkpoint that your load raised on holds (``contents``: read back with
    torch.load): a wrapper's prefixed keys, the model's and the optimizer's state dicts as saved
    (then saving is right), or which of them is missing."""
    if key := prefixed_key(contents):
        return [
            f"your checkpoint's state dict has keys like {key!r} (read back with torch.load): "
            "save the underlying model's state dict (model.module for DDP, model._orig_mod for "
            "torch.compile), not the wrapper's, and load into the underlying model the same way"
        ]
    has_model, has_optimizer = (holds_state(contents, s) for s in (model_state, optimizer_state))
    if has_model and has_optimizer:
        return [
            "your checkpoint file holds the model's and the optimizer's state dicts as saved "
            "(read back with torch.load), so saving is right: your load raised restoring them "
            "into a fresh model and optimizer"
        ]
    missing = " and ".join(
        name for name, held in (("model", has_model), ("optimizer", has_optimizer)) if not held
    )
    return [
        f"your checkpoint file (read back with torch.load) holds no copy of the {missing}'s "
        "state dict as it was at the save, and your load raised: save model.state_dict() and "
        "optimizer.state_dict() in it"
    ]


# The training loop raised: the parts of a step, each run alone through its adapter.


def training_step_raised(adapters: ModuleType, shape: dict) -> list[str]:
    """Your training loop raised: do a step's gradient accumulation and the evaluation raise
    alone, on a tiny model of ``shape`` (``get_transformer_lm``'s arguments)?"""
    vocab, length = shape["vocab_size"], shape["context_length"]
    ids = torch.randint(0, vocab, (2, 2, length + 1), generator=torch.Generator().manual_seed(0))
    batches = [(b[:, :-1], b[:, 1:]) for b in ids]
    model = adapters.get_transformer_lm(**shape)
    loss = ran(lambda: adapters.run_cross_entropy(model(batches[0][0]), batches[0][1]))
    step = ran(lambda: adapters.run_accumulate_gradients(model, batches))
    tokens = np.arange(8 * length) % vocab
    evaluation = ran(lambda: adapters.run_evaluate(model, tokens, 2, length, 2, "cpu"))
    if not loss or step is None or evaluation is None:
        return []  # the loss itself raises, or a part is not wired: nothing located
    alone = "on 2 micro-batches of 2 sequences of a tiny model"
    if not step:
        return [
            f"alone, your gradient accumulation (run_accumulate_gradients) raises too {alone}, "
            "while the model and your cross-entropy run on the same batch: the error is in the "
            "training step around them (how it calls the loss, backward, the micro-batch loop)"
        ]
    if not evaluation:
        return [
            f"alone, your gradient accumulation runs {alone} and your evaluation (run_evaluate) "
            "raises: the error is in the evaluation"
        ]
    return [
        f"alone, your gradient accumulation and your evaluation run {alone}: the error is "
        "elsewhere in the loop (its batches, clipping, the schedule, the optimizer step, saving)"
    ]


def evaluation_raised(
    adapters: ModuleType, model: torch.nn.Module, dataset: np.ndarray, batch_size: int, length: int
) -> list[str]:
    """Your evaluation raised: do get_batch, the model and your cross-entropy run alone on the
    same data?"""
    where = f"{len(dataset)} tokens, batch_size={batch_size}, context_length={length}"
    try:
        x, y = adapters.run_get_batch(dataset, batch_size, length, "cpu")
    except NotImplementedError:
        return []
    except Exception:  # noqa: BLE001  (student code: any exception)
        return [f"your get_batch raises alone on this dataset ({where}): your evaluation's windows"]
    with torch.no_grad():
        loss = ran(
            lambda: adapters.run_cross_entropy(model(torch.as_tensor(x)), torch.as_tensor(y))
        )
    if not loss:
        return []  # the model or the loss raises alone: their own tests say more
    return [
        f"your get_batch, the model and your cross-entropy each run alone on this dataset "
        f"({where}), but your evaluation raised: the error is in how it calls them or averages "
        "their losses"
    ]
