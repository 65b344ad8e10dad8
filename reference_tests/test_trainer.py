"""The reference trainer: the training loop learns, resumes exactly, stops on NaN and keeps to its
time budget; the CLI drives it; its fast paths (fused clipping, the batch prefetcher, few host
reads, the multi-tensor AdamW) give the readable ones' results; data-parallel training on two CPU
processes matches one process with the same global batch.

Fast paths are checked against independent references: ``torch.nn.utils.clip_grad_norm_`` and the
readable ``clip_gradients`` for the fused clipping; sequential draws for the prefetcher;
``torch.optim.AdamW`` and the readable AdamW for the multi-tensor one; and, for the whole loop, a
plain loop written here (a host read of every loss, readable clipping, batches drawn when
needed) whose losses ``train`` must reproduce. Also: one gradient all-reduce per optimizer step
under DDP, and schedule defaults that scale with ``max_steps``.
"""

from __future__ import annotations

import json
import os
import re
import socket

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from cs336_basics.adamw import AdamW
from cs336_basics.batches import BatchPrefetcher, local_batch
from cs336_basics.builder import build_model
from cs336_basics.checkpoint import read_checkpoint
from cs336_basics.config import ModelConfig
from cs336_basics.devices import Distributed
from cs336_basics.errors import InputError
from cs336_basics.fused_clipping import clip_gradients_fused
from cs336_basics.gradient_clipping import clip_gradients
from cs336_basics.losses import cross_entropy
from cs336_basics.model import transformer_lm
from cs336_basics.schedule import get_lr_cosine_schedule
from cs336_basics.training import TrainConfig, parameter_groups, train
from cs336_basics.variants.foreach_adamw import ForeachAdamW

TINY_MODEL = ModelConfig(
    vocab_size=32, context_length=8, d_model=32, num_layers=2, num_heads=2, d_ff=64
)
# Smaller still: the fast-path comparisons and the two-process DDP run.
MODEL = ModelConfig(vocab_size=32, context_length=8, d_model=16, num_layers=1, num_heads=2, d_ff=32)


@pytest.fixture
def token_files(tmp_path):
    rng = np.random.default_rng(0)
    # A learnable stream: short counting runs with random starting points.
    pieces = [np.arange(start, start + 6) % 32 for start in rng.integers(0, 32, size=600)]
    tokens = np.concatenate(pieces).astype(np.uint16)
    np.save(tmp_path / "train.npy", tokens[:3000])
    np.save(tmp_path / "val.npy", tokens[3000:])
    return tmp_path / "train.npy", tmp_path / "val.npy"


def _config(token_files, out_dir, **overrides) -> TrainConfig:
    train_path, val_path = token_files
    settings = dict(
        model=TINY_MODEL,
        train_data=str(train_path),
        val_data=str(val_path),
        out_dir=str(out_dir),
        batch_size=4,
        max_steps=8,
        lr_max=3e-3,
        lr_min=3e-4,
        warmup_steps=2,
        cosine_steps=8,
        eval_interval=4,
        eval_batches=2,
        log_interval=1,
        checkpoint_interval=4,
        device="cpu",
        progress=False,
    )
    settings.update(overrides)
    return TrainConfig(**settings)


def _losses(history, split):
    return [(r["step"], r["loss"]) for r in history if r["split"] == split]


@pytest.mark.slow  # a whole training pipeline: run by `make test-all` and CI, not by plain `pytest`
def test_training_resume_reproduces_uninterrupted_run(token_files, tmp_path):
    straight = train(_config(token_files, tmp_path / "straight", grad_accum_steps=2))
    assert straight.step == 8 and straight.stopped == "completed"

    interrupted = _config(token_files, tmp_path / "resumed", grad_accum_steps=2, max_steps=5)
    first_half = train(interrupted)
    assert first_half.step == 5
    resumed = train(_config(token_files, tmp_path / "resumed", grad_accum_steps=2), resume=True)
    assert resumed.step == 8

    assert _losses(resumed.history, "train") == _losses(straight.history, "train")
    # The interrupted run also evaluated at its last step (5); the scheduled evaluations agree.
    assert [v for v in _losses(resumed.history, "val") if v[0] != 5] == _losses(
        straight.history, "val"
    )
    assert [s for s, _ in _losses(resumed.history, "train")] == list(range(1, 9))
    saved = read_checkpoint(resumed.checkpoint)
    assert saved["iteration"] == 8 and saved["config"]["model"] == TINY_MODEL.to_dict()
    for name, tensor in read_checkpoint(straight.checkpoint)["model"].items():
        assert torch.equal(tensor, saved["model"][name]), name


