"""Where a training run computes: the device, the data-parallel process group, the precision.

``setup_distributed`` joins the ``torchrun`` process group when ``WORLD_SIZE > 1`` (NCCL on
CUDA, gloo elsewhere) and gives each rank its device; a single process needs no group.
The reductions of ``Distributed`` are no-ops (and no host syncs) in a one-process run.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from cs336_basics.errors import InputError


def is_compiling() -> bool:
    """Whether ``torch.compile`` is tracing this call (data-dependent checks would split its graph).

    ``torch.compiler.is_compiling`` is torch 2.3+; Intel Macs run torch 2.2 (the last built for
    them), which has only dynamo's own flag.
    """
    if hasattr(torch.compiler, "is_compiling"):
        return torch.compiler.is_compiling()
    from torch import _dynamo

    return _dynamo.is_compiling()


def resolve_device(device: str | torch.device) -> torch.device:
    """``torch.device(device)``, raising a clear error if that device is not usable here."""
    device = torch.device(device)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError(f"device {device} was requested but CUDA is not available")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise RuntimeError(
                f"device {device} was requested but only {torch.cuda.device_count()} CUDA device(s) exist"
            )
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise RuntimeError(f"device {device} was requested but MPS is not available")
    return device


def auto_device() -> str:
    """The best available device: CUDA, then Apple MPS, then CPU."""
    if torch.cuda.is_available():
        return "cuda"
    if torch.backends.mps.is_available():
        return "mps"
    return "cpu"


@dataclass
class Distributed:
    """This process's place in a (possibly one-process) job."""

    rank: int = 0
    world_size: int = 1
    device: torch.device = torch.device("cpu")
    owns_process_group: bool = False  # this run joined the group, so it also leaves it

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    def mean_tensor(self, tensor: torch.Tensor) -> torch.Tensor:
        """The average of a device tensor over ranks, without reading it on the host."""
        if not self.enabled:
            return tensor
        tensor = tensor.clone()
        dist.all_reduce(tensor)
        return tensor / self.world_size

    def mean(self, value: float) -> float:
        """The average of ``value`` over ranks (``value`` itself without DDP)."""
        if not self.enabled:
            return value
        return self.mean_tensor(
            torch.tensor([value], dtype=torch.float64, device=self.device)
        ).item()

    def maximum(self, value: float) -> float:
        """The largest ``value`` over ranks."""
        if not self.enabled:
            return value
        tensor = torch.tensor([value], dtype=torch.float64, device=self.device)
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
        return tensor.item()

    def any(self, flag: bool) -> bool:
        """True on every rank if ``flag`` is true on any rank."""
        return bool(self.maximum(float(flag)))


def setup_distributed(device_setting: str) -> Distributed:
    """Join the ``torchrun`` process group when ``WORLD_SIZE > 1``; pick this rank's device."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    device_name = auto_device() if device_setting == "auto" else device_setting
    if world_size == 1:
        return Distributed(device=_usable_device(device_name))
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    if device_name.startswith("cuda"):
        device = _usable_device(f"cuda:{local_rank}")
        torch.cuda.set_device(device)
        backend = "nccl"
    else:
        device = _usable_device(device_name)
        backend = "gloo"
    joining = not dist.is_initialized()
    if joining:
        dist.init_process_group(backend=backend)
    return Distributed(rank=rank, world_size=world_size, device=device, owns_process_group=joining)


def _usable_device(name: str) -> torch.device:
    try:
        return resolve_device(name)
    except RuntimeError as error:  # also a malformed name such as "gpu"
        raise InputError(
            f"{error}; pick another --device (cpu, cuda, cuda:1, mps or auto)"
        ) from error


def autocast_context(device: torch.device, precision: str) -> contextlib.AbstractContextManager:
    """bfloat16 autocast on CUDA (``auto`` or ``bf16``); plain float32 everywhere else."""
    use_bf16 = precision == "bf16" or (
        precision == "auto" and device.type == "cuda" and torch.cuda.is_bf16_supported()
    )
    if not use_bf16:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
