"""The trainer's multi-tensor AdamW takes exactly the readable AdamW's steps."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cs336_basics.adamw import AdamW
from cs336_basics.checkpoint import read_checkpoint
from cs336_basics.config import ModelConfig
from cs336_basics.errors import InputError
from cs336_basics.train_config import TrainConfig
from cs336_basics.training import parameter_groups, train
from cs336_basics.variants.foreach_adamw import ForeachAdamW

SHAPES = [(6, 4), (4,), (3, 2, 5), (1,)]


def _parameters(seed: int) -> list[torch.nn.Parameter]:
    generator = torch.Generator().manual_seed(seed)
    return [
        torch.nn.Parameter(torch.randn(shape, generator=generator, dtype=torch.float64))
        for shape in SHAPES
    ]


def _groups(parameters):
    return [
        {"params": parameters[:2]},
        {"params": parameters[2:], "weight_decay": 0.0, "lr": 0.05},
    ]


def _step_both(readable, fast, readable_params, fast_params, generator, skip=None):
    for index, (p, q) in enumerate(zip(readable_params, fast_params, strict=True)):
        gradient = (
            None if index == skip else torch.randn(p.shape, generator=generator, dtype=p.dtype)
        )
        p.grad = None if gradient is None else gradient.clone()
        q.grad = None if gradient is None else gradient.clone()
    readable.step()
    fast.step()


def test_foreach_adamw_equals_readable_adamw_step_for_step():
    readable_params, fast_params = _parameters(0), _parameters(0)
    settings = dict(lr=0.1, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    readable = AdamW(_groups(readable_params), **settings)
    fast = ForeachAdamW(_groups(fast_params), **settings)
    generator = torch.Generator().manual_seed(1)
    for step in range(6):
        # One parameter misses its gradient at step 2, so step counts differ inside a group.
        _step_both(
            readable, fast, readable_params, fast_params, generator, skip=0 if step == 2 else None
        )
        for p, q in zip(readable_params, fast_params, strict=True):
            assert torch.equal(p, q), step
    assert readable.state[readable_params[0]]["step"] == 5
    assert fast.state[fast_params[0]]["step"] == 5


def test_foreach_adamw_matches_torch_adamw():
    """Independent reference: torch.optim.AdamW. Without weight decay and with eps = 0 the two
    formulas agree exactly in real arithmetic (torch adds eps after the bias correction)."""
    ours_params, torch_params = _parameters(2), _parameters(2)
    ours = ForeachAdamW(ours_params, lr=1e-2, betas=(0.9, 0.999), eps=0.0, weight_decay=0.0)
    reference = torch.optim.AdamW(
        torch_params, lr=1e-2, betas=(0.9, 0.999), eps=0.0, weight_decay=0.0
    )
    generator = torch.Generator().manual_seed(3)
    for _ in range(5):
        _step_both(ours, reference, ours_params, torch_params, generator)
    for p, q in zip(ours_params, torch_params, strict=True):
        torch.testing.assert_close(p, q, rtol=1e-12, atol=1e-12)


def test_foreach_adamw_state_dict_round_trips_with_readable_adamw():
    readable_params, fast_params = _parameters(4), _parameters(4)
    readable = AdamW(_groups(readable_params), lr=0.1, weight_decay=0.1)
    fast = ForeachAdamW(_groups(fast_params), lr=0.1, weight_decay=0.1)
    generator = torch.Generator().manual_seed(5)
    for _ in range(3):
        _step_both(readable, fast, readable_params, fast_params, generator)
    # Swap: each continues from the other's state dict, and they still agree.
    readable_state, fast_state = readable.state_dict(), fast.state_dict()
    assert readable_state["state"].keys() == fast_state["state"].keys()
    for index, state in readable_state["state"].items():
        assert state["step"] == fast_state["state"][index]["step"] == 3
    readable.load_state_dict(fast_state)
    fast.load_state_dict(readable_state)
    for _ in range(3):
        _step_both(readable, fast, readable_params, fast_params, generator)
    for p, q in zip(readable_params, fast_params, strict=True):
        assert torch.equal(p, q)


def test_parameter_groups_decay_matrices_only():
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.LayerNorm(3), torch.nn.Linear(3, 2))
    decayed, kept = parameter_groups(model, 0.1)
    assert decayed["weight_decay"] == 0.1 and kept["weight_decay"] == 0.0
    assert {id(p) for p in decayed["params"]} == {id(model[0].weight), id(model[2].weight)}
    expected_kept = [model[0].bias, model[1].weight, model[1].bias, model[2].bias]
    assert {id(p) for p in kept["params"]} == {id(p) for p in expected_kept}


@pytest.mark.slow  # two whole training runs: run by `make test-all` and CI, not by plain `pytest`
def test_training_with_foreach_adamw_gives_the_same_losses(tmp_path):
    rng = np.random.default_rng(0)
    pieces = [np.arange(s, s + 6) % 32 for s in rng.integers(0, 32, 300)]
    np.save(tmp_path / "train.npy", np.concatenate(pieces).astype(np.uint16))
    model = ModelConfig(
        vocab_size=32, context_length=8, d_model=16, num_layers=2, num_heads=2, d_ff=32
    )
    histories = {}
    for name in ("adamw", "adamw_foreach"):
        config = TrainConfig(
            model=model,
            train_data=str(tmp_path / "train.npy"),
            out_dir=str(tmp_path / name),
            batch_size=4,
            max_steps=6,
            lr_max=1e-2,
            log_interval=1,
            optimizer=name,
            device="cpu",
            progress=False,
        )
        result = train(config)
        histories[name] = [(r["step"], r["loss"]) for r in result.history if r["split"] == "train"]
    assert len(histories["adamw"]) == 6
    assert histories["adamw_foreach"] == histories["adamw"]


def test_resume_refuses_a_checkpoint_with_one_parameter_group(tmp_path):
    """Checkpoints from before the no-decay group hold one group; resuming says so clearly."""
    np.save(tmp_path / "train.npy", (np.arange(3000) % 32).astype(np.uint16))
    model = ModelConfig(
        vocab_size=32, context_length=8, d_model=16, num_layers=1, num_heads=2, d_ff=32
    )
    settings = dict(
        model=model,
        train_data=str(tmp_path / "train.npy"),
        out_dir=str(tmp_path / "run"),
        batch_size=2,
        max_steps=2,
        checkpoint_interval=2,
        device="cpu",
        progress=False,
    )
    first = train(TrainConfig(**settings))
    saved = read_checkpoint(first.checkpoint)
    decayed, kept = saved["optimizer"]["param_groups"]
    decayed["params"] = sorted(decayed["params"] + kept["params"])
    saved["optimizer"]["param_groups"] = [decayed]
    torch.save(saved, first.checkpoint)
    with pytest.raises(InputError, match="1 parameter group"):
        train(TrainConfig(**{**settings, "max_steps": 4}), resume=True)
