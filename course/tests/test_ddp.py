"""(Instructor test of the reference trainer, not shipped.) Data-parallel training on two CPU processes (gloo) matches one process with the same global batch."""

from __future__ import annotations

import os
import socket

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from cs336_basics.checkpoint import read_checkpoint
from cs336_basics.config import ModelConfig
from cs336_basics.training import TrainConfig, train

pytestmark = pytest.mark.slow  # subprocesses: run by `make test-all` and CI, not by plain `pytest`

MODEL = ModelConfig(vocab_size=32, context_length=8, d_model=16, num_layers=1, num_heads=2, d_ff=32)


def _settings(tmp_path, out_dir: str) -> dict:
    return dict(
        model=MODEL.to_dict(),
        train_data=str(tmp_path / "train.npy"),
        val_data=str(tmp_path / "val.npy"),
        out_dir=str(tmp_path / out_dir),
        batch_size=4,
        grad_accum_steps=2,
        max_steps=4,
        warmup_steps=1,
        lr_max=1e-2,
        eval_interval=2,
        eval_batches=2,
        log_interval=1,
        checkpoint_interval=4,
        device="cpu",
        progress=False,
    )


def _worker(rank: int, world_size: int, port: int, settings: dict) -> None:
    torch.set_num_threads(1)
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world_size),
    )
    try:
        train(TrainConfig.from_dict(settings))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(not dist.is_gloo_available(), reason="this torch build has no gloo backend")
def test_ddp_two_processes_match_single_process(tmp_path):
    tokens = np.random.default_rng(0).integers(0, 32, size=2000).astype(np.uint16)
    np.save(tmp_path / "train.npy", tokens[:1500])
    np.save(tmp_path / "val.npy", tokens[1500:])

    single = train(TrainConfig.from_dict(_settings(tmp_path, "single")))
    # spawn, not fork: a forked child cannot use autograd once the parent has touched CUDA
    # ("Unable to handle autograd's threading in combination with fork-based multiprocessing").
    mp.start_processes(
        _worker,
        args=(2, _free_port(), _settings(tmp_path, "ddp")),
        nprocs=2,
        start_method="spawn",
        join=True,
    )

    ddp_records = _records(tmp_path / "ddp" / "metrics.jsonl")
    single_losses = [(r["step"], r["split"], r["loss"]) for r in single.history]
    ddp_losses = [(r["step"], r["split"], r["loss"]) for r in ddp_records]
    assert [s[:2] for s in ddp_losses] == [s[:2] for s in single_losses]
    np.testing.assert_allclose([s[2] for s in ddp_losses], [s[2] for s in single_losses], rtol=1e-5)
    single_weights = read_checkpoint(single.checkpoint)["model"]
    ddp_weights = read_checkpoint(tmp_path / "ddp" / "checkpoints" / "latest.pt")["model"]
    for name, tensor in single_weights.items():
        torch.testing.assert_close(ddp_weights[name], tensor, rtol=1e-4, atol=1e-5, msg=name)
    # the run actually trained: the weights moved away from the seed's initialisation
    torch.manual_seed(0)
    from cs336_basics.builder import build_model

    initial = build_model(MODEL).state_dict()
    assert any(not torch.allclose(initial[n], t, atol=1e-3) for n, t in single_weights.items())


def _records(path):
    import json

    return [json.loads(line) for line in path.read_text().splitlines()]
