"""The model's hot path never makes the host wait for the device.

On a GPU, reading a value back (``.item()``, ``int(tensor)``, ``.tolist()``) blocks the host
until the device catches up, which stalls the queue of kernels a training step relies on. The
range checks of token ids and positions therefore read values on the CPU only; ids are checked
where they enter (the trainer's token files, the prompt of a decoding loop).

Without a GPU this is tested on the ``meta`` device, which has shapes but no values: every read
of a value raises there, and the checks take the same path as on CUDA (any device but the CPU).
With CUDA, a training step and decoding steps run under ``torch.cuda.set_sync_debug_mode("error")``,
which turns any synchronising call into an error.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch

from cs336_basics.adamw import AdamW
from cs336_basics.config import ModelConfig
from cs336_basics.embedding import Embedding
from cs336_basics.fused_clipping import clip_gradients_fused
from cs336_basics.generation import generate
from cs336_basics.model import TransformerLM, transformer_lm
from cs336_basics.rope import RotaryPositionalEmbedding
from cs336_basics.training import language_model_loss

CONFIG = ModelConfig(
    vocab_size=64, context_length=16, d_model=32, num_layers=2, num_heads=4, d_ff=64
)


def _training_step(model: TransformerLM, device: torch.device) -> torch.Tensor:
    """What the trainer does in one step (one micro-batch), from batches already on the device."""
    generator = torch.Generator().manual_seed(0)
    inputs, targets = torch.randint(0, CONFIG.vocab_size, (2, 2, 16), generator=generator).to(
        device
    )
    optimizer = AdamW(model.parameters(), lr=1e-3)
    with _device_reads_are_errors(device):
        loss = language_model_loss(model, inputs, targets)
        loss.backward()
        clip_gradients_fused(model.parameters(), 1.0)
        optimizer.step()
    return loss.detach()


def _decoding_steps(model: TransformerLM, device: torch.device, steps: int = 3) -> torch.Tensor:
    """Greedy decoding kept on the device: each step runs the model and appends its argmax."""
    sequence = torch.zeros(1, 4, dtype=torch.long, device=device)
    with torch.no_grad(), _device_reads_are_errors(device):
        for _ in range(steps):
            next_id = model(sequence)[:, -1].argmax(dim=-1, keepdim=True)
            sequence = torch.cat((sequence, next_id), dim=1)
    return sequence


@contextmanager
def _device_reads_are_errors(device: torch.device) -> Iterator[None]:
    if device.type != "cuda":  # on meta every read of a value is an error already
        yield
        return
    torch.cuda.synchronize()  # (the setup's copies finish before the mode is on)
    torch.cuda.set_sync_debug_mode("error")
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode("default")


def test_forward_training_step_and_decoding_read_no_values_off_the_cpu():
    meta = torch.device("meta")
    torch.manual_seed(0)
    model = transformer_lm(CONFIG, device=meta)
    assert _training_step(model, meta).device == meta
    assert _decoding_steps(model.eval(), meta).shape == (1, 7)


def test_meta_tensors_do_fail_on_a_read():
    # What the test above relies on: a range check that read values would raise there.
    ids = torch.zeros(2, 3, dtype=torch.long, device="meta")
    with pytest.raises((RuntimeError, NotImplementedError)):
        int(ids.max())


def test_range_checks_still_name_the_bad_value_on_the_cpu():
    with pytest.raises(IndexError, match=r"token id 64 is outside the vocabulary \[0, 64\)"):
        Embedding(64, 8)(torch.tensor([[0, 64]]))
    with pytest.raises(IndexError, match=r"token position -1 is outside \[0, max_seq_len=16\)"):
        RotaryPositionalEmbedding(10000.0, 8, 16)(torch.randn(2, 8), torch.tensor([0, -1]))


@pytest.mark.parametrize("bad_id", [64, -1])
def test_generate_checks_the_prompt_on_the_host(bad_id):
    # The forward checks ids only on the CPU, so the decoding loop checks its prompt itself.
    model = transformer_lm(CONFIG)
    with pytest.raises(ValueError, match=rf"prompt token id {bad_id} is outside .*\[0, 64\)"):
        generate(model, [1, bad_id, 2], max_new_tokens=2)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (sync debug mode)")
def test_cuda_training_and_decoding_steps_never_synchronise():
    torch.manual_seed(0)
    cpu_model = transformer_lm(CONFIG)
    model = copy.deepcopy(cpu_model).to("cuda")
    loss = _training_step(model, torch.device("cuda"))
    sequence = _decoding_steps(model.eval(), torch.device("cuda"))
    # The values are real: the same step on the CPU gives the same loss.
    expected = _training_step(cpu_model, torch.device("cpu"))
    torch.testing.assert_close(loss.cpu(), expected, atol=1e-4, rtol=1e-4)
    assert sequence.shape == (1, 7) and int(sequence.max()) < CONFIG.vocab_size
