"""The GPU benchmark's decisions that do not need a GPU: the skip, and the peak table lookup."""

from __future__ import annotations

import pytest
import torch

from benchmarks import gpu


def test_gpu_section_is_skipped_with_a_reason_without_cuda(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    result = gpu.benchmark(smoke=False, log=print)
    assert result["rows"] == [] and result["skipped"].startswith("no CUDA device")
    assert capsys.readouterr().out.strip().splitlines() == [f"gpu: skipped, {result['skipped']}"]


@pytest.mark.parametrize(
    ("name", "peak"),
    [
        ("NVIDIA H100 80GB HBM3", 989e12),
        ("NVIDIA H100 PCIe", 756e12),
        ("NVIDIA H200", 989e12),
        ("NVIDIA A100-SXM4-80GB", 312e12),
        ("NVIDIA L4", 121e12),
        ("NVIDIA L40", 181e12),
        ("NVIDIA GeForce GTX 1080", None),
    ],
)
def test_bf16_peak_is_looked_up_by_device_name(monkeypatch, name, peak):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: name)
    assert gpu.bf16_peak(torch.device("cuda")) == peak
    assert gpu.bf16_peak(torch.device("cpu")) is None
