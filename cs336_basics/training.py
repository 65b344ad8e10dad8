"""The training loop: token arrays in, checkpoints, metrics and a loss plot out.

``train(config)`` runs single-process or, under ``torchrun``, as one rank of a
``DistributedDataParallel`` job. Its behaviour in brief:

- **Batches.** Every optimizer step consumes ``grad_accum_steps`` micro-batches of
  ``batch_size`` sequences *in total across ranks*; each rank takes its slice of the same
  randomly drawn windows, so a run on N processes sees exactly the data of a single-process
  run with the same settings, and their gradients agree. Under DDP gradients are all-reduced
  once per optimizer step (``no_sync`` on the other micro-batches).
- **Schedule.** AdamW with linear warmup then cosine decay, optional global-norm clipping.
- **No waiting on the device.** A step never reads a value back to the host: losses stay on
  the device until the next *read point* (a log, evaluation or checkpoint step), where they
  are read together, checked for NaN/inf and logged as their mean since the last log.
- **Resume.** Checkpoints hold the model, optimizer, step, sampler state and RNG states;
  ``train(config, resume=...)`` continues with the very losses the uninterrupted run would
  have produced. A folder that already holds a run is only reused with ``resume`` or
  ``overwrite``.
- **Stopping.** A NaN or infinite loss stops the run at the next read point without writing
  another checkpoint, so the last good one stays; the result's ``failure`` says at which step
  and names that checkpoint (the CLI prints it as its error line). SIGINT/SIGTERM finish the current step,
  write a checkpoint and return ``stopped="interrupted"``.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from cs336_basics.adamw import AdamW
from cs336_basics.batches import BatchPrefetcher, local_batch
from cs336_basics.builder import build_model
from cs336_basics.checkpoint import (
    CheckpointError,
    read_checkpoint,
    restore_rng_states,
    save_checkpoint,
    unwrap_model,
)
from cs336_basics.devices import Distributed, autocast_context, setup_distributed
from cs336_basics.errors import InputError
from cs336_basics.fused_clipping import clip_gradients_fused
from cs336_basics.loss_plot import plot_losses, read_metrics
from cs336_basics.losses import cross_entropy
from cs336_basics.registry import optimizer_class as optimizer_class_named
from cs336_basics.run_folder import MetricsLog, RunFolder, TrainResult, start_wandb
from cs336_basics.schedule import get_lr_cosine_schedule
from cs336_basics.stop_signals import StopSignals
from cs336_basics.token_arrays import load_checked_tokens
from cs336_basics.train_config import TrainConfig


def language_model_loss(
    model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor
) -> torch.Tensor:
    """Next-token cross-entropy (in float32) plus any auxiliary loss the model reports (MoE)."""
    # BEGIN SOLUTION
    logits = model(inputs)
    loss = cross_entropy(logits.float(), targets)
    aux_loss = getattr(unwrap_model(model), "aux_loss", None)
    if aux_loss is not None:
        loss = loss + aux_loss()
    return loss
    # END SOLUTION


def accumulate_gradients(
    model: nn.Module, batches: BatchPrefetcher, config: TrainConfig, env: Distributed
) -> torch.Tensor:
    """Zero ``model``'s gradients, then accumulate those of ``grad_accum_steps`` micro-batches.

    Each micro-batch loss is divided by ``grad_accum_steps``, so the gradient is that of the
    mean loss over the whole step. A ``DistributedDataParallel`` model (compiled or not)
    all-reduces gradients only in the last micro-batch's backward (``no_sync`` for the others).
    Returns this rank's mean loss as a 0-d tensor on the device (reading it would make the host
    wait for the GPU).
    """
    model.zero_grad(set_to_none=True)
    # BEGIN SOLUTION
    can_defer_sync = hasattr(model, "no_sync")  # a data-parallel wrapper; plain modules never sync
    loss_sum = torch.zeros((), device=env.device)
    for micro_step in range(config.grad_accum_steps):
        inputs, targets = batches.next()
        is_last = micro_step == config.grad_accum_steps - 1
        sync = model.no_sync() if can_defer_sync and not is_last else contextlib.nullcontext()
        with sync:
            with autocast_context(env.device, config.precision):
                loss = language_model_loss(model, inputs, targets)
            (loss / config.grad_accum_steps).backward()
        loss_sum += loss.detach()
    return loss_sum / config.grad_accum_steps
    # END SOLUTION


@torch.no_grad()
def evaluate(model: nn.Module, dataset, config: TrainConfig, env: Distributed) -> float:
    """Mean loss on ``eval_batches`` fixed validation batches (the same ones at every evaluation)."""
    was_training = model.training
    model.eval()
    generator = torch.Generator().manual_seed(config.seed + 1)
    context = config.model.context_length
    # BEGIN SOLUTION
    total = torch.zeros((), device=env.device)
    for _ in range(config.eval_batches):
        inputs, targets = local_batch(dataset, config.batch_size, context, generator, env)
        with autocast_context(env.device, config.precision):
            total += cross_entropy(model(inputs).float(), targets)
    # END SOLUTION
    model.train(was_training)
    return env.mean(total.item() / config.eval_batches)


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Two AdamW groups, as in nanoGPT: matrices (embeddings, projections) decay by
    ``weight_decay``; 1-D parameters (RMSNorm gains, biases) do not, since shrinking a gain
    toward zero only fights the normalisation it scales."""
    parameters = [p for p in model.parameters() if p.requires_grad]
    return [
        {"params": [p for p in parameters if p.ndim >= 2], "weight_decay": weight_decay},
        {"params": [p for p in parameters if p.ndim < 2], "weight_decay": 0.0},
    ]


