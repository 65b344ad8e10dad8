"""A training run's folder: what it holds, what ``train`` may replace, and its metrics log.

::

    <out_dir>/config.json             the TrainConfig (``cs336 train --config`` takes it back)
    <out_dir>/checkpoints/latest.pt   model, optimizer, step, sampler and RNG states
    <out_dir>/metrics.jsonl           one JSON record per log step and evaluation
    <out_dir>/loss.png                loss by step and by wall-clock time

A folder *holds a run* once it has a checkpoint or metrics. Starting a new run there needs
``overwrite``; continuing it needs ``resume``; nothing is replaced silently. Every start also
removes the temporary files a killed write left behind (see ``atomic_write``).
This module does not import torch.
"""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cs336_basics.atomic_write import atomic_writer, remove_stale_temp_files
from cs336_basics.errors import MissingDependencyError, MissingInputError, OutputExistsError
from cs336_basics.loss_plot import read_metrics


@dataclass
class TrainResult:
    """What a finished (or stopped) run leaves behind."""

    step: int
    train_loss: float | None
    val_loss: float | None
    stopped: str  # "completed", "time budget", "interrupted" or "non-finite loss"
    out_dir: Path
    checkpoint: Path | None
    metrics: Path
    plot: Path | None
    tokens_per_second: float | None = None
    history: list[dict] = field(default_factory=list)
    failure: str | None = None  # what went wrong when ``stopped`` is "non-finite loss"


class RunFolder:
    """The paths of one run's outputs, and the rules for (re)using the folder."""

    def __init__(self, out_dir: str | Path) -> None:
        self.root = Path(out_dir)
        self.config = self.root / "config.json"
        self.checkpoint = self.root / "checkpoints" / "latest.pt"
        self.metrics = self.root / "metrics.jsonl"
        self.plot = self.root / "loss.png"

    def holds_run(self) -> bool:
        return self.checkpoint.is_file() or self.metrics.is_file()

    def check(self, resume: bool, overwrite: bool) -> None:
        """Raise unless this start may proceed: a resume needs a checkpoint, a fresh start an
        empty folder (or ``overwrite``)."""
        if resume is True and not self.checkpoint.is_file():
            raise MissingInputError(
                f"nothing to resume: {self.checkpoint} does not exist; drop --resume to start a "
                "new run, or pass --resume CHECKPOINT"
            )
        if not resume and not overwrite and self.holds_run():
            raise OutputExistsError(
                f"{self.root} already holds a training run ({self.checkpoint.name}, "
                f"{self.metrics.name}); pass --resume to continue it, --overwrite to replace it, "
                "or choose another --out-dir"
            )

    def prepare(self, resume: bool, overwrite: bool) -> None:
        """``check``, then clear what a fresh start replaces and what killed writes left."""
        self.check(resume, overwrite)
        for path in (self.config, self.checkpoint, self.metrics, self.plot):
            for stale in remove_stale_temp_files(path):
                print(f"note: removed {stale}, left by an interrupted write", file=sys.stderr)
        if not resume:
            for path in (self.checkpoint, self.metrics, self.plot):
                path.unlink(missing_ok=True)
        self.root.mkdir(parents=True, exist_ok=True)

    def write_config(self, config_dict: dict[str, Any]) -> None:
        with atomic_writer(self.config) as handle:
            handle.write((json.dumps(config_dict, indent=2) + "\n").encode())

    def resume_command(self) -> str:
        """The exact command that continues this run."""
        return f"cs336 train --config {shlex.quote(str(self.config))} --resume"


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
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
        if self.wandb_run is not None:
            split = record["split"]
            self.wandb_run.log(
                {f"{split}/{k}": v for k, v in record.items() if k not in ("step", "split")},
                step=record["step"],
            )


def start_wandb(project: str, run_name: str | None, config_dict: dict[str, Any]) -> Any:
    """A Weights & Biases run, or a clear error when the optional package is missing."""
    try:
        import wandb
    except ImportError as error:
        raise MissingDependencyError(
            "wandb_project is set but Weights & Biases is not installed; run "
            "`uv sync --extra wandb` (or drop wandb_project)"
        ) from error
    return wandb.init(project=project, name=run_name, config=config_dict)
