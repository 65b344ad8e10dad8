"""Token embedding: a lookup table from token ids to vectors."""

from __future__ import annotations

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from cs336_basics.devices import is_compiling


class Embedding(nn.Module):
    """Maps token ids to rows of ``weight``, of shape ``(num_embeddings, embedding_dim)``.

    Initialised from N(0, 1) truncated at +-3. On the CPU, ids outside ``[0, num_embeddings)``
    raise an ``IndexError`` naming the offending id (see ``check_token_ids`` for other devices).
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.weight = nn.Parameter(
            torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype)
        )
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # BEGIN SOLUTION
        nn.init.trunc_normal_(self.weight, mean=0.0, std=1.0, a=-3.0, b=3.0)
        # END SOLUTION

    def forward(self, token_ids: Int[Tensor, ...]) -> Float[Tensor, "... d_model"]:
        check_token_ids(token_ids, self.num_embeddings)
        # BEGIN SOLUTION
        return self.weight[token_ids]
        # END SOLUTION

    def extra_repr(self) -> str:
        return f"num_embeddings={self.num_embeddings}, embedding_dim={self.embedding_dim}"


def check_token_ids(token_ids: Tensor, vocab_size: int) -> None:
    """Raise a clear error unless every id is an integer in ``[0, vocab_size)``.

    The values are read on the CPU only. On a GPU reading them makes the host wait for the
    device at every forward, so there ids are checked once where they enter instead: the
    trainer scans its token files, decoding checks the prompt (``generation.decoding_window``).
    """
    if token_ids.dtype.is_floating_point or token_ids.dtype == torch.bool:
        raise TypeError(f"token ids must be an integer tensor, got dtype {token_ids.dtype}")
    if token_ids.device.type != "cpu" or token_ids.numel() == 0 or is_compiling():
        return  # (under torch.compile, a data-dependent check would split the graph)
    low, high = int(token_ids.min()), int(token_ids.max())
    if low < 0 or high >= vocab_size:
        bad = low if low < 0 else high
        raise IndexError(f"token id {bad} is outside the vocabulary [0, {vocab_size})")
