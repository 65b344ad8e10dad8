"""Checkpoint round trips through paths and file-likes resume training exactly; checkpoints of a
``torch.compile``-d or ``DistributedDataParallel``-wrapped model hold the plain model's state dict
(no ``_orig_mod.`` / ``module.`` prefixes), so they load into an unwrapped model and back; bad
files give errors (advice)."""

from __future__ import annotations

import copy
import io
import pickle

import pytest
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from .expect import raises_an_error
from .hints import diagnosis_lines
from .lazy_adapters import (
    get_adamw_cls,
    get_transformer_lm,
    run_load_checkpoint,
    run_save_checkpoint,
)
from .localize import graded_case_located
from .localize.training import saved_file_lines

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


# --- checkpoints of wrapped models ------------------------------------------------------------


PREFIX_HINT = (
    "save the state dict of the underlying model (model.module for DDP, model._orig_mod for "
    "torch.compile), not the wrapper's, whose keys carry a prefix; load into the underlying "
    "model the same way"
)


def tiny_model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))


def trained_step(model: torch.nn.Module) -> torch.optim.Optimizer:
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model(torch.ones(2, 4)).sum().backward()
    optimizer.step()
    return optimizer


def check_plain_round_trip(wrapped: torch.nn.Module, plain: torch.nn.Module, path) -> None:
    """Save ``wrapped``; load into a fresh unwrapped model and a fresh wrapped one."""
    # (The step runs the plain model: the parameters are shared, and calling a compiled model
    # would compile it, which takes long.)
    optimizer = trained_step(plain)
    saved = copy.deepcopy((plain.state_dict(), optimizer.state_dict()))
    run_save_checkpoint(wrapped, optimizer, 7, path)
    fresh = tiny_model(seed=1)
    try:
        iteration = run_load_checkpoint(path, fresh, torch.optim.AdamW(fresh.parameters()))
    except Exception as error:
        raise AssertionError(
            f"a checkpoint of a {type(wrapped).__name__} does not load into the plain model: "
            f"{error}" + diagnosis_lines(saved_file_lines_of(path, *saved))
        ) from error
    assert iteration == 7
    for (name, want), got in zip(
        plain.state_dict().items(), fresh.state_dict().values(), strict=True
    ):
        assert torch.equal(got, want), (
            f"{name} differs after loading into an unwrapped model\nhint: {PREFIX_HINT}"
        )
    rewrapped_inner = tiny_model(seed=2)
    rewrapped = compiled(rewrapped_inner)
    assert run_load_checkpoint(path, rewrapped, torch.optim.AdamW(rewrapped.parameters())) == 7
    assert all(
        torch.equal(a, b)
        for a, b in zip(
            plain.state_dict().values(), rewrapped_inner.state_dict().values(), strict=True
        )
    ), "loading into a torch.compile-d model should restore its underlying model"


def saved_file_lines_of(path, model_state: dict, optimizer_state: dict) -> list[str]:
    """What the checkpoint at ``path`` holds, read back with torch.load; ``[]`` when it cannot
    be read that way (a format of your own: nothing measured)."""
    try:
        contents = torch.load(path, weights_only=True)
    except Exception:  # noqa: BLE001  (any file the student wrote)
        return []
    return saved_file_lines(contents, model_state, optimizer_state)


def compiled(model: torch.nn.Module) -> torch.nn.Module:
    """``torch.compile(model)``, or the test skipped where this torch cannot compile: torch 2.2,
    the last built for Intel Macs, has no torch.compile on Python 3.12."""
    try:
        return torch.compile(model)
    except RuntimeError as error:
        pytest.skip(f"torch.compile is not available with this torch and Python: {error}")


@graded_case_located("checkpoint")
def test_checkpoint_of_compiled_model_has_no_wrapper_prefix(tmp_path) -> None:
    plain = tiny_model(seed=0)
    check_plain_round_trip(compiled(plain), plain, tmp_path / "compiled.pt")


def test_checkpoint_of_ddp_model_has_no_wrapper_prefix(tmp_path) -> None:
    if not dist.is_available():
        pytest.skip("torch.distributed is not available in this build")
    dist.init_process_group("gloo", init_method=(tmp_path / "store").as_uri(), rank=0, world_size=1)
    try:
        plain = tiny_model(seed=0)
        check_plain_round_trip(DistributedDataParallel(plain), plain, tmp_path / "ddp.pt")
    finally:
        dist.destroy_process_group()


def test_checkpoint_loads_into_ddp_model(tmp_path) -> None:
    plain = tiny_model(seed=0)
    run_save_checkpoint(plain, trained_step(plain), 3, tmp_path / "plain.pt")
    dist.init_process_group("gloo", init_method=(tmp_path / "store").as_uri(), rank=0, world_size=1)
    try:
        inner = tiny_model(seed=1)
        wrapped = DistributedDataParallel(inner)
        assert (
            run_load_checkpoint(
                tmp_path / "plain.pt", wrapped, torch.optim.AdamW(wrapped.parameters())
            )
            == 3
        )
    finally:
        dist.destroy_process_group()
    assert all(
        torch.equal(a, b)
        for a, b in zip(plain.state_dict().values(), inner.state_dict().values(), strict=True)
    )


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
