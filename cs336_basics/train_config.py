"""``TrainConfig``: every setting of a training run, and the config files it is read from.

A config file is JSON or TOML: training settings at the top level and a ``model`` table (a
``ModelConfig``). ``cs336 train`` reads one with ``load_config_file``, applies its flags with
``merge_overrides`` and builds the ``TrainConfig``. This module does not import torch, so a bad
config is reported before the slow imports.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from cs336_basics import registry
from cs336_basics.config import ModelConfig
from cs336_basics.errors import InputError, MissingInputError

Precision = Literal["auto", "fp32", "bf16"]
CompileMode = Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]

_POSITIVE_INTEGERS = (
    "batch_size",
    "grad_accum_steps",
    "max_steps",
    "eval_interval",
    "eval_batches",
    "log_interval",
    "checkpoint_interval",
)


def flag(name: str) -> str:
    """The command-line flag of a setting: ``lr_max`` -> ``--lr-max``."""
    return "--" + name.replace("_", "-")


@dataclass
class TrainConfig:
    """Everything a training run needs besides the data itself.

    ``batch_size`` is the number of sequences per micro-batch summed over all ranks, so one
    optimizer step sees ``batch_size * grad_accum_steps * context_length`` tokens.
    ``cosine_steps`` defaults to ``max_steps`` and the warm-up to ``warmup_fraction`` of it, so
    the schedule scales with the run; ``warmup_steps`` sets the warm-up exactly instead.
    ``max_seconds`` optionally bounds wall time (the run stops cleanly, with a checkpoint, after
    the step that crosses it); the schedule then follows whichever budget is further along,
    steps or seconds, so a slow machine still decays the learning rate to ``lr_min`` by the
    deadline. Only step-bound runs resume exactly. ``optimizer`` is ``"adamw"`` (the readable
    ``AdamW``) or a name an extension registered (``cs336_basics.registry``; the variants add
    ``"adamw_foreach"``, the same algorithm with multi-tensor updates, faster on a GPU); weight decay applies to matrices only, never to gains and biases (1-D parameters).
    With ``compile``, ``compile_mode`` is ``torch.compile``'s mode: ``"reduce-overhead"`` replays
    each step as a CUDA graph (fewer kernel launches for small models), ``"max-autotune"`` also
    searches for faster matmul kernels (slow to start); both matter on a GPU only.
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
    warmup_steps: int | None = None
    warmup_fraction: float = 0.05
    cosine_steps: int | None = None
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    adam_eps: float = 1e-8
    optimizer: str = "adamw"
    grad_clip: float | None = 1.0
    eval_interval: int = 100
    eval_batches: int = 10
    log_interval: int = 10
    checkpoint_interval: int = 500
    seed: int = 0
    device: str = "auto"
    precision: Precision = "auto"
    compile: bool = False
    compile_mode: CompileMode = "default"
    progress: bool = True
    wandb_project: str | None = None
    wandb_run_name: str | None = None

    def __post_init__(self) -> None:
        for name in _POSITIVE_INTEGERS:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InputError(f"{name} ({flag(name)}) must be a positive integer; got {value!r}")
        if self.cosine_steps is not None and self.cosine_steps < 1:
            raise InputError(
                f"cosine_steps (--cosine-steps) must be positive; got {self.cosine_steps}"
            )
        if not 0 <= self.warmup_fraction <= 1:
            raise InputError(
                f"warmup_fraction (--warmup-fraction) must be in [0, 1]; got {self.warmup_fraction}"
            )
        if self.warmup_steps is not None and not 0 <= self.warmup_steps <= self.schedule_steps:
            raise InputError(
                f"warmup_steps={self.warmup_steps} must be between 0 and the schedule's length "
                f"({self.schedule_steps} steps: cosine_steps, else max_steps); lower "
                "--warmup-steps, or leave it unset to warm up for --warmup-fraction of the run"
            )
        if not 0 <= self.lr_min <= self.lr_max:
            raise InputError(
                f"need 0 <= lr_min <= lr_max; got lr_min={self.lr_min}, lr_max={self.lr_max}"
            )
        if self.grad_clip is not None and self.grad_clip <= 0:
            raise InputError(
                f"grad_clip (--grad-clip) must be positive or unset; got {self.grad_clip}"
            )
        if self.max_seconds is not None and self.max_seconds <= 0:
            raise InputError(
                f"max_seconds (--max-seconds) must be positive; got {self.max_seconds}"
            )
        optimizers = ("adamw", *registry.optimizer_names())  # the core's, then the extensions'
        if self.optimizer not in optimizers:
            raise InputError(
                f"optimizer (--optimizer) must be one of {', '.join(optimizers)}; "
                f"got {self.optimizer!r}"
            )
        if self.compile_mode not in get_args(CompileMode):
            raise InputError(
                f"compile_mode (--compile-mode) must be one of {get_args(CompileMode)}; "
                f"got {self.compile_mode!r}"
            )
        if self.precision not in ("auto", "fp32", "bf16"):
            raise InputError(f"precision must be auto, fp32 or bf16; got {self.precision!r}")

    @property
    def schedule_steps(self) -> int:
        """The step at which the cosine schedule reaches ``lr_min``."""
        return self.max_steps if self.cosine_steps is None else self.cosine_steps

    @property
    def warmup_iters(self) -> int:
        """Warm-up steps: ``warmup_steps`` if set, else ``warmup_fraction`` of the schedule."""
        if self.warmup_steps is not None:
            return self.warmup_steps
        return round(self.warmup_fraction * self.schedule_steps)

    @property
    def tokens_per_step(self) -> int:
        return self.batch_size * self.grad_accum_steps * self.model.context_length

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "model": self.model.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise InputError(
                f"unknown training setting(s): {', '.join(unknown)} (see cs336 train --help)"
            )
        missing = sorted({"model", "train_data"} - set(data))
        if missing:
            raise InputError(
                f"the training config is missing: {', '.join(missing)} (give them in the config "
                "file, or as --train-data and the model flags)"
            )
        model = data["model"]
        try:
            model = model if isinstance(model, ModelConfig) else ModelConfig.from_dict(model)
            return cls(**{**data, "model": model})
        except InputError:
            raise
        except (TypeError, ValueError) as error:
            raise InputError(f"invalid model or training setting: {error}") from error


def load_config_file(path: str | os.PathLike) -> dict[str, Any]:
    """Read a ``.json`` or ``.toml`` config: training settings at the top, a ``model`` table."""
    path = Path(path)
    if not path.is_file():
        kind = "is a directory" if path.is_dir() else "not found"
        raise MissingInputError(f"config file {path} {kind}; give a .json or .toml file")
    try:
        text = path.read_text(encoding="utf-8")
        settings = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        kind = "TOML" if path.suffix == ".toml" else "JSON"
        raise InputError(f"cannot parse config file {path} as {kind}: {error}") from error
    if not isinstance(settings, dict):
        raise InputError(f"config file {path} must hold a table of settings, not {settings!r:.40}")
    return settings


def merge_overrides(settings: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Apply ``{"lr_max": 3e-4, "model.d_model": 256, ...}`` on top of a nested settings dict."""
    merged = {**settings, "model": dict(settings.get("model") or {})}
    for key, value in overrides.items():
        if key.startswith("model."):
            merged["model"][key.removeprefix("model.")] = value
        else:
            merged[key] = value
    return merged