def _optimizer(model: nn.Module, config: TrainConfig) -> torch.optim.Optimizer:
    """The handout's ``AdamW``, or the optimizer an extension registered under ``config.optimizer``
    (the same update rule, e.g. with multi-tensor kernels)."""
    optimizer_class = (
        AdamW if config.optimizer == "adamw" else optimizer_class_named(config.optimizer)
    )
    return optimizer_class(
        parameter_groups(model, config.weight_decay),
        lr=config.lr_max,
        betas=(config.beta1, config.beta2),
        eps=config.adam_eps,
    )


def train(
    config: TrainConfig, resume: str | os.PathLike | bool | None = None, overwrite: bool = False
) -> TrainResult:
    """Train a ``TransformerLM`` as ``config`` says.

    ``resume=True`` continues from ``<out_dir>/checkpoints/latest.pt``, a path continues from
    that checkpoint; ``overwrite=True`` replaces a run already in ``out_dir`` (without either,
    such a folder is refused with ``OutputExistsError``).
    """
    env = setup_distributed(config.device)
    folder = RunFolder(config.out_dir)
    if env.is_main:
        folder.prepare(resume=resume or False, overwrite=overwrite)
        folder.write_config(config.to_dict())
    context, vocab = config.model.context_length, config.model.vocab_size
    train_tokens = load_checked_tokens(config.train_data, config.data_dtype, vocab, context)
    val_tokens = None
    if config.val_data:
        val_tokens = load_checked_tokens(config.val_data, config.data_dtype, vocab, context)

    torch.manual_seed(config.seed)
    model = build_model(config.model, device=env.device)
    optimizer = _optimizer(model, config)
    generator = torch.Generator().manual_seed(config.seed)  # draws the training batches
    state = _State(origin=time.perf_counter())
    if resume:
        checkpoint = folder.checkpoint if resume is True else Path(resume)
        state = _restore(checkpoint, config, env, model, optimizer, generator)
    batches = BatchPrefetcher(train_tokens, config.batch_size, context, generator, env)
    with StopSignals(announce=env.is_main) as stop:
        run = _start(config, env, folder, model, optimizer, batches, val_tokens, state)
        stopped = _train_steps(run, state, stop)
        return _finish(run, state, stopped)


@dataclass
class _Run:
    """What a run works with, fixed once it starts."""

    config: TrainConfig
    env: Distributed
    folder: RunFolder
    model: nn.Module  # the plain model: its parameters are clipped and checkpointed
    trained_model: nn.Module  # the model under DDP and torch.compile, as the steps call it
    optimizer: torch.optim.Optimizer
    batches: BatchPrefetcher
    val_tokens: np.ndarray | None
    metrics: MetricsLog
    progress: Any  # a progress bar (cs336_basics.progress), silent off rank 0


