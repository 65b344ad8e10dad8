"""The training loop: token arrays in, checkpoints, metrics and a loss plot out.

``train(config)`` runs single-process or, under ``torchrun``, as one rank of a
``DistributedDataParallel`` job. Its behaviour in brief:

- **Batches.** Every optimizer step consumes ``grad_accum_steps`` micro-batches of
  ``batch_size`` sequences *in total across ranks*; each rank takes its slice of the same
  randomly drawn windows, so a run on N processes sees exactly the data of a single-process
  run with the same settings, and their gradients agree.
- **Schedule.** AdamW with linear warmup then cosine decay, optional global-norm clipping.
- **Resume.** Checkpoints hold the model, optimizer, step, sampler state and RNG states;
  ``train(config, resume=...)`` continues with the very losses the uninterrupted run would
  have produced.
- **Failure.** A NaN or infinite loss stops the run before the bad step is applied and
  leaves the last good checkpoint untouched.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch
import torch.distributed as dist
from torch import nn

from cs336_basics.adamw import AdamW
from cs336_basics.atomic_write import atomic_writer
from cs336_basics.builder import build_model
from cs336_basics.checkpoint import (
    read_checkpoint,
    restore_rng_states,
    save_checkpoint,
    unwrap_model,
)
from cs336_basics.config import ModelConfig
from cs336_basics.data import gather_windows, load_tokens, resolve_device, sample_start_indices
from cs336_basics.gradient_clipping import clip_gradients
from cs336_basics.loss_plot import plot_losses, read_metrics
from cs336_basics.losses import cross_entropy
from cs336_basics.schedule import get_lr_cosine_schedule

Precision = Literal["auto", "fp32", "bf16"]


@dataclass
class TrainConfig:
    """Everything a training run needs besides the data itself.

    ``batch_size`` is the number of sequences per micro-batch summed over all ranks, so one
    optimizer step sees ``batch_size * grad_accum_steps * context_length`` tokens.
    ``cosine_steps`` defaults to ``max_steps``. ``max_seconds`` optionally bounds wall time
    (the run stops cleanly, with a checkpoint, after the step that crosses it); the schedule
    then follows whichever budget is further along, steps or seconds, so a slow machine still
    decays the learning rate to ``lr_min`` by the deadline. Only step-bound runs resume exactly.
    """

    model: ModelConfig
    train_data: str
    val_data: str | None = None
    data_dtype: str = "uint16"
    out_dir: str = "runs/train"
    batch_size: int = 32
    grad_accum_steps: int = 1
    max_steps: int = 1000
    max_seconds: float | None = None
    lr_max: float = 1e-3
    lr_min: float = 1e-4
    warmup_steps: int = 100
    cosine_steps: int | None = None
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    adam_eps: float = 1e-8
    grad_clip: float | None = 1.0
    eval_interval: int = 100
    eval_batches: int = 10
    log_interval: int = 10
    checkpoint_interval: int = 500
    seed: int = 0
    device: str = "auto"
    precision: Precision = "auto"
    compile: bool = False
    progress: bool = True
    wandb_project: str | None = None
    wandb_run_name: str | None = None

    def __post_init__(self) -> None:
        positive = (
            "batch_size",
            "grad_accum_steps",
            "max_steps",
            "eval_interval",
            "eval_batches",
            "log_interval",
            "checkpoint_interval",
        )
        for name in positive:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"TrainConfig.{name} must be a positive integer; got {value!r}")
        if self.warmup_steps < 0 or self.warmup_steps > self.schedule_steps:
            raise ValueError(
                f"need 0 <= warmup_steps <= cosine_steps; got warmup_steps={self.warmup_steps}, "
                f"cosine_steps={self.schedule_steps}"
            )
        if not 0 <= self.lr_min <= self.lr_max:
            raise ValueError(
                f"need 0 <= lr_min <= lr_max; got lr_min={self.lr_min}, lr_max={self.lr_max}"
            )
        if self.grad_clip is not None and self.grad_clip <= 0:
            raise ValueError(f"grad_clip must be positive or None; got {self.grad_clip}")
        if self.precision not in ("auto", "fp32", "bf16"):
            raise ValueError(f"precision must be auto, fp32 or bf16; got {self.precision!r}")

    @property
    def schedule_steps(self) -> int:
        return self.max_steps if self.cosine_steps is None else self.cosine_steps

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "model": self.model.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown training setting(s): {', '.join(unknown)}")
        missing = sorted({"model", "train_data"} - set(data))
        if missing:
            raise ValueError(f"the training config is missing: {', '.join(missing)}")
        model = data["model"]
        return cls(
            **{
                **data,
                "model": model if isinstance(model, ModelConfig) else ModelConfig.from_dict(model),
            }
        )


def load_config_file(path: str | os.PathLike) -> dict[str, Any]:
    """Read a ``.json`` or ``.toml`` config: training settings at the top, a ``model`` table."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"config file not found: {path}")
    try:
        if path.suffix == ".toml":
            return tomllib.loads(path.read_text())
        return json.loads(path.read_text())
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as error:
        raise ValueError(f"cannot parse config file {path}: {error}") from error