def test_training_resume_rejects_a_different_model(token_files, tmp_path):
    train(_config(token_files, tmp_path / "run", max_steps=1))
    other = _config(
        token_files, tmp_path / "run", model=ModelConfig(**{**TINY_MODEL.to_dict(), "d_ff": 96})
    )
    with pytest.raises(ValueError, match="d_ff"):
        train(other, resume=True)


def test_training_stops_on_nan_and_keeps_last_good_checkpoint(token_files, tmp_path, monkeypatch):
    import cs336_basics.training as training

    real_loss = training.language_model_loss
    calls = {"n": 0}

    def loss_that_turns_nan(model, inputs, targets):
        calls["n"] += 1
        loss = real_loss(model, inputs, targets)
        return loss * float("nan") if calls["n"] == 6 else loss

    monkeypatch.setattr(training, "language_model_loss", loss_that_turns_nan)
    result = train(_config(token_files, tmp_path / "run", checkpoint_interval=2))
    assert result.stopped == "non-finite loss" and result.step == 5
    assert "loss is nan at step 6" in result.failure and "(step 4)" in result.failure
    saved = read_checkpoint(tmp_path / "run" / "checkpoints" / "latest.pt")
    assert saved["iteration"] == 4
    assert all(torch.isfinite(t).all() for t in saved["model"].values())
    assert result.checkpoint == tmp_path / "run" / "checkpoints" / "latest.pt"


