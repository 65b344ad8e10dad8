"""A tiny workspace for the CLI's subprocess tests: a tokenizer, token arrays, a config and a
trained run, made once per session in-process (so only the probes themselves start processes),
plus the bad inputs the probes feed the commands."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "fixtures" / "corpora" / "stories-400k.txt"
CLI = [sys.executable, "-m", "cs336_basics.runner.cli"]

MODEL = {
    "vocab_size": 300,
    "context_length": 16,
    "d_model": 16,
    "num_layers": 1,
    "num_heads": 2,
    "d_ff": 32,
}
RUN_CONFIG = {
    "train_data": "tokens.npy",
    "batch_size": 4,
    "max_steps": 2,
    "device": "cpu",
    "progress": False,
    "eval_batches": 1,
    "model": MODEL,
}


def make_workspace(root: Path) -> Path:
    """Fill ``root`` with good inputs (tokenizer ``tok``, ``tokens.npy``, ``run.json``, a run in
    ``existing_run``) and bad ones; return it."""
    from cs336_basics.bpe import train_bpe
    from cs336_basics.tokenizer import Tokenizer

    text = CORPUS.read_bytes()[:30_000].rsplit(b"\n", 1)[0]
    (root / "corpus.txt").write_bytes(text)
    for name, vocab_size in (("tok", 300), ("tok_280", 280)):
        vocab, merges = train_bpe(root / "corpus.txt", vocab_size, ["<|endoftext|>"], num_workers=1)
        (root / name).mkdir()
        Tokenizer(vocab, merges, ["<|endoftext|>"]).save(
            root / name / "vocab.json", root / name / "merges.txt"
        )
    tokenizer = Tokenizer.from_files(root / "tok" / "vocab.json", root / "tok" / "merges.txt")
    np.save(root / "tokens.npy", np.array(tokenizer.encode(text.decode()), dtype=np.uint16))
    (root / "run.json").write_text(json.dumps(RUN_CONFIG))
    _write_bad_inputs(root)
    _train_run(root)
    return root


def _write_bad_inputs(root: Path) -> None:
    (root / "latin1.txt").write_bytes("café au lait\n".encode("latin-1"))
    (root / "binary.bin").write_bytes(bytes(range(256)) * 4)
    np.save(root / "float.npy", np.zeros(100, dtype=np.float32))
    np.save(root / "matrix.npy", np.zeros((10, 10), dtype=np.uint16))
    np.save(root / "short.npy", np.arange(10, dtype=np.uint16))
    (root / "truncated.npy").write_bytes((root / "tokens.npy").read_bytes()[:300])
    (root / "broken.toml").write_text("train_data = [\n")
    (root / "broken.json").write_text('{"train_data": ')
    for name, keep in (("tok_no_merges", "vocab.json"), ("tok_no_vocab", "merges.txt")):
        (root / name).mkdir()
        (root / name / keep).write_bytes((root / "tok" / keep).read_bytes())


def _train_run(root: Path) -> None:
    """What ``cs336 train --config run.json --out-dir existing_run`` leaves, without training."""
    import torch

    from cs336_basics.adamw import AdamW
    from cs336_basics.checkpoint import save_checkpoint
    from cs336_basics.model import transformer_lm
    from cs336_basics.train_config import TrainConfig

    config = TrainConfig.from_dict({**RUN_CONFIG, "out_dir": "existing_run"})
    torch.manual_seed(0)
    model = transformer_lm(config.model)
    run = root / "existing_run"
    save_checkpoint(
        model,
        AdamW(model.parameters()),
        0,
        run / "checkpoints" / "latest.pt",
        config=config.to_dict(),
    )
    (run / "config.json").write_text(json.dumps(config.to_dict()))
    (run / "metrics.jsonl").write_text(
        json.dumps({"step": 1, "split": "train", "loss": 5.7}) + "\n"
    )


def snapshot(root: Path) -> dict[str, str]:
    """Every file under ``root`` (hidden ones included) with a hash of its bytes."""
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def run_cli(args: list[str], cwd: Path, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "CS336_DEBUG": ""}
    env.update(kwargs.pop("env", {}))
    return subprocess.run(
        CLI + args, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, **kwargs
    )
