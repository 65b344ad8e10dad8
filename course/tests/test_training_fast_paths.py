"""The training loop's fast paths give the results of the readable ones.

Checked against independent references: ``torch.nn.utils.clip_grad_norm_`` and the readable
``clip_gradients`` for the fused clipping; sequential draws for the prefetcher; and, for the
whole loop, a plain loop written here (a host read of every loss, readable clipping, batches
drawn when needed) whose losses ``train`` must reproduce. Also: one gradient all-reduce per
optimizer step under DDP, and schedule defaults that scale with ``max_steps``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cs336_basics.adamw import AdamW
from cs336_basics.batches import BatchPrefetcher, local_batch
from cs336_basics.config import ModelConfig
from cs336_basics.devices import Distributed
from cs336_basics.fused_clipping import clip_gradients_fused
from cs336_basics.gradient_clipping import clip_gradients
from cs336_basics.losses import cross_entropy
from cs336_basics.model import transformer_lm
from cs336_basics.schedule import get_lr_cosine_schedule
from cs336_basics.train_config import TrainConfig

MODEL = ModelConfig(vocab_size=32, context_length=8, d_model=16, num_layers=1, num_heads=2, d_ff=32)


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
