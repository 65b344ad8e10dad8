"""A KV cache of fixed size, preallocated and written in place: the static shapes that a compiled
(CUDA-graphed) decoding step needs.

The dynamic caches of ``kv_cache.py`` grow by concatenation, so every step attends over tensors
of a new shape at new addresses. ``StaticKVCache`` allocates its two buffers once, for
``max_length`` positions, writes each new token's entries at its position, and attends over all
``max_length`` slots with a mask that hides the slots not written yet. Every decoding step then
runs the same shapes on the same memory, which is what ``torch.compile(mode="reduce-overhead")``
records once as a CUDA graph and replays.
"""

from __future__ import annotations

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from cs336_basics.devices import is_compiling


class StaticKVCache:
    """Two per-position buffers of one attention layer (keys and values, or multi-head latent
    attention's latents and RoPE keys), ``(..., max_length, d)`` each, allocated at the first
    ``update`` with the batch shape, width, dtype and device of its entries.

    ``length`` counts the positions written so far. It is host-side bookkeeping: ``update``
    advances it in eager code, but never inside compiled code, where reading a Python number
    that changes every step would recompile the step; a compiled caller passes the positions
    explicitly and sets ``length`` itself (``decode_steps`` does).
    """

    def __init__(self, max_length: int) -> None:
        if max_length < 1:
            raise ValueError(f"a static KV cache needs max_length >= 1; got {max_length}")
        self.max_length = max_length
        self.length = 0
        self.buffers: tuple[Tensor, Tensor] | None = None

    def check_room(self, new_positions: int) -> None:
        """A clear error when ``new_positions`` more positions do not fit."""
        if self.length + new_positions > self.max_length:
            raise ValueError(
                f"the static KV cache holds {self.max_length} positions: {self.length} are "
                f"filled and {new_positions} more do not fit (allocate a larger max_length)"
            )

    def update(
        self,
        first: Float[Tensor, "... new d_first"],
        second: Float[Tensor, "... new d_second"],
        positions: Int[Tensor, " new"],
    ) -> tuple[
        Float[Tensor, "... max_length d_first"],
        Float[Tensor, "... max_length d_second"],
        Bool[Tensor, "new max_length"],
    ]:
        """Write the new entries at ``positions``; return both whole buffers and the mask of
        what each new position may attend to (True: the slots at or before it). ``positions``
        must continue the written prefix: the mask is by position, so a skipped slot would be
        attended as zeros."""
        if self.buffers is None:
            self.buffers = (self._allocate(first), self._allocate(second))
        if not is_compiling():
            _check_entries(self.buffers, (first, second), positions)
            self.check_room(positions.shape[-1])
            self.length += positions.shape[-1]
        for buffer, new in zip(self.buffers, (first, second), strict=True):
            buffer.index_copy_(-2, positions, new)
        slots = torch.arange(self.max_length, device=positions.device)
        return (*self.buffers, slots <= positions[:, None])

    def tensors(self) -> tuple[Tensor | None, ...]:
        return self.buffers or (None, None)

    def _allocate(self, like: Tensor) -> Tensor:
        # Zeros, not torch.empty: a masked slot gets attention weight 0, and 0 * NaN is NaN.
        return like.new_zeros(*like.shape[:-2], self.max_length, like.shape[-1])


def _check_entries(
    buffers: tuple[Tensor, Tensor], entries: tuple[Tensor, Tensor], positions: Tensor
) -> None:
    if positions.dim() != 1:
        raise ValueError(
            "a static KV cache writes every row at the same positions: give 1-D "
            f"token_positions (seq,), not shape {tuple(positions.shape)}"
        )
    for buffer, new in zip(buffers, entries, strict=True):
        if new.shape[:-2] != buffer.shape[:-2] or new.shape[-1] != buffer.shape[-1]:
            raise ValueError(
                f"the static KV cache was allocated for entries {tuple(buffer.shape)} "
                f"(max_length at dim -2) and cannot take {tuple(new.shape)}: the batch "
                "shape is fixed at the first call"
            )
