"""Checkpoint round trips through paths and file-likes, and clear errors for bad files."""

from __future__ import annotations

import io
import pickle

import pytest
import torch

from .adapters import get_adamw_cls, run_load_checkpoint, run_save_checkpoint


def _model_and_optimizer(seed: int) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    return model, get_adamw_cls()(model.parameters(), lr=1e-2, weight_decay=0.1)


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


def test_checkpoint_loads_without_unpickling_code(tmp_path):
    model, optimizer = _model_and_optimizer(0)
    _train_steps(model, optimizer, 1)
    run_save_checkpoint(model, optimizer, 1, tmp_path / "c.pt")
    torch.load(tmp_path / "c.pt", weights_only=True)  # tensors and plain values only


def test_checkpoint_write_to_path_is_atomic(tmp_path, monkeypatch):
    from cs336_basics.checkpoint import save_checkpoint

    model, optimizer = _model_and_optimizer(0)
    path = tmp_path / "c.pt"
    run_save_checkpoint(model, optimizer, 1, path)
    good = path.read_bytes()

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", crash)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(model, optimizer, 2, path)
    assert path.read_bytes() == good
    assert [p.name for p in tmp_path.iterdir()] == ["c.pt"]  # no temporary file left behind


def test_checkpoint_truncated_file_gives_clear_error(tmp_path):
    from cs336_basics.checkpoint import CheckpointError

    model, optimizer = _model_and_optimizer(0)
    run_save_checkpoint(model, optimizer, 1, tmp_path / "c.pt")
    data = (tmp_path / "c.pt").read_bytes()
    (tmp_path / "cut.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=r"cut\.pt.*truncated"):
        run_load_checkpoint(tmp_path / "cut.pt", model, optimizer)


def test_checkpoint_foreign_files_give_clear_errors(tmp_path):
    from cs336_basics.checkpoint import CheckpointError

    model, optimizer = _model_and_optimizer(0)
    torch.save(model.state_dict(), tmp_path / "plain_state_dict.pt")
    with pytest.raises(CheckpointError, match="not a cs336 checkpoint"):
        run_load_checkpoint(tmp_path / "plain_state_dict.pt", model, optimizer)
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(CheckpointError, match="notes.txt"):
        run_load_checkpoint(tmp_path / "notes.txt", model, optimizer)
    with pytest.raises(CheckpointError, match="not found"):
        run_load_checkpoint(tmp_path / "missing.pt", model, optimizer)


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_checkpoint_refuses_arbitrary_pickles(tmp_path):
    from cs336_basics.checkpoint import CheckpointError

    class Exploit:
        def __reduce__(self):
            return (print, ("this must never run",))

    (tmp_path / "evil.pt").write_bytes(pickle.dumps(Exploit()))
    model, optimizer = _model_and_optimizer(0)
    with pytest.raises(CheckpointError):
        run_load_checkpoint(tmp_path / "evil.pt", model, optimizer)


def test_checkpoint_keeps_config_and_rng_states(tmp_path):
    from cs336_basics.checkpoint import load_checkpoint, read_checkpoint, save_checkpoint

    model, optimizer = _model_and_optimizer(0)
    torch.manual_seed(123)
    save_checkpoint(
        model, optimizer, 7, tmp_path / "c.pt", config={"d_model": 8}, extra={"note": "x"}
    )
    expected = torch.rand(3)
    torch.manual_seed(0)
    assert load_checkpoint(tmp_path / "c.pt", model, optimizer, restore_rng=True) == 7
    assert torch.equal(torch.rand(3), expected)
    contents = read_checkpoint(tmp_path / "c.pt")
    assert contents["config"] == {"d_model": 8} and contents["extra"] == {"note": "x"}
