"""Loss curves from a metrics JSONL file, against optimizer steps and against wall-clock time."""

from __future__ import annotations

import json
import os
from pathlib import Path

from cs336_basics.atomic_write import atomic_writer


def read_metrics(path: str | os.PathLike) -> list[dict]:
    """Every record of a JSONL metrics file (an empty list when the file does not exist)."""
    path = Path(path)
    if not path.is_file():
        return []
    return [
        json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]


def plot_losses(metrics_path: str | os.PathLike, out_path: str | os.PathLike) -> Path:
    """Write a PNG with training and validation loss by step (left) and by elapsed seconds (right)."""
    import matplotlib

    matplotlib.use("Agg")  # no display needed; must precede pyplot's import
    import matplotlib.pyplot as plt

    records = read_metrics(metrics_path)
    figure, (by_step, by_time) = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for split, style in (("train", "-"), ("val", "o-")):
        rows = [r for r in records if r.get("split") == split]
        if not rows:
            continue
        losses = [r["loss"] for r in rows]
        by_step.plot([r["step"] for r in rows], losses, style, label=split, markersize=3)
        by_time.plot([r["elapsed_s"] for r in rows], losses, style, label=split, markersize=3)
    by_step.set_xlabel("optimizer step")
    by_time.set_xlabel("wall-clock seconds")
    by_step.set_ylabel("cross-entropy loss (nats/token)")
    for axes in (by_step, by_time):
        axes.grid(alpha=0.3)
        axes.legend()
    figure.tight_layout()
    out_path = Path(out_path)
    with atomic_writer(out_path) as handle:
        figure.savefig(handle, format="png", dpi=110)
    plt.close(figure)
    return out_path