def test_training_cli_with_toml_config_and_overrides(token_files, tmp_path):
    from cs336_basics.runner.cli import main

    train_path, val_path = token_files
    model_table = "\n".join(
        f"{k} = {json.dumps(v)}" for k, v in TINY_MODEL.to_dict().items() if v is not None
    )
    (tmp_path / "run.toml").write_text(
        f'train_data = "{train_path}"\nval_data = "{val_path}"\nmax_steps = 50\nbatch_size = 4\n'
        f'warmup_steps = 1\neval_batches = 1\nprogress = false\ndevice = "cpu"\n[model]\n{model_table}\n'
    )
    out_dir = tmp_path / "cli_run"
    code = main(
        [
            "train",
            "--config",
            str(tmp_path / "run.toml"),
            "--max-steps",
            "3",
            "--out-dir",
            str(out_dir),
            "--d-model",
            "16",
            "--log-interval",
            "1",
        ]
    )
    assert code == 0
    saved = read_checkpoint(out_dir / "checkpoints" / "latest.pt")
    assert saved["iteration"] == 3 and saved["config"]["model"]["d_model"] == 16
    assert (out_dir / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    records = [json.loads(line) for line in (out_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if r["split"] == "train"] == [1, 2, 3]
    assert main(["train", "--config", str(tmp_path / "run.toml"), "--num-heads", "5"]) == 2


def test_cli_train_reports_a_nan_as_its_one_error_line(token_files, tmp_path, monkeypatch, capsys):
    import cs336_basics.training as training
    from cs336_basics.runner.cli import main

    real_loss = training.language_model_loss
    calls = {"n": 0}

    def loss_that_turns_nan(model, inputs, targets):
        calls["n"] += 1
        return real_loss(model, inputs, targets) * (float("nan") if calls["n"] == 3 else 1.0)

    monkeypatch.setattr(training, "language_model_loss", loss_that_turns_nan)
    train_path, _ = token_files
    model = [f"--{k.replace('_', '-')}={v}" for k, v in TINY_MODEL.to_dict().items()]
    flags = ["--device=cpu", "--no-progress", "--max-steps=4", "--batch-size=2", *model]
    status = main(["train", f"--train-data={train_path}", f"--out-dir={tmp_path / 'run'}", *flags])
    lines = capsys.readouterr().err.strip().splitlines()
    assert status == 1
    assert lines[-1].startswith("cs336 train: error: the training loss is nan at step 3"), lines


@pytest.mark.slow  # a whole training pipeline: run by `make test-all` and CI, not by plain `pytest`
def test_training_tiny_pipeline_lowers_val_loss_and_leaves_loadable_checkpoint(tmp_path, capsys):
    from cs336_basics.checkpoint import model_from_checkpoint
    from cs336_basics.generation import generate
    from cs336_basics.runner.cli import main

    run_dir = tmp_path / "pipeline"
    assert (
        main(
            [
                "pipeline",
                "--tiny",
                "--run-dir",
                str(run_dir),
                "--device",
                "cpu",
                "--workers",
                "1",
            ]
        )
        == 0
    )
    # The progress goes to a capture, as to a log file: whole lines, no carriage returns.
    output = capsys.readouterr()
    assert "validation loss" in output.out
    assert "\r" not in output.out + output.err
    assert re.search(r"^train: done, \d+/\d+ step in ", output.err, re.MULTILINE), output.err
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stopped"] == "completed"
    assert summary["final_val_loss"] < summary["first_val_loss"] - 1.5  # about 5.7 -> 3.5 or below
    for name in (
        "tokenizer/vocab.json",
        "tokenizer/merges.txt",
        "data/train.npy",
        "data/valid.npy",
        "metrics.jsonl",
        "loss.png",
        "samples.txt",
        "config.json",
    ):
        assert (run_dir / name).is_file(), name
    model = model_from_checkpoint(run_dir / "checkpoints" / "latest.pt")
    assert model.lm_head.weight.shape[0] == summary["vocab_size"]
    assert len(generate(model, [1, 2, 3], 5, temperature=0.0)) == 5
    assert summary["samples"][0].startswith("Once upon a time")


def test_training_wandb_missing_gives_clear_error(token_files, tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_wandb(name, *args, **kwargs):
        if name == "wandb":
            raise ImportError("No module named 'wandb'")
        return real_import(name, *args, **kwargs)

    build_model(TINY_MODEL)  # the run gets as far as building its model
    monkeypatch.setattr(builtins, "__import__", no_wandb)
    with pytest.raises(RuntimeError, match="uv sync --extra wandb"):
        train(_config(token_files, tmp_path / "run", wandb_project="cs336"))


@pytest.mark.slow  # a whole training pipeline: run by `make test-all` and CI, not by plain `pytest`
def test_training_pipeline_takes_user_data_at_every_stage(tmp_path):
    import numpy as np

    from cs336_basics.runner.cli import main

    first = tmp_path / "first"
    common = [
        "pipeline",
        "--tiny",
        "--no-progress",
        "--device",
        "cpu",
        "--workers",
        "1",
        "--max-steps",
        "6",
    ]
    assert main([*common, "--run-dir", str(first)]) == 0
    # user text and a user tokenizer: the encode stage must reproduce the first run's arrays
    second = tmp_path / "second"
    assert (
        main(
            [
                *common,
                "--run-dir",
                str(second),
                "--train-text",
                str(first / "data" / "train.txt"),
                "--val-text",
                str(first / "data" / "valid.txt"),
                "--tokenizer",
                str(first / "tokenizer"),
            ]
        )
        == 0
    )
    assert not (second / "data" / "train.txt").exists()
    for name in ("train.npy", "valid.npy"):
        assert np.array_equal(np.load(second / "data" / name), np.load(first / "data" / name))
    # ready token arrays skip encoding altogether
    third = tmp_path / "third"
    assert (
        main(
            [
                *common,
                "--run-dir",
                str(third),
                "--tokenizer",
                str(first / "tokenizer"),
                "--train-tokens",
                str(first / "data" / "train.npy"),
                "--val-tokens",
                str(first / "data" / "valid.npy"),
            ]
        )
        == 0
    )
    assert json.loads((third / "summary.json").read_text())["steps"] == 6
    assert (
        main(
            [
                *common,
                "--run-dir",
                str(third),
                "--train-text",
                str(tmp_path / "missing.txt"),
                "--val-text",
                str(tmp_path / "missing.txt"),
            ]
        )
        == 2
    )


def test_training_loss_adds_the_moe_auxiliary_loss():
    from cs336_basics.training import language_model_loss

    torch.manual_seed(0)
    model = build_model(
        ModelConfig.from_dict({**TINY_MODEL.to_dict(), "ffn": "moe", "num_experts": 4, "top_k": 2})
    )
    inputs = torch.randint(0, 32, (2, 8), generator=torch.Generator().manual_seed(1))
    targets = torch.randint(0, 32, (2, 8), generator=torch.Generator().manual_seed(2))
    loss = language_model_loss(model, inputs, targets)
    expected = cross_entropy(model(inputs), targets) + model.aux_loss()
    assert model.aux_loss().item() > 0
    torch.testing.assert_close(loss, expected)


def test_training_time_budget_stops_and_reaches_the_schedule_floor(token_files, tmp_path):
    result = train(
        _config(token_files, tmp_path / "run", max_seconds=1e-9, max_steps=50, cosine_steps=None)
    )
    assert result.stopped == "time budget" and result.step == 1
    first = next(r for r in result.history if r["split"] == "train")
    assert first["lr"] == 3e-4  # already past the deadline: the schedule sits at lr_min
    assert read_checkpoint(result.checkpoint)["iteration"] == 1


def _parameters_with_grads(scale: float, seed: int = 0) -> list[torch.nn.Parameter]:
    generator = torch.Generator().manual_seed(seed)
    params = [
        torch.nn.Parameter(torch.randn(shape, generator=generator))
        for shape in ((4, 5), (7,), (3, 3))
    ]
    for p in params[:2]:  # the last one has no gradient and must be skipped
        p.grad = scale * torch.randn(p.shape, generator=generator)
    return params


@pytest.mark.parametrize("scale", [10.0, 0.01])
def test_fused_clipping_matches_readable_and_torch(scale):
    fused, readable, reference = (_parameters_with_grads(scale) for _ in range(3))
    norm = clip_gradients_fused(fused, 1.0)
    clip_gradients(readable, 1.0)
    expected_norm = torch.nn.utils.clip_grad_norm_(
        [p for p in reference if p.grad is not None], 1.0
    )
    torch.testing.assert_close(norm, expected_norm)
    for a, b, c in zip(fused, readable, reference, strict=True):
        if a.grad is None:
            assert b.grad is None and c.grad is None
            continue
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-6, atol=1e-7)
        torch.testing.assert_close(a.grad, c.grad, rtol=1e-6, atol=1e-7)
    if scale < 1:  # below the threshold nothing changes, bit for bit
        for a, c in zip(fused, _parameters_with_grads(scale), strict=True):
            assert (a.grad is None and c.grad is None) or torch.equal(a.grad, c.grad)


def test_prefetcher_yields_the_sequential_batches_and_resumable_state():
    tokens = np.arange(500, dtype=np.uint16) % 32
    env = Distributed()
    sequential_generator = torch.Generator().manual_seed(3)
    expected = [local_batch(tokens, 4, 8, sequential_generator, env) for _ in range(5)]
    generator = torch.Generator().manual_seed(3)
    prefetcher = BatchPrefetcher(tokens, 4, 8, generator, env)
    got = [prefetcher.next() for _ in range(3)]
    state = prefetcher.generator_state()  # a checkpoint taken here resumes at batch 3
    resumed = BatchPrefetcher(tokens, 4, 8, torch.Generator().set_state(state), env)
    got += [resumed.next() for _ in range(2)]
    for (x, y), (ex, ey) in zip(got, expected, strict=True):
        assert torch.equal(x, ex) and torch.equal(y, ey)


def _plain_loop_losses(config: TrainConfig, tokens: np.ndarray) -> list[float]:
    """The readable loop: read every loss, readable clipping, batches drawn one at a time."""
    torch.manual_seed(config.seed)
    model = transformer_lm(config.model)
    # Gains (the only 1-D parameters here) are not decayed: named, not told apart by shape.
    named = dict(model.named_parameters())
    gains = [p for name, p in named.items() if name.split(".")[-2].startswith("ln")]
    matrices = [p for name, p in named.items() if not name.split(".")[-2].startswith("ln")]
    assert len(gains) == 2 * config.model.num_layers + 1
    optimizer = AdamW(
        [{"params": matrices}, {"params": gains, "weight_decay": 0.0}],
        lr=config.lr_max,
        betas=(config.beta1, config.beta2),
        eps=config.adam_eps,
        weight_decay=config.weight_decay,
    )
    generator = torch.Generator().manual_seed(config.seed)
    losses = []
    for step in range(config.max_steps):
        lr = get_lr_cosine_schedule(
            step, config.lr_max, config.lr_min, config.warmup_iters, config.max_steps
        )
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.zero_grad()
        total = 0.0
        for _ in range(config.grad_accum_steps):
            inputs, targets = local_batch(tokens, config.batch_size, 8, generator, Distributed())
            loss = cross_entropy(model(inputs), targets)
            (loss / config.grad_accum_steps).backward()
            total += loss.item()
        clip_gradients(model.parameters(), config.grad_clip)
        optimizer.step()
        losses.append(total / config.grad_accum_steps)
    return losses


@pytest.mark.parametrize("log_interval", [1, 3])
def test_train_reproduces_the_plain_loop(tmp_path, log_interval):
    from cs336_basics.training import train

    rng = np.random.default_rng(0)
    tokens = np.concatenate([np.arange(s, s + 6) % 32 for s in rng.integers(0, 32, 300)]).astype(
        np.uint16
    )
    np.save(tmp_path / "train.npy", tokens)
    config = TrainConfig(
        model=MODEL,
        train_data=str(tmp_path / "train.npy"),
        out_dir=str(tmp_path / f"run{log_interval}"),
        batch_size=4,
        grad_accum_steps=2,
        max_steps=6,
        lr_max=1e-2,
        grad_clip=0.5,  # small enough to clip
        log_interval=log_interval,
        device="cpu",
        progress=False,
    )
    expected = _plain_loop_losses(config, tokens)
    result = train(config)
    logged = [(r["step"], r["loss"]) for r in result.history if r["split"] == "train"]
    # Each record is the mean loss over the steps since the previous one.
    means = [
        (end, float(np.mean(expected[end - log_interval : end])))
        for end in range(log_interval, 7, log_interval)
    ]
    assert [s for s, _ in logged] == [s for s, _ in means]
    np.testing.assert_allclose([v for _, v in logged], [v for _, v in means], rtol=1e-5)


@pytest.mark.slow  # a whole training run: run by `make test-all` and CI, not by plain `pytest`
def test_train_finds_a_nan_between_reads_and_keeps_the_checkpoint_before_it(tmp_path, monkeypatch):
    import cs336_basics.training as training
    from cs336_basics.checkpoint import read_checkpoint

    np.save(tmp_path / "train.npy", (np.arange(400) % 32).astype(np.uint16))
    real_loss, calls = training.language_model_loss, {"n": 0}

    def loss_that_turns_nan(model, inputs, targets):
        calls["n"] += 1
        loss = real_loss(model, inputs, targets)
        return loss * float("nan") if calls["n"] == 6 else loss

    monkeypatch.setattr(training, "language_model_loss", loss_that_turns_nan)
    config = TrainConfig(
        model=MODEL,
        train_data=str(tmp_path / "train.npy"),
        out_dir=str(tmp_path / "run"),
        batch_size=2,
        max_steps=12,
        log_interval=4,  # the NaN at step 6 is read at step 8
        checkpoint_interval=4,
        device="cpu",
        progress=False,
    )
    result = training.train(config)
    assert result.stopped == "non-finite loss" and result.step == 5
    assert "loss is nan at step 6" in result.failure and "(step 4)" in result.failure
    assert read_checkpoint(tmp_path / "run" / "checkpoints" / "latest.pt")["iteration"] == 4


@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune"])
def test_compile_mode_reaches_torch_compile(tmp_path, monkeypatch, mode):
    import cs336_basics.training as training

    np.save(tmp_path / "train.npy", (np.arange(400) % 32).astype(np.uint16))
    modes = []

    def record_mode(model, mode=None):
        modes.append(mode)
        return model  # eager: CUDA graphs need a GPU

    monkeypatch.setattr(training.torch, "compile", record_mode)
    settings = dict(model=MODEL, train_data=str(tmp_path / "train.npy"), batch_size=2)
    config = TrainConfig(
        **settings,
        out_dir=str(tmp_path / "run"),
        max_steps=1,
        device="cpu",
        progress=False,
        compile=True,
        compile_mode=mode,
    )
    assert training.train(config).stopped == "completed" and modes == [mode]
    with pytest.raises(ValueError, match="compile_mode .*'fastest'"):
        TrainConfig(**settings, compile_mode="fastest")


def test_schedule_defaults_scale_with_max_steps():
    for max_steps, warmup in ((2, 0), (20, 1), (1000, 50)):
        config = TrainConfig(model=MODEL, train_data="-", max_steps=max_steps)
        assert config.warmup_iters == warmup and config.schedule_steps == max_steps
    assert TrainConfig(model=MODEL, train_data="-", max_steps=50, warmup_steps=7).warmup_iters == 7
    with pytest.raises(ValueError, match="--warmup-steps"):
        TrainConfig(model=MODEL, train_data="-", max_steps=5, warmup_steps=10)


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


def _settings(tmp_path, out_dir: str) -> dict:
    return dict(
        model=MODEL.to_dict(),
        train_data=str(tmp_path / "train.npy"),
        val_data=str(tmp_path / "val.npy"),
        out_dir=str(tmp_path / out_dir),
        batch_size=4,
        grad_accum_steps=2,
        max_steps=4,
        warmup_steps=1,
        lr_max=1e-2,
        eval_interval=2,
        eval_batches=2,
        log_interval=1,
        checkpoint_interval=4,
        device="cpu",
        progress=False,
    )


def _worker(rank: int, world_size: int, port: int, settings: dict) -> None:
    torch.set_num_threads(1)
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world_size),
    )
    try:
        train(TrainConfig.from_dict(settings))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow  # subprocesses: run by `make test-all` and CI, not by plain `pytest`
