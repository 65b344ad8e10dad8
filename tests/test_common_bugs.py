"""Tests aimed at catalogued mistakes (``course/mutation/catalogue.py``) that the component tests let through.

Each one checks the output against an independent computation and, when it fails, names the
likely mistake in plain words.
"""

from __future__ import annotations

import torch

from .adapters import run_rmsnorm


def test_rmsnorm_float16_squares_do_not_overflow() -> None:
    d_model = 64
    x = (300 * torch.randn(4, d_model, generator=torch.Generator().manual_seed(0))).half()
    gain = torch.linspace(0.5, 1.5, d_model).half()
    out = run_rmsnorm(d_model, 1e-5, gain, x)
    assert out.dtype == torch.float16, (
        f"RMSNorm should return the input dtype float16, got {out.dtype}"
    )
    # RMSNorm's definition in float64 (F.rms_norm is torch 2.4+; Intel Macs have torch 2.2).
    wide = x.double()
    expected = wide * torch.rsqrt(wide.square().mean(-1, keepdim=True) + 1e-5) * gain.double()
    assert torch.isfinite(out).all() and out.abs().amax() > 0.1, (
        "hint: RMSNorm in float16 lost its values: 300^2 overflows float16, so compute the mean "
        "square in float32 (x.float()) and cast the result back to the input dtype"
    )
    torch.testing.assert_close(out.double(), expected, atol=1e-2, rtol=1e-2)
