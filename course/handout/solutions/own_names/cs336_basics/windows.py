"""Random training windows from a (possibly memory-mapped) token array."""

import numpy as np
import torch

from .failures import BadInput


def sample_windows(tokens, count, length, device):
    if len(tokens) < length + 1:
        raise BadInput(f"a window of {length} tokens plus its target needs {length + 1} tokens")
    starts = np.random.randint(0, len(tokens) - length, size=count)
    rows = np.stack([np.asarray(tokens[s : s + length + 1], dtype=np.int64) for s in starts])
    block = torch.tensor(rows, device=device)
    return block[:, :-1], block[:, 1:]