@pytest.mark.skipif(not dist.is_gloo_available(), reason="this torch build has no gloo backend")
def test_ddp_two_processes_match_single_process(tmp_path):
    tokens = np.random.default_rng(0).integers(0, 32, size=2000).astype(np.uint16)
    np.save(tmp_path / "train.npy", tokens[:1500])
    np.save(tmp_path / "val.npy", tokens[1500:])

    single = train(TrainConfig.from_dict(_settings(tmp_path, "single")))
    # spawn, not fork: a forked child cannot use autograd once the parent has touched CUDA
    # ("Unable to handle autograd's threading in combination with fork-based multiprocessing").
    mp.start_processes(
        _worker,
        args=(2, _free_port(), _settings(tmp_path, "ddp")),
        nprocs=2,
        start_method="spawn",
        join=True,
    )

    ddp_records = _records(tmp_path / "ddp" / "metrics.jsonl")
    single_losses = [(r["step"], r["split"], r["loss"]) for r in single.history]
    ddp_losses = [(r["step"], r["split"], r["loss"]) for r in ddp_records]
    assert [s[:2] for s in ddp_losses] == [s[:2] for s in single_losses]
    np.testing.assert_allclose([s[2] for s in ddp_losses], [s[2] for s in single_losses], rtol=1e-5)
    single_weights = read_checkpoint(single.checkpoint)["model"]
    ddp_weights = read_checkpoint(tmp_path / "ddp" / "checkpoints" / "latest.pt")["model"]
    for name, tensor in single_weights.items():
        torch.testing.assert_close(ddp_weights[name], tensor, rtol=1e-4, atol=1e-5, msg=name)
    # the run actually trained: the weights moved away from the seed's initialisation
    torch.manual_seed(0)
    from cs336_basics.builder import build_model

    initial = build_model(MODEL).state_dict()
    assert any(not torch.allclose(initial[n], t, atol=1e-3) for n, t in single_weights.items())


def _records(path):
    import json

    return [json.loads(line) for line in path.read_text().splitlines()]