@dataclass
class _State:
    """Where a run stands; the loop and its read points update it."""

    origin: float  # time.perf_counter() when the run's elapsed time was 0
    step: int = 0  # optimizer steps done
    lr: float = 0.0  # the latest step's learning rate
    grad_norm: torch.Tensor | None = None  # the latest step's, before clipping (on the device)
    agreed_elapsed: float = 0.0  # elapsed seconds as the ranks agree on them (their maximum)
    unlogged_losses: list[float] = field(default_factory=list)  # read, not yet logged
    # Training compute since the last log (read points excluded), for tokens/s.
    compute_seconds: float = 0.0
    compute_steps: int = 0
    compute_since: float = 0.0
    # The latest checkpoint (rank 0 writes it) and its step, known on every rank.
    checkpoint: Path | None = None
    checkpoint_step: int | None = None
    # The latest logged values, as the result reports them.
    train_loss: float | None = None
    val_loss: float | None = None
    tokens_per_second: float | None = None
    failure: str | None = None  # why the run could not go on (a non-finite loss)


def _restore(
    path: Path,
    config: TrainConfig,
    env: Distributed,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    generator: torch.Generator,
) -> _State:
    """Load a checkpoint of a run with the same model config; the state to continue from."""
    try:
        saved = read_checkpoint(path)
    except CheckpointError as error:
        raise InputError(f"{error}; check --resume") from error
    _check_resume_compatible(saved["config"], config, path)
    model.load_state_dict(saved["model"])
    groups = len(saved["optimizer"]["param_groups"])
    if groups != len(optimizer.param_groups):
        raise InputError(
            f"cannot resume from {path}: its optimizer has {groups} parameter group(s), this "
            f"trainer uses {len(optimizer.param_groups)} (matrices with weight decay, "
            "gains and biases without); start a new --out-dir"
        )
    optimizer.load_state_dict(saved["optimizer"])
    restore_rng_states(saved["rng"])
    generator.set_state(saved["extra"]["batch_generator"])
    saved_schedule = saved["config"].get("cosine_steps") or saved["config"].get("max_steps")
    if env.is_main and saved_schedule != config.schedule_steps:
        print(
            f"note: the cosine schedule now ends at step {config.schedule_steps}, not "
            f"{saved_schedule} as in the checkpointed run (set cosine_steps to keep it)",
            file=sys.stderr,
        )
    step = saved["iteration"]
    origin = time.perf_counter() - saved["extra"]["elapsed_s"]
    return _State(origin=origin, step=step, checkpoint=path, checkpoint_step=step)


def _check_resume_compatible(saved: dict | None, config: TrainConfig, path: Path) -> None:
    if not saved or "model" not in saved:
        raise InputError(f"{path} does not record a model config, so it cannot be resumed")
    current = config.model.to_dict()
    differences = [
        k
        for k in sorted(set(saved["model"]) | set(current))
        if saved["model"].get(k) != current.get(k)
    ]
    if differences:
        raise InputError(
            f"cannot resume from {path}: its model config differs in {', '.join(differences)}; "
            "resume with the run's own config (its config.json), or start a new --out-dir"
        )


def _start(
    config: TrainConfig,
    env: Distributed,
    folder: RunFolder,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    batches: BatchPrefetcher,
    val_tokens: np.ndarray | None,
    state: _State,
) -> _Run:
    """Open the metrics (and wandb), wrap the model for DDP and compile, evaluate at step 0."""
    wandb_run = None
    if config.wandb_project and env.is_main:
        wandb_run = start_wandb(config.wandb_project, config.wandb_run_name, config.to_dict())
    metrics = MetricsLog(folder.metrics, env.is_main, wandb_run)
    if state.step > 0:
        metrics.truncate_after(state.step)  # a resumed run rewrites what the crashed run logged
    trained_model = model
    if env.enabled:
        device_ids = [env.device.index] if env.device.type == "cuda" else None
        trained_model = nn.parallel.DistributedDataParallel(model, device_ids=device_ids)
    if config.compile:
        trained_model = torch.compile(trained_model, mode=config.compile_mode)
    trained_model.train()
    progress = _progress_bar(config, env, initial=state.step)
    run = _Run(
        config, env, folder, model, trained_model, optimizer, batches, val_tokens, metrics, progress
    )
    state.agreed_elapsed = env.maximum(_elapsed(state))
    if val_tokens is not None and state.step == 0:  # the validation curve's start
        _evaluate(run, state)
    state.compute_since = time.perf_counter()
    return run


