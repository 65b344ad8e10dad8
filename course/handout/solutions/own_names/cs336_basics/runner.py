"""The training loop."""

import contextlib
import os

import numpy as np
import torch

from .optimization import DecoupledAdam, clip_global_norm, nll, warmup_cosine
from .persistence import save_state
from .windows import sample_windows


def fit(model, tokens, batch, steps, peak_lr, floor_lr, warmup, decay, clip, out_dir, device):
    model.to(device).train()
    gains = [p for p in model.parameters() if p.ndim < 2]
    matrices = [p for p in model.parameters() if p.ndim >= 2]
    optimizer = DecoupledAdam(
        [{"params": matrices}, {"params": gains, "weight_decay": 0.0}],
        lr=peak_lr,
        betas=(0.9, 0.95),
        eps=1e-8,
        weight_decay=decay,
    )
    for step in range(steps):
        for group in optimizer.param_groups:
            group["lr"] = warmup_cosine(step, peak_lr, floor_lr, warmup, steps)
        inputs, targets = sample_windows(tokens, batch, model.context, device)
        loss = nll(model(inputs), targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        clip_global_norm(model.parameters(), clip)
        optimizer.step()
    os.makedirs(out_dir, exist_ok=True)
    save_state(model, optimizer, steps, os.path.join(out_dir, "last.ckpt"))
    return model


def accumulate(model, micro_batches):
    """Zero the gradients, then backpropagate each micro-batch's loss over their count; a
    data-parallel wrapper syncs only in the last backward. Returns the mean loss."""
    model.zero_grad(set_to_none=True)
    total = 0.0
    for index, (inputs, targets) in enumerate(micro_batches):
        syncing = index == len(micro_batches) - 1 or not hasattr(model, "no_sync")
        with contextlib.nullcontext() if syncing else model.no_sync():
            share = nll(model(inputs), targets) / len(micro_batches)
            share.backward()
        total = total + share.detach()
    return total


@torch.no_grad()
def held_out_loss(model, tokens, batch, length, batches, device):
    """Mean loss over ``batches`` batches of windows drawn by a fixed seed (so the same ones)."""
    was_training = model.training
    model.eval()
    rng = np.random.default_rng(1234)
    losses = []
    for _ in range(batches):
        starts = rng.integers(0, len(tokens) - length, size=batch)
        rows = np.stack([np.asarray(tokens[s : s + length + 1], dtype=np.int64) for s in starts])
        block = torch.tensor(rows, device=device)
        losses.append(nll(model(block[:, :-1]), block[:, 1:]).item())
    model.train(was_training)
    return float(np.mean(losses))
