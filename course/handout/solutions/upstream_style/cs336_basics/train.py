"""Train a Transformer LM: tokenize the corpus, then the training loop.

    uv run python -m cs336_basics.train --train data/TinyStoriesV2-GPT4-train.txt \
        --valid data/TinyStoriesV2-GPT4-valid.txt --vocab vocab.json --merges merges.txt
"""

from __future__ import annotations

import argparse
import os

import numpy as np
import torch
import wandb
from tqdm import tqdm

from cs336_basics.data import get_batch
from cs336_basics.model import TransformerLM
from cs336_basics.nn_utils import cross_entropy, gradient_clipping
from cs336_basics.optimizer import AdamW, get_lr_cosine_schedule
from cs336_basics.tokenizer import Tokenizer
from cs336_basics.utils import load_checkpoint, log, save_checkpoint


def tokenize_file(tokenizer: Tokenizer, path: str, out: str) -> np.ndarray:
    """Encode a text file line by line (never all in memory) into a uint16 array on disk."""
    if not os.path.exists(out):
        with open(path, encoding="utf-8") as f:
            ids = np.fromiter(tqdm(tokenizer.encode_iterable(f), desc=path), dtype=np.uint16)
        np.save(out, ids)
    return np.load(out, mmap_mode="r")


@torch.no_grad()
def evaluate(model, data, args) -> float:
    model.eval()
    losses = []
    for _ in range(args.eval_batches):
        x, y = get_batch(data, args.batch_size, args.context_length, args.device)
        losses.append(cross_entropy(model(x), y).item())
    model.train()
    return sum(losses) / len(losses)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--train", required=True)
    parser.add_argument("--valid", required=True)
    parser.add_argument("--vocab", required=True)
    parser.add_argument("--merges", required=True)
    parser.add_argument("--context_length", type=int, default=256)
    parser.add_argument("--d_model", type=int, default=512)
    parser.add_argument("--num_layers", type=int, default=4)
    parser.add_argument("--num_heads", type=int, default=16)
    parser.add_argument("--d_ff", type=int, default=1344)
    parser.add_argument("--rope_theta", type=float, default=10000.0)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--min_lr", type=float, default=1e-4)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--weight_decay", type=float, default=0.1)
    parser.add_argument("--max_grad_norm", type=float, default=1.0)
    parser.add_argument("--eval_every", type=int, default=500)
    parser.add_argument("--eval_batches", type=int, default=20)
    parser.add_argument("--checkpoint", default="checkpoint.pt")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--wandb_project", default=None)
    args = parser.parse_args()

    tokenizer = Tokenizer.from_files(args.vocab, args.merges, ["<|endoftext|>"])
    train_data = tokenize_file(tokenizer, args.train, args.train + ".npy")
    valid_data = tokenize_file(tokenizer, args.valid, args.valid + ".npy")
    model = TransformerLM(
        len(tokenizer.vocab),
        args.context_length,
        args.d_model,
        args.num_layers,
        args.num_heads,
        args.d_ff,
        args.rope_theta,
        device=args.device,
    )
    optimizer = AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    start = (
        load_checkpoint(args.checkpoint, model, optimizer) if os.path.exists(args.checkpoint) else 0
    )
    if args.wandb_project:
        wandb.init(project=args.wandb_project, config=vars(args))

    for step in range(start, args.steps):
        lr = get_lr_cosine_schedule(step, args.lr, args.min_lr, args.warmup, args.steps)
        for group in optimizer.param_groups:
            group["lr"] = lr
        x, y = get_batch(train_data, args.batch_size, args.context_length, args.device)
        loss = cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        gradient_clipping(model.parameters(), args.max_grad_norm)
        optimizer.step()
        if step % 50 == 0:
            log({"train/loss": loss.item(), "lr": lr}, step)
        if (step + 1) % args.eval_every == 0:
            log({"valid/loss": evaluate(model, valid_data, args)}, step)
            save_checkpoint(model, optimizer, step + 1, args.checkpoint)


if __name__ == "__main__":
    main()
