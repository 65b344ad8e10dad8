"""The model call of a decoding loop: the next-token logits after the newest tokens, with no
cache, a growing KV cache, a static one, or a static one and a compiled step.

``decode_steps`` is a context manager that yields ``next_logits(sequences)``: the loop hands it
every row's tokens so far and gets the last position's logits back. What the model is fed, at
which positions, and what is cached is this module's business, not the loop's.

The compiled step (``compile``) is ``torch.compile`` of one single-token forward over a static
cache: every call has the same shapes and writes into the same buffers, so on CUDA
``mode="reduce-overhead"`` records it once as a CUDA graph and then replays it, one launch per
token instead of one per kernel. The prompt (many tokens, a different shape each time) runs
eagerly.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
from jaxtyping import Float, Int
from torch import Tensor

from cs336_basics.model import TransformerLM
from cs336_basics.variants.decoding.kv_cache import caching_layers, kv_caches
from cs336_basics.variants.decoding.static_kv_cache import StaticKVCache

NextLogits = Callable[[list[list[int]]], Float[Tensor, "batch vocab"]]
# True: torch.compile's default backend (inductor) with CUDA graphs; a string or callable: that
# torch.compile backend (e.g. "eager", to test the compiled path quickly on a CPU).
CompileOption = bool | str | Callable


@contextmanager
def decode_steps(
    model: TransformerLM,
    use_kv_cache: bool = True,
    static_length: int | None = None,
    compile: CompileOption = False,
) -> Iterator[NextLogits]:
    """``next_logits(sequences)`` for a decoding loop over ``model`` (call it in eval mode,
    under ``no_grad``): the last position's logits of each row of ``sequences``, every row's
    tokens so far (all of one length). It feeds the model only what it has not seen: with a KV
    cache the new tokens, without one (``use_kv_cache=False``, or a model with no
    cache-capable attention) the whole sequences. The caches grow, or with ``static_length``
    are preallocated for that many positions; ``compile`` (which needs ``static_length``)
    compiles the single-token calls.
    """
    if compile and static_length is None:
        raise ValueError("a compiled decoding step needs a static KV cache (give static_length)")
    device = next(model.parameters()).device
    if not (use_kv_cache and caching_layers(model)):
        yield _Feeder(functools.partial(_last_logits, model), device, cached=False)
        return
    with kv_caches(model, static_length):
        forward = (
            functools.partial(_last_logits, model)
            if static_length is None
            else _StaticSteps(model, compile)
        )
        yield _Feeder(forward, device, cached=True)


class _Feeder:
    """Turns every row's tokens so far into the model's input: the unseen ones, as a tensor."""

    def __init__(
        self,
        forward: Callable[[Int[Tensor, "batch new"]], Float[Tensor, "batch vocab"]],
        device: torch.device,
        cached: bool,
    ) -> None:
        self.forward, self.device, self.cached = forward, device, cached
        self.seen = 0

    def __call__(self, sequences: list[list[int]]) -> Float[Tensor, "batch vocab"]:
        token_ids = torch.tensor(
            [sequence[self.seen :] for sequence in sequences], device=self.device
        )
        if self.cached:
            self.seen = len(sequences[0])
        return self.forward(token_ids)


class _StaticSteps:
    """Calls over static caches, at explicit positions: from the length the caches count on the
    host, which the compiled step never reads (it would recompile at every new position)."""

    def __init__(self, model: TransformerLM, compile: CompileOption) -> None:
        self.model, self.compile = model, compile
        self.buffers_marked = False
        self.caches: list[StaticKVCache] = [layer.kv_cache for layer in caching_layers(model)]

    def __call__(self, token_ids: Int[Tensor, "batch new"]) -> Float[Tensor, "batch vocab"]:
        start, new = self.caches[0].length, token_ids.shape[-1]
        positions = torch.arange(start, start + new, device=token_ids.device)
        # The first call (it allocates the buffers) and calls of several tokens run eagerly.
        if not self.compile or new != 1 or start == 0:
            return _last_logits(self.model, token_ids, positions)
        for cache in self.caches:
            cache.check_room(new)
        if not self.buffers_marked:
            self._mark_static_buffers()
        # A CUDA graph's outputs live in memory that its next replay overwrites: mark the new
        # step and hand out a copy.
        torch.compiler.cudagraph_mark_step_begin()
        logits = _compiled_last_logits(self.compile)(self.model, token_ids, positions).clone()
        # Set, not added: where torch.compile gave up and ran the step eagerly, the caches have
        # counted the new position themselves.
        for cache in self.caches:
            cache.length = start + new
        return logits

    def _mark_static_buffers(self) -> None:
        """Tell torch.compile the cache buffers keep their addresses (as module buffers do), so
        a CUDA graph writes into them in place instead of copying them in at every replay.
        (Done here, not at allocation: importing torch._dynamo takes seconds.)"""
        for cache in self.caches:
            for buffer in cache.tensors():
                torch._dynamo.mark_static_address(buffer)
        self.buffers_marked = True


def _last_logits(
    model: TransformerLM,
    token_ids: Int[Tensor, "batch new"],
    positions: Int[Tensor, " new"] | None = None,
) -> Float[Tensor, "batch vocab"]:
    return model(token_ids, positions)[:, -1]


@functools.cache
def _compiled_last_logits(compile: CompileOption) -> Callable:
    """``_last_logits`` compiled once per option (torch.compile caches its graphs per model
    structure and input shapes behind this one function)."""
    if compile is True:
        return torch.compile(_last_logits, mode="reduce-overhead")
    return torch.compile(_last_logits, backend=compile)


def static_cache_length(needed: int, context_length: int) -> int:
    """Positions to preallocate for ``needed`` of them: the next power of two (at most the
    context length), so that a few buffer shapes, and compiled steps, serve every request."""
    return min(context_length, 1 << max(needed - 1, 0).bit_length())
