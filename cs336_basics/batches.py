"""Training batches for one rank, drawn one step ahead of the loop.

Every micro-batch is drawn globally (``batch_size`` windows from one seeded generator) and each
rank keeps its slice, so N processes see exactly the data of one process with the same
settings. ``BatchPrefetcher`` draws the next micro-batch while the current one is being
computed on: on CUDA the windows are gathered into pinned host memory and copied with
``non_blocking=True`` (see ``data.gather_windows``), so the copy overlaps the GPU's work and
the host never waits for it. Prefetching does not change which batches a run sees, and a
checkpoint records the generator state of the next batch still to be *used*, so resuming is
exact.
"""

from __future__ import annotations

import torch

from cs336_basics.data import gather_windows, sample_start_indices
from cs336_basics.devices import Distributed
from cs336_basics.errors import InputError

Batch = tuple[torch.Tensor, torch.Tensor]


def local_batch(
    dataset, batch_size: int, context_length: int, generator: torch.Generator, env: Distributed
) -> Batch:
    """This rank's slice of one global micro-batch of ``batch_size`` windows."""
    if batch_size % env.world_size != 0:
        raise InputError(
            f"batch_size={batch_size} must be divisible by the number of processes "
            f"({env.world_size}); change --batch-size"
        )
    starts = sample_start_indices(len(dataset), batch_size, context_length, generator)
    per_rank = batch_size // env.world_size
    mine = starts[env.rank * per_rank : (env.rank + 1) * per_rank]
    return gather_windows(dataset, mine, context_length, env.device)


class BatchPrefetcher:
    """Micro-batches in the generator's order, each drawn (and sent to the device) one early."""

    def __init__(
        self,
        dataset,
        batch_size: int,
        context_length: int,
        generator: torch.Generator,
        env: Distributed,
    ) -> None:
        self._draw_args = (dataset, batch_size, context_length, generator, env)
        self._generator = generator
        self._ahead: tuple[Batch, torch.Tensor] | None = None

    def _draw(self) -> tuple[Batch, torch.Tensor]:
        state = self._generator.get_state()
        return local_batch(*self._draw_args), state

    def next(self) -> Batch:
        """The next micro-batch; the one after it starts on its way to the device."""
        batch, _ = self._ahead if self._ahead is not None else self._draw()
        self._ahead = self._draw()
        return batch

    def generator_state(self) -> torch.Tensor:
        """The sampler state a resumed run must start from: that of the next unused batch."""
        return self._ahead[1] if self._ahead is not None else self._generator.get_state()
