"""The training loop."""

import os

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
