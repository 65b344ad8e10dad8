"""Checkpoint round trips through paths and file-likes resume training exactly; bad files
give errors (advice)."""

from __future__ import annotations

import io
import pickle

import pytest
import torch

from .expect import raises_an_error
from .lazy_adapters import (
    get_adamw_cls,
    get_transformer_lm,
    run_load_checkpoint,
    run_save_checkpoint,
)
from .localize import graded_case_located

ADAMW = dict(lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)


def _model_and_optimizer(seed: int) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    return model, get_adamw_cls()(model.parameters(), **ADAMW)


def _train_steps(model, optimizer, steps: int, seed: int = 0) -> list[float]:
    generator = torch.Generator().manual_seed(seed)
    losses = []
    for _ in range(steps):
        inputs = torch.randn(16, 4, generator=generator)
        loss = model(inputs).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("kind", ["path", "str", "bytesio"])
@graded_case_located("checkpoint")
def test_checkpoint_round_trip_continues_identically(tmp_path, kind):
    model, optimizer = _model_and_optimizer(0)
    _train_steps(model, optimizer, 3)
    target = {"path": tmp_path / "c.pt", "str": str(tmp_path / "c.pt"), "bytesio": io.BytesIO()}[
        kind
    ]
    run_save_checkpoint(model, optimizer, 3, target)
    continued = _train_steps(model, optimizer, 4, seed=1)

    restored_model, restored_optimizer = _model_and_optimizer(99)  # different initial weights
    if kind == "bytesio":
        target.seek(0)
    assert run_load_checkpoint(target, restored_model, restored_optimizer) == 3
    assert _train_steps(restored_model, restored_optimizer, 4, seed=1) == continued


LM = dict(
    vocab_size=32, context_length=8, d_model=16, num_layers=2, num_heads=2, d_ff=32, rope_theta=1e4
)


def _lm_steps(model, optimizer, steps: int) -> list[float]:
    generator = torch.Generator().manual_seed(5)
    losses = []
    for _ in range(steps):
        ids = torch.randint(0, LM["vocab_size"], (4, LM["context_length"] + 1), generator=generator)
        logits = model(ids[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def test_checkpoint_resumes_language_model_identically(tmp_path):
    """Your model and optimizer, saved mid-run and restored into fresh objects, continue with
    exactly the losses of the uninterrupted run: everything AdamW needs (moments, step count)
    must live in its state dict."""
    torch.manual_seed(0)
    model = get_transformer_lm(**LM)
    optimizer = get_adamw_cls()(model.parameters(), **ADAMW)
    _lm_steps(model, optimizer, 3)
    run_save_checkpoint(model, optimizer, 3, tmp_path / "lm.pt")
    continued = _lm_steps(model, optimizer, 3)

    torch.manual_seed(1)
    fresh = get_transformer_lm(**LM)
    fresh_optimizer = get_adamw_cls()(fresh.parameters(), **{**ADAMW, "lr": 0.5})
    assert run_load_checkpoint(tmp_path / "lm.pt", fresh, fresh_optimizer) == 3
    resumed = _lm_steps(fresh, fresh_optimizer, 3)
    assert resumed == continued, (
        f"losses after resuming {resumed} differ from the uninterrupted run's {continued}\n"
        "hint: keep the optimizer's step count and moments in self.state[p] (saved by "
        "optimizer.state_dict()), and the learning rate in its param_groups"
    )


# --- robustness (advice, not graded) ---------------------------------------------------------


@pytest.mark.robustness
def test_checkpoint_loads_without_unpickling_code(tmp_path):
    model, optimizer = _model_and_optimizer(0)
    _train_steps(model, optimizer, 1)
    run_save_checkpoint(model, optimizer, 1, tmp_path / "c.pt")
    torch.load(tmp_path / "c.pt", weights_only=True)  # tensors and plain values only


@pytest.mark.robustness
def test_checkpoint_write_to_path_is_atomic(tmp_path, monkeypatch):
    model, optimizer = _model_and_optimizer(0)
    path = tmp_path / "c.pt"
    run_save_checkpoint(model, optimizer, 1, path)
    good = path.read_bytes()

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", crash)
    with pytest.raises(OSError, match="disk full"):
        run_save_checkpoint(model, optimizer, 2, path)
    assert path.read_bytes() == good, "a failed save destroyed the previous checkpoint"
    assert [p.name for p in tmp_path.iterdir()] == ["c.pt"]  # no temporary file left behind


@pytest.mark.robustness
def test_checkpoint_bad_files_raise(tmp_path):
    model, optimizer = _model_and_optimizer(0)
    run_save_checkpoint(model, optimizer, 1, tmp_path / "c.pt")
    data = (tmp_path / "c.pt").read_bytes()
    (tmp_path / "cut.pt").write_bytes(data[: len(data) // 2])
    (tmp_path / "notes.txt").write_text("hello", encoding="utf-8")
    torch.save(model.state_dict(), tmp_path / "plain_state_dict.pt")
    for name in ("cut.pt", "notes.txt", "missing.pt", "plain_state_dict.pt"):
        with raises_an_error():
            run_load_checkpoint(tmp_path / name, model, optimizer)


@pytest.mark.robustness
@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_checkpoint_refuses_arbitrary_pickles(tmp_path):
    marker = tmp_path / "code-ran"

    class Exploit:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    (tmp_path / "evil.pt").write_bytes(pickle.dumps(Exploit()))
    model, optimizer = _model_and_optimizer(0)
    with raises_an_error():
        run_load_checkpoint(tmp_path / "evil.pt", model, optimizer)
    assert not marker.exists(), "loading a checkpoint ran code: use torch.load(weights_only=True)"
