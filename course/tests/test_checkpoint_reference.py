"""(Instructor tests of the reference's checkpoint extras, not shipped.) The training loop's
checkpoints also carry the run's config and RNG states."""

from __future__ import annotations

import torch

from cs336_basics.adamw import AdamW
from cs336_basics.checkpoint import load_checkpoint, read_checkpoint, save_checkpoint


def test_checkpoint_keeps_config_and_rng_states(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    optimizer = AdamW(model.parameters(), lr=1e-2)
    torch.manual_seed(123)
    save_checkpoint(
        model, optimizer, 7, tmp_path / "c.pt", config={"d_model": 8}, extra={"note": "x"}
    )
    expected = torch.rand(3)
    torch.manual_seed(0)
    assert load_checkpoint(tmp_path / "c.pt", model, optimizer, restore_rng=True) == 7
    assert torch.equal(torch.rand(3), expected)
    contents = read_checkpoint(tmp_path / "c.pt")
    assert contents["config"] == {"d_model": 8} and contents["extra"] == {"note": "x"}