def _progress_bar(config: TrainConfig, env: Distributed, initial: int):
    from cs336_basics.progress import progress_bar

    return progress_bar(
        total=config.max_steps,
        initial=initial,
        desc="train",
        unit="step",
        disable=not (config.progress and env.is_main),
    )


def _train_steps(run: _Run, state: _State, stop: StopSignals) -> str:
    """Train until ``max_steps``, the time budget, a signal or a non-finite loss; say which."""
    config, env = run.config, run.env
    pending: list[torch.Tensor] = []  # step losses still on the device
    for step in range(state.step + 1, config.max_steps + 1):
        # One optimizer step, queued on the device; nothing here waits for it.
        state.lr = _learning_rate(config, env, state)
        for group in run.optimizer.param_groups:
            group["lr"] = state.lr
        pending.append(accumulate_gradients(run.trained_model, run.batches, config, env))
        if config.grad_clip:
            state.grad_norm = clip_gradients_fused(run.model.parameters(), config.grad_clip)
        run.optimizer.step()
        state.step = step
        run.progress.update(1)

        # Stop on a signal or the time budget. At a read point the losses come to the host, then
        # log, evaluate and checkpoint as scheduled: all three when the run is finishing, but no
        # evaluation when interrupted (the user is waiting).
        stopping = _stop_reason(config, env, state, stop)
        if stopping is None and not _is_read_point(config, step):
            continue
        if not _read_losses(pending, env, state):
            return "non-finite loss"
        finishing = stopping is not None or step == config.max_steps
        if step % config.log_interval == 0 or finishing:
            _log_train(run, state)
        evaluate_now = step % config.eval_interval == 0 or finishing
        if run.val_tokens is not None and evaluate_now and stopping != "interrupted":
            _evaluate(run, state)
        if step % config.checkpoint_interval == 0 or finishing:
            _save(run, state)
        state.compute_since = time.perf_counter()
        if stopping is not None:
            return stopping
    return "completed"


def _elapsed(state: _State) -> float:
    """Seconds of this run so far, those before a resume included."""
    return time.perf_counter() - state.origin


def _learning_rate(config: TrainConfig, env: Distributed, state: _State) -> float:
    """The schedule at ``state.step``, or further on if more of ``max_seconds`` is spent."""
    position = state.step
    if config.max_seconds is not None:
        if not env.enabled:  # under DDP, ranks agree on the time at read points
            state.agreed_elapsed = _elapsed(state)
        by_time = int(state.agreed_elapsed / config.max_seconds * config.schedule_steps)
        position = max(position, by_time)
    return get_lr_cosine_schedule(
        position, config.lr_max, config.lr_min, config.warmup_iters, config.schedule_steps
    )


def _stop_reason(
    config: TrainConfig, env: Distributed, state: _State, stop: StopSignals
) -> str | None:
    """``"interrupted"``, ``"time budget"`` or None; under DDP decided at read points only,
    where the ranks can agree without an extra wait per step."""
    if env.enabled and not _is_read_point(config, state.step):
        return None
    state.agreed_elapsed = env.maximum(_elapsed(state))
    if env.any(stop.requested is not None):
        return "interrupted"
    out_of_time = config.max_seconds is not None and state.agreed_elapsed >= config.max_seconds
    return "time budget" if out_of_time and state.step < config.max_steps else None


def _is_read_point(config: TrainConfig, step: int) -> bool:
    intervals = (config.log_interval, config.eval_interval, config.checkpoint_interval)
    return step == config.max_steps or any(step % n == 0 for n in intervals)


