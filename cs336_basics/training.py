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
from pathlib import Path

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
    run = _Run(config, env, folder, model, optimizer, train_tokens, val_tokens)
    if resume:
        run.restore(folder.checkpoint if resume is True else Path(resume))
    with StopSignals(announce=env.is_main) as stop:
        return run.loop(stop)


class _Run:
    """The state of one training run between steps, and what it does at each read point."""

    def __init__(self, config, env, folder, model, optimizer, train_tokens, val_tokens) -> None:
        self.config, self.env, self.folder = config, env, folder
        self.model, self.optimizer, self.val_tokens = model, optimizer, val_tokens
        self.generator = torch.Generator().manual_seed(config.seed)
        self.batches = BatchPrefetcher(
            train_tokens, config.batch_size, config.model.context_length, self.generator, env
        )
        self.step, self.elapsed_before = 0, 0.0
        # The latest checkpoint (rank 0 writes it) and its step, known on every rank.
        self.last_checkpoint: Path | None = None
        self.last_checkpoint_step: int | None = None
        self.pending_losses: list[torch.Tensor] = []  # on the device, not yet read
        self.unlogged_losses: list[float] = []  # read, not yet written to the metrics
        self.train_loss = self.val_loss = self.tokens_per_second = None
        self.lr, self.grad_norm = config.lr_max, None  # of the latest step
        self.failure: str | None = None  # why the run could not go on (a non-finite loss)
        self.started = self.compute_since = time.perf_counter()
        self.compute_seconds, self.compute_steps = 0.0, 0  # since the last log, for tokens/s

    def elapsed(self) -> float:
        return self.elapsed_before + time.perf_counter() - self.started

    def restore(self, path: Path) -> None:
        """Continue from a checkpoint of a run with the same model config."""
        try:
            saved = read_checkpoint(path)
        except CheckpointError as error:
            raise InputError(f"{error}; check --resume") from error
        _check_resume_compatible(saved["config"], self.config, path)
        self.model.load_state_dict(saved["model"])
        groups = len(saved["optimizer"]["param_groups"])
        if groups != len(self.optimizer.param_groups):
            raise InputError(
                f"cannot resume from {path}: its optimizer has {groups} parameter group(s), this "
                f"trainer uses {len(self.optimizer.param_groups)} (matrices with weight decay, "
                "gains and biases without); start a new --out-dir"
            )
        self.optimizer.load_state_dict(saved["optimizer"])
        restore_rng_states(saved["rng"])
        self.generator.set_state(saved["extra"]["batch_generator"])
        self.step, self.elapsed_before = saved["iteration"], saved["extra"]["elapsed_s"]
        self.last_checkpoint, self.last_checkpoint_step = path, self.step
        self.started = time.perf_counter()
        saved_schedule = saved["config"].get("cosine_steps") or saved["config"].get("max_steps")
        if self.env.is_main and saved_schedule != self.config.schedule_steps:
            print(
                f"note: the cosine schedule now ends at step {self.config.schedule_steps}, not "
                f"{saved_schedule} as in the checkpointed run (set cosine_steps to keep it)",
                file=sys.stderr,
            )

    def loop(self, stop: StopSignals) -> TrainResult:
        """Train until ``max_steps``, the time budget, a signal or a non-finite loss."""
        self._start_outputs()
        stopped = "completed"
        while self.step < self.config.max_steps:
            self._train_step()
            reason = self._stop_reason(stop)
            if reason is not None or self._scheduled_read():
                if not self._read_losses():
                    stopped = "non-finite loss"
                    break
                self._after_read(stopping=reason)
            if reason is not None:
                stopped = reason
                break
        return self._finish(stopped)

    def _start_outputs(self) -> None:
        config, env = self.config, self.env
        wandb_run = None
        if config.wandb_project and env.is_main:
            wandb_run = start_wandb(config.wandb_project, config.wandb_run_name, config.to_dict())
        self.metrics = MetricsLog(self.folder.metrics, env.is_main, wandb_run)
        if self.step > 0:
            self.metrics.truncate_after(self.step)
        self.trained_model: nn.Module = self.model
        if env.enabled:
            device_ids = [env.device.index] if env.device.type == "cuda" else None
            self.trained_model = nn.parallel.DistributedDataParallel(
                self.model, device_ids=device_ids
            )
        if config.compile:
            self.trained_model = torch.compile(self.trained_model, mode=config.compile_mode)
        self.trained_model.train()
        self.progress = _progress_bar(config, env, initial=self.step)
        self.agreed_elapsed = env.maximum(self.elapsed())
        if self.val_tokens is not None and self.step == 0:  # the validation curve's start
            self._evaluate()
        self.compute_since = time.perf_counter()

    def _train_step(self) -> None:
        """One optimizer step, queued on the device without waiting for it."""
        config = self.config
        lr = self._learning_rate()
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        loss = accumulate_gradients(self.trained_model, self.batches, config, self.env)
        self.pending_losses.append(loss)
        if config.grad_clip:
            self.grad_norm = clip_gradients_fused(self.model.parameters(), config.grad_clip)
        self.optimizer.step()
        self.step += 1
        self.lr = lr
        self.progress.update(1)

    def _learning_rate(self) -> float:
        """The schedule at ``step``, or further on if more of ``max_seconds`` is spent."""
        config, position = self.config, self.step
        if config.max_seconds is not None:
            if not self.env.enabled:  # under DDP, ranks agree on the time at read points
                self.agreed_elapsed = self.elapsed()
            by_time = int(self.agreed_elapsed / config.max_seconds * config.schedule_steps)
            position = max(position, by_time)
        return get_lr_cosine_schedule(
            position, config.lr_max, config.lr_min, config.warmup_iters, config.schedule_steps
        )

    def _scheduled_read(self) -> bool:
        config, step = self.config, self.step
        intervals = (config.log_interval, config.eval_interval, config.checkpoint_interval)
        return step == config.max_steps or any(step % n == 0 for n in intervals)

    def _stop_reason(self, stop: StopSignals) -> str | None:
        """``"interrupted"``, ``"time budget"`` or None; under DDP decided at read points only,
        where the ranks can agree without an extra wait per step."""
        env, config = self.env, self.config
        if env.enabled and not self._scheduled_read():
            return None
        self.agreed_elapsed = env.maximum(self.elapsed())
        if env.any(stop.requested is not None):
            return "interrupted"
        out_of_time = config.max_seconds is not None and self.agreed_elapsed >= config.max_seconds
        return "time budget" if out_of_time and self.step < config.max_steps else None

    def _read_losses(self) -> bool:
        """Bring the pending losses to the host (averaged over ranks); False if one is NaN/inf."""
        first_step = self.step - len(self.pending_losses) + 1
        losses = self.env.mean_tensor(torch.stack(self.pending_losses)).tolist()
        self.pending_losses.clear()
        self.compute_seconds += time.perf_counter() - self.compute_since
        self.compute_steps += len(losses)
        for offset, loss in enumerate(losses):
            if loss != loss or abs(loss) == float("inf"):
                self.failure = self._describe_non_finite(loss, first_step + offset)
                self.step = first_step + offset - 1  # the last step with a finite loss
                return False
        self.unlogged_losses += losses
        return True

    def _describe_non_finite(self, loss: float, step: int) -> str:
        where = "none was written"
        if self.last_checkpoint is not None:
            where = f"{self.last_checkpoint} (step {self.last_checkpoint_step})"
        return (
            f"the training loss is {loss} at step {step}; no checkpoint was written after it. "
            f"Last good checkpoint: {where}. Lower the learning rate or raise the warmup."
        )

    def _after_read(self, stopping: str | None) -> None:
        """Log, evaluate and checkpoint as scheduled; all three when the run is finishing, but
        no evaluation when interrupted (the user is waiting)."""
        config, step = self.config, self.step
        finishing = stopping is not None or step == config.max_steps
        if step % config.log_interval == 0 or finishing:
            self._log_train()
        evaluate_now = step % config.eval_interval == 0 or finishing
        if self.val_tokens is not None and evaluate_now and stopping != "interrupted":
            self._evaluate()
        if step % config.checkpoint_interval == 0 or finishing:
            self._write_checkpoint()
        self.compute_since = time.perf_counter()

    def _log_train(self) -> None:
        self.train_loss = sum(self.unlogged_losses) / len(self.unlogged_losses)
        self.unlogged_losses.clear()
        tokens_per_step = self.config.tokens_per_step
        self.tokens_per_second = None
        if self.compute_seconds > 0:
            self.tokens_per_second = self.compute_steps * tokens_per_step / self.compute_seconds
        self.compute_seconds, self.compute_steps = 0.0, 0
        grad_norm = self.grad_norm
        self.metrics.write(
            {
                "step": self.step,
                "split": "train",
                "loss": self.train_loss,
                "lr": self.lr,
                "grad_norm": None if grad_norm is None else grad_norm.item(),
                "tokens": self.step * tokens_per_step,
                "elapsed_s": self.elapsed(),
                "tokens_per_s": self.tokens_per_second,
            }
        )
        self.progress.set_postfix(loss=f"{self.train_loss:.3f}", lr=f"{self.lr:.2e}", refresh=False)

    def _evaluate(self) -> None:
        self.val_loss = evaluate(self.trained_model, self.val_tokens, self.config, self.env)
        record = {"step": self.step, "split": "val", "loss": self.val_loss}
        tokens = self.step * self.config.tokens_per_step
        self.metrics.write({**record, "tokens": tokens, "elapsed_s": self.elapsed()})
        if self.env.is_main and self.step > 0:
            recent = self.unlogged_losses[-1:] or [self.train_loss]
            self.progress.write(
                f"step {self.step}: train loss {recent[0]:.4f}, val loss {self.val_loss:.4f}"
            )

    def _write_checkpoint(self) -> None:
        extra = {"batch_generator": self.batches.generator_state(), "elapsed_s": self.elapsed()}
        if self.env.is_main:
            save_checkpoint(
                self.model,
                self.optimizer,
                self.step,
                self.folder.checkpoint,
                config=self.config.to_dict(),
                extra=extra,
            )
        self.last_checkpoint, self.last_checkpoint_step = self.folder.checkpoint, self.step

    def _finish(self, stopped: str) -> TrainResult:
        self.progress.close()
        metrics_path = self.folder.metrics
        plot = None
        if self.env.is_main and metrics_path.is_file():
            plot = plot_losses(metrics_path, self.folder.plot)
        if self.metrics.wandb_run is not None:
            self.metrics.wandb_run.finish(exit_code=0 if stopped != "non-finite loss" else 1)
        if self.env.owns_process_group:
            dist.barrier()  # no rank tears gloo down while another still talks to it
            dist.destroy_process_group()
        return TrainResult(
            step=self.step,
            train_loss=None if stopped == "non-finite loss" else self.train_loss,
            val_loss=self.val_loss,
            stopped=stopped,
            out_dir=self.folder.root,
            checkpoint=self.last_checkpoint,
            metrics=metrics_path,
            plot=plot,
            tokens_per_second=self.tokens_per_second,
            history=read_metrics(metrics_path) if self.env.is_main else [],
            failure=self.failure,
        )


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


def _progress_bar(config: TrainConfig, env: Distributed, initial: int):
    from tqdm.auto import tqdm

    return tqdm(
        total=config.max_steps,
        initial=initial,
        desc="train",
        unit="step",
        disable=not (config.progress and env.is_main),
        dynamic_ncols=True,
    )
