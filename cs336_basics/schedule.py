"""Learning-rate schedule: linear warmup, then cosine decay, then a constant floor."""

from __future__ import annotations

import math


def get_lr_cosine_schedule(
    it: int,
    max_learning_rate: float,
    min_learning_rate: float,
    warmup_iters: int,
    cosine_cycle_iters: int,
) -> float:
    """Learning rate at iteration ``it`` (``it`` counts from 0).

    - warmup, ``it < warmup_iters``: ``it / warmup_iters * max_learning_rate``;
    - cosine, ``warmup_iters <= it <= cosine_cycle_iters``: from the maximum at the end of
      warmup down to the minimum at ``cosine_cycle_iters``,
      ``min + (1 + cos(pi * (it - warmup) / (cycle - warmup))) / 2 * (max - min)``;
    - after, ``it > cosine_cycle_iters``: ``min_learning_rate``.
    """
    if warmup_iters < 0 or cosine_cycle_iters < warmup_iters:
        raise ValueError(
            "need 0 <= warmup_iters <= cosine_cycle_iters; got "
            f"warmup_iters={warmup_iters}, cosine_cycle_iters={cosine_cycle_iters}"
        )
    # BEGIN SOLUTION
    if it < warmup_iters:
        return it / warmup_iters * max_learning_rate
    if it > cosine_cycle_iters:
        return min_learning_rate
    if cosine_cycle_iters == warmup_iters:  # a zero-length cosine phase: the peak, once
        return max_learning_rate
    progress = (it - warmup_iters) / (cosine_cycle_iters - warmup_iters)
    return min_learning_rate + 0.5 * (1.0 + math.cos(math.pi * progress)) * (
        max_learning_rate - min_learning_rate
    )
    # END SOLUTION