def _read_losses(pending: list[torch.Tensor], env: Distributed, state: _State) -> bool:
    """Bring the pending losses to the host (averaged over ranks); False if one is NaN/inf."""
    first_step = state.step - len(pending) + 1
    losses = env.mean_tensor(torch.stack(pending)).tolist()
    pending.clear()
    state.compute_seconds += time.perf_counter() - state.compute_since
    state.compute_steps += len(losses)
    for step, loss in enumerate(losses, start=first_step):
        if loss != loss or abs(loss) == float("inf"):
            where = "none was written"
            if state.checkpoint is not None:
                where = f"{state.checkpoint} (step {state.checkpoint_step})"
            state.failure = (
                f"the training loss is {loss} at step {step}; no checkpoint was written after "
                f"it. Last good checkpoint: {where}. Lower the learning rate or raise the warmup."
            )
            state.step = step - 1  # the last step with a finite loss
            return False
    state.unlogged_losses += losses
    return True


def _log_train(run: _Run, state: _State) -> None:
    """Write the mean training loss since the last log, with the step's lr, norm and speed."""
    state.train_loss = sum(state.unlogged_losses) / len(state.unlogged_losses)
    state.unlogged_losses.clear()
    tokens_per_step = run.config.tokens_per_step
    state.tokens_per_second = None
    if state.compute_seconds > 0:
        state.tokens_per_second = state.compute_steps * tokens_per_step / state.compute_seconds
    state.compute_seconds, state.compute_steps = 0.0, 0
    grad_norm = state.grad_norm
    run.metrics.write(
        {
            "step": state.step,
            "split": "train",
            "loss": state.train_loss,
            "lr": state.lr,
            "grad_norm": None if grad_norm is None else grad_norm.item(),
            "tokens": state.step * tokens_per_step,
            "elapsed_s": _elapsed(state),
            "tokens_per_s": state.tokens_per_second,
        }
    )
    run.progress.set_postfix(loss=f"{state.train_loss:.3f}", lr=f"{state.lr:.2e}", refresh=False)


def _evaluate(run: _Run, state: _State) -> None:
    state.val_loss = evaluate(run.trained_model, run.val_tokens, run.config, run.env)
    record = {"step": state.step, "split": "val", "loss": state.val_loss}
    tokens = state.step * run.config.tokens_per_step
    run.metrics.write({**record, "tokens": tokens, "elapsed_s": _elapsed(state)})
    if run.env.is_main and state.step > 0:
        recent = state.unlogged_losses[-1:] or [state.train_loss]
        run.progress.write(
            f"step {state.step}: train loss {recent[0]:.4f}, val loss {state.val_loss:.4f}"
        )


def _save(run: _Run, state: _State) -> None:
    extra = {"batch_generator": run.batches.generator_state(), "elapsed_s": _elapsed(state)}
    if run.env.is_main:
        save_checkpoint(
            run.model,
            run.optimizer,
            state.step,
            run.folder.checkpoint,
            config=run.config.to_dict(),
            extra=extra,
        )
    state.checkpoint, state.checkpoint_step = run.folder.checkpoint, state.step


def _finish(run: _Run, state: _State, stopped: str) -> TrainResult:
    """Close the outputs (loss plot, wandb, the process group) and say what the run left."""
    run.progress.close()
    metrics_path = run.folder.metrics
    plot = None
    if run.env.is_main and metrics_path.is_file():
        plot = plot_losses(metrics_path, run.folder.plot)
    if run.metrics.wandb_run is not None:
        run.metrics.wandb_run.finish(exit_code=0 if stopped != "non-finite loss" else 1)
    if run.env.owns_process_group:
        dist.barrier()  # no rank tears gloo down while another still talks to it
        dist.destroy_process_group()
    return TrainResult(
        step=state.step,
        train_loss=None if stopped == "non-finite loss" else state.train_loss,
        val_loss=state.val_loss,
        stopped=stopped,
        out_dir=run.folder.root,
        checkpoint=state.checkpoint,
        metrics=metrics_path,
        plot=plot,
        tokens_per_second=state.tokens_per_second,
        history=read_metrics(metrics_path) if run.env.is_main else [],
        failure=state.failure,
    )
