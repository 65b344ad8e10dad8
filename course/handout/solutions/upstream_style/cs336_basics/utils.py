"""Checkpoints and run logging (Weights & Biases, GPU memory)."""

from __future__ import annotations

import pynvml
import torch
import wandb


def save_checkpoint(model, optimizer, iteration, out):
    torch.save(
        {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "iteration": iteration},
        out,
    )


def load_checkpoint(src, model, optimizer):
    state = torch.load(src, weights_only=True)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    return state["iteration"]


def gpu_memory_used() -> int | None:
    """Bytes in use on GPU 0, or None without an NVIDIA driver."""
    try:
        pynvml.nvmlInit()
        return pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0)).used
    except pynvml.NVMLError:
        return None


def log(metrics: dict, step: int) -> None:
    if wandb.run is not None:
        wandb.log(metrics, step=step)
    else:
        print(step, " ".join(f"{k}={v:.4g}" for k, v in metrics.items()))