def merge_overrides(settings: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Apply ``{"lr_max": 3e-4, "model.d_model": 256, ...}`` on top of a nested settings dict."""
    merged = {**settings, "model": dict(settings.get("model") or {})}
    for key, value in overrides.items():
        if key.startswith("model."):
            merged["model"][key.removeprefix("model.")] = value
        else:
            merged[key] = value
    return merged


@dataclass
class TrainResult:
    """What a finished (or stopped) run leaves behind."""

    step: int
    train_loss: float | None
    val_loss: float | None
    stopped: str  # "completed", "time budget" or "non-finite loss"
    out_dir: Path
    checkpoint: Path | None
    metrics: Path
    plot: Path | None
    tokens_per_second: float | None = None
    history: list[dict] = field(default_factory=list)


# --- devices and processes -------------------------------------------------------------------


def auto_device() -> str:
    """The best available device: CUDA, then Apple MPS, then CPU."""
    if torch.cuda.is_available():
        return "cuda"
    if torch.backends.mps.is_available():
        return "mps"
    return "cpu"


@dataclass
class Distributed:
    """This process's place in a (possibly one-process) job."""

    rank: int = 0
    world_size: int = 1
    device: torch.device = torch.device("cpu")
    owns_process_group: bool = False  # this run joined the group, so it also leaves it

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    def mean(self, value: float) -> float:
        """The average of ``value`` over ranks (``value`` itself without DDP)."""
        if not self.enabled:
            return value
        tensor = torch.tensor([value], dtype=torch.float64, device=self.device)
        dist.all_reduce(tensor)
        return tensor.item() / self.world_size

    def maximum(self, value: float) -> float:
        """The largest ``value`` over ranks."""
        if not self.enabled:
            return value
        tensor = torch.tensor([value], dtype=torch.float64, device=self.device)
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
        return tensor.item()

    def any(self, flag: bool) -> bool:
        """True on every rank if ``flag`` is true on any rank."""
        return bool(self.maximum(float(flag)))


def setup_distributed(device_setting: str) -> Distributed:
    """Join the ``torchrun`` process group when ``WORLD_SIZE > 1``; pick this rank's device."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    device_name = auto_device() if device_setting == "auto" else device_setting
    if world_size == 1:
        return Distributed(device=resolve_device(device_name))
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    if device_name.startswith("cuda"):
        device = resolve_device(f"cuda:{local_rank}")
        torch.cuda.set_device(device)
        backend = "nccl"
    else:
        device = resolve_device(device_name)
        backend = "gloo"
    joining = not dist.is_initialized()
    if joining:
        dist.init_process_group(backend=backend)
    return Distributed(rank=rank, world_size=world_size, device=device, owns_process_group=joining)


def autocast_context(device: torch.device, precision: str) -> contextlib.AbstractContextManager:
    """bfloat16 autocast on CUDA (``auto`` or ``bf16``); plain float32 everywhere else."""
    use_bf16 = precision == "bf16" or (
        precision == "auto" and device.type == "cuda" and torch.cuda.is_bf16_supported()
    )
    if not use_bf16:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)


# --- the loop --------------------------------------------------------------------------------


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


def local_batch(
    dataset, config: TrainConfig, generator: torch.Generator, env: Distributed
) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's slice of one global micro-batch."""
    if config.batch_size % env.world_size != 0:
        raise ValueError(
            f"batch_size={config.batch_size} must be divisible by the number of processes ({env.world_size})"
        )
    starts = sample_start_indices(
        len(dataset), config.batch_size, config.model.context_length, generator
    )
    per_rank = config.batch_size // env.world_size
    mine = starts[env.rank * per_rank : (env.rank + 1) * per_rank]
    return gather_windows(dataset, mine, config.model.context_length, env.device)


@torch.no_grad()
def evaluate(model: nn.Module, dataset, config: TrainConfig, env: Distributed) -> float:
    """Mean loss on ``eval_batches`` fixed validation batches (the same ones at every evaluation)."""
    was_training = model.training
    model.eval()
    generator = torch.Generator().manual_seed(config.seed + 1)
    # BEGIN SOLUTION
    total = 0.0
    for _ in range(config.eval_batches):
        inputs, targets = local_batch(dataset, config, generator, env)
        with autocast_context(env.device, config.precision):
            total += cross_entropy(model(inputs).float(), targets).item()
    # END SOLUTION
    model.train(was_training)
    return env.mean(total / config.eval_batches)


def schedule_position(step: int, elapsed_s: float, config: TrainConfig, env: Distributed) -> int:
    """The iteration the learning-rate schedule is at: ``step``, or further on if the fraction
    of ``max_seconds`` already spent is larger (agreed across ranks, so replicas stay equal)."""
    if config.max_seconds is None:
        return step
    by_time = int(env.maximum(elapsed_s) / config.max_seconds * config.schedule_steps)
    return max(step, by_time)


def accumulate_gradients(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    dataset,
    config: TrainConfig,
    generator: torch.Generator,
    env: Distributed,
) -> float:
    """Zero the gradients, then accumulate those of ``grad_accum_steps`` micro-batches.

    Each micro-batch loss is divided by ``grad_accum_steps``, so the gradient is that of the
    mean loss over the whole step. Under DDP only the last micro-batch all-reduces gradients
    (``no_sync`` for the others). Returns this rank's mean loss.
    """
    optimizer.zero_grad(set_to_none=True)
    # BEGIN SOLUTION
    loss_sum = 0.0
    for micro_step in range(config.grad_accum_steps):
        inputs, targets = local_batch(dataset, config, generator, env)
        is_last = micro_step == config.grad_accum_steps - 1
        sync = contextlib.nullcontext() if is_last or not env.enabled else model.no_sync()
        with sync:
            with autocast_context(env.device, config.precision):
                loss = language_model_loss(model, inputs, targets)
            (loss / config.grad_accum_steps).backward()
        loss_sum += loss.item()
    return loss_sum / config.grad_accum_steps
    # END SOLUTION


class MetricsLog:
    """Append-only JSONL metrics on rank 0, mirrored to Weights & Biases when enabled."""

    def __init__(self, path: Path, enabled: bool, wandb_run: Any = None) -> None:
        self.path = path
        self.enabled = enabled
        self.wandb_run = wandb_run

    def truncate_after(self, step: int) -> None:
        """Drop records past ``step`` (a resumed run rewrites what the crashed run logged)."""
        if not self.enabled:
            return
        kept = [r for r in read_metrics(self.path) if r["step"] <= step]
        with atomic_writer(self.path) as handle:
            handle.write("".join(json.dumps(r) + "\n" for r in kept).encode())

    def write(self, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        with open(self.path, "a") as handle:
            handle.write(json.dumps(record) + "\n")
        if self.wandb_run is not None:
            split = record["split"]
            self.wandb_run.log(
                {f"{split}/{k}": v for k, v in record.items() if k not in ("step", "split")},
                step=record["step"],
            )


def start_wandb(config: TrainConfig) -> Any:
    try:
        import wandb
    except ImportError as error:
        raise RuntimeError(
            "wandb_project is set but Weights & Biases is not installed; run "
            "`uv sync --extra wandb` (or drop wandb_project)"
        ) from error
    return wandb.init(
        project=config.wandb_project, name=config.wandb_run_name, config=config.to_dict()
    )


def _check_resume_compatible(saved: dict[str, Any] | None, config: TrainConfig, path: Path) -> None:
    if not saved or "model" not in saved:
        raise ValueError(f"{path} does not record a model config, so it cannot be resumed")
    current = config.model.to_dict()
    differences = [
        k
        for k in sorted(set(saved["model"]) | set(current))
        if saved["model"].get(k) != current.get(k)
    ]
    if differences:
        raise ValueError(
            f"cannot resume from {path}: its model config differs in {', '.join(differences)}"
        )


def train(config: TrainConfig, resume: str | os.PathLike | bool | None = None) -> TrainResult:
    """Train a ``TransformerLM`` as ``config`` says; ``resume=True`` continues from
    ``<out_dir>/checkpoints/latest.pt``, a path continues from that checkpoint."""
    env = setup_distributed(config.device)
    out_dir = Path(config.out_dir)
    checkpoint_path = out_dir / "checkpoints" / "latest.pt"
    metrics_path = out_dir / "metrics.jsonl"
    plot_path = out_dir / "loss.png"
    if env.is_main:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "config.json").write_text(json.dumps(config.to_dict(), indent=2) + "\n")

    train_tokens = load_tokens(config.train_data, config.data_dtype)
    val_tokens = load_tokens(config.val_data, config.data_dtype) if config.val_data else None

    torch.manual_seed(config.seed)
    model = build_model(config.model, device=env.device)
    optimizer = AdamW(
        model.parameters(),
        lr=config.lr_max,
        betas=(config.beta1, config.beta2),
        eps=config.adam_eps,
        weight_decay=config.weight_decay,
    )
    batch_generator = torch.Generator().manual_seed(config.seed)
    step, elapsed_before, last_good = 0, 0.0, None

    resume_path = checkpoint_path if resume is True else (Path(resume) if resume else None)
    if resume_path is not None:
        saved = read_checkpoint(resume_path)
        _check_resume_compatible(saved["config"], config, resume_path)
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        restore_rng_states(saved["rng"])
        batch_generator.set_state(saved["extra"]["batch_generator"])
        step, elapsed_before, last_good = (
            saved["iteration"],
            saved["extra"]["elapsed_s"],
            resume_path,
        )
        saved_schedule = saved["config"].get("cosine_steps") or saved["config"].get("max_steps")
        if env.is_main and saved_schedule != config.schedule_steps:
            print(
                f"note: the cosine schedule now ends at step {config.schedule_steps}, not {saved_schedule} "
                "as in the checkpointed run (set cosine_steps to keep it)",
                file=sys.stderr,
            )

    wandb_run = start_wandb(config) if config.wandb_project and env.is_main else None
    metrics = MetricsLog(metrics_path, env.is_main, wandb_run)
    if resume_path is not None:
        metrics.truncate_after(step)
    elif env.is_main:
        metrics_path.unlink(missing_ok=True)

    trained_model: nn.Module = model
    if env.enabled:
        device_ids = [env.device.index] if env.device.type == "cuda" else None
        trained_model = nn.parallel.DistributedDataParallel(model, device_ids=device_ids)
    if config.compile:
        trained_model = torch.compile(trained_model)
    trained_model.train()

    def write_checkpoint() -> Path:
        extra = {"batch_generator": batch_generator.get_state(), "elapsed_s": elapsed()}
        if env.is_main:
            save_checkpoint(
                model, optimizer, step, checkpoint_path, config=config.to_dict(), extra=extra
            )
        return checkpoint_path

    started = time.perf_counter()

    def elapsed() -> float:
        return elapsed_before + time.perf_counter() - started

    tokens_per_step = config.batch_size * config.grad_accum_steps * config.model.context_length
    progress = _progress_bar(config, env, initial=step)
    train_loss = val_loss = None
    stopped = "completed"
    interval_seconds, interval_steps = 0.0, 0  # time spent in training steps only, for tokens/s
    tokens_per_second = None

    if val_tokens is not None and step == 0:  # the starting point of the validation curve
        val_loss = evaluate(trained_model, val_tokens, config, env)
        metrics.write(
            {"step": 0, "split": "val", "loss": val_loss, "tokens": 0, "elapsed_s": elapsed()}
        )

    while step < config.max_steps:
        step_started = time.perf_counter()
        lr = get_lr_cosine_schedule(
            schedule_position(step, elapsed(), config, env),
            config.lr_max,
            config.lr_min,
            config.warmup_steps,
            config.schedule_steps,
        )
        for group in optimizer.param_groups:
            group["lr"] = lr
        train_loss = env.mean(
            accumulate_gradients(
                trained_model, optimizer, train_tokens, config, batch_generator, env
            )
        )
        if not math.isfinite(train_loss):
            stopped = "non-finite loss"
            where = (
                f"{last_good} (step {_checkpoint_step(last_good)})"
                if last_good
                else "none was written"
            )
            message = (
                f"stopping: the training loss is {train_loss} at step {step + 1}; the update was "
                f"not applied. Last good checkpoint: {where}."
            )
            if env.is_main:
                print(message, file=sys.stderr)
            train_loss = None
            break
        grad_norm = (
            clip_gradients(model.parameters(), config.grad_clip) if config.grad_clip else None
        )
        optimizer.step()
        step += 1
        interval_steps += 1
        interval_seconds += time.perf_counter() - step_started
        progress.update(1)
        progress.set_postfix(loss=f"{train_loss:.3f}", lr=f"{lr:.2e}", refresh=False)

        if step % config.log_interval == 0 or step == config.max_steps:
            tokens_per_second = (
                interval_steps * tokens_per_step / interval_seconds
                if interval_seconds > 0
                else None
            )
            metrics.write(
                {
                    "step": step,
                    "split": "train",
                    "loss": train_loss,
                    "lr": lr,
                    "grad_norm": None if grad_norm is None else grad_norm.item(),
                    "tokens": step * tokens_per_step,
                    "elapsed_s": elapsed(),
                    "tokens_per_s": tokens_per_second,
                }
            )
            interval_seconds, interval_steps = 0.0, 0

        out_of_time = env.any(config.max_seconds is not None and elapsed() >= config.max_seconds)
        finishing = step == config.max_steps or out_of_time
        if val_tokens is not None and (step % config.eval_interval == 0 or finishing):
            val_loss = evaluate(trained_model, val_tokens, config, env)
            metrics.write(
                {
                    "step": step,
                    "split": "val",
                    "loss": val_loss,
                    "tokens": step * tokens_per_step,
                    "elapsed_s": elapsed(),
                }
            )
            if env.is_main:
                progress.write(
                    f"step {step}: train loss {train_loss:.4f}, val loss {val_loss:.4f}, lr {lr:.2e}"
                )
        if step % config.checkpoint_interval == 0 or finishing:
            last_good = write_checkpoint()
        if out_of_time and step < config.max_steps:
            stopped = "time budget"
            break
    progress.close()

    if env.is_main:
        plot = plot_losses(metrics_path, plot_path) if metrics_path.is_file() else None
    else:
        plot = None
    if wandb_run is not None:
        wandb_run.finish(exit_code=0 if stopped != "non-finite loss" else 1)
    if env.owns_process_group:
        dist.destroy_process_group()
    return TrainResult(
        step=step,
        train_loss=train_loss,
        val_loss=val_loss,
        stopped=stopped,
        out_dir=out_dir,
        checkpoint=last_good,
        metrics=metrics_path,
        plot=plot,
        tokens_per_second=tokens_per_second,
        history=read_metrics(metrics_path) if env.is_main else [],
    )


def _checkpoint_step(path: Path) -> int:
    return read_checkpoint(path)["iteration"]


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
