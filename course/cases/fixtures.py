"""``make fixtures``: regenerate everything under ``fixtures/`` from the reference solution.

Deterministic: fixed seeds, sorted keys, fixed zip timestamps, so running it twice gives
byte-identical files. On another CPU, float outputs may differ in their last bits (torch's
kernels sum in an order that depends on the vector width); a committed file is rewritten only
when it differs beyond the rule of ``course/cases/fixture_diff.py`` (weights, inputs and ids exact,
floats within a few ulp), so any diff under ``fixtures/`` means behaviour changed.

Every snapshot is cross-checked here against an independent float64 computation; a case whose
reference disagrees, or whose catalogued mistake is indistinguishable from the right answer,
stops the run before anything is written. Tolerances are derived, not guessed, from the spread of correct implementations
(``course/cases/fairness/spread.py``): ``atol = max(10 e_ref, 4 e_styles) + 8 eps_f32 max|truth|``,
from the float32 errors of the reference and of the correct styles against the float64 truth.
"""

from __future__ import annotations

import argparse
import io
import json
import zipfile
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save

import course.cases.model  # noqa: F401  (registers the model cases)
import course.cases.variants  # noqa: F401  (registers the architecture-variant cases)
from course.cases.checksums import write_checksums
from course.cases.fairness.spread import AGREEMENT, derived_atol, spread_error
from course.cases.fixture_diff import fixture_differences
from course.cases.hidden_cases import write_hidden_cases
from course.cases.snapshot_case import REGISTRY, FixtureData
from course.cases.stage_fixtures import stage_arrays
from course.cases.tokenizer_fixtures import write_tokenizer_fixtures
from course.paths import FIXTURES, REPO_ROOT
from cs336_basics.atomic_write import atomic_writer
from cs336_basics.config import ModelConfig
from cs336_basics.model import transformer_lm
from cs336_basics.variants.config import VariantConfig
from tests.cases import CASES
from tests.cases.public import public_inputs
from tests.cases.shipped import Shipped
from tests.snapshots import match_tolerance

SEED = 20250401

# A VariantConfig, so config.json lists every variant switch (all off) beside the handout's fields.
MODEL_CONFIG = VariantConfig(
    vocab_size=512,
    context_length=16,
    d_model=64,
    num_layers=3,
    num_heads=4,
    d_ff=128,
    rope_theta=10000.0,
)
# Attention's query, key and key-width sizes all differ (12, 16, 8), as in the hidden cases, so a
# scale by the number of keys or queries instead of sqrt(d_k) fails the public ones too.
BATCH, SEQ, D_K, D_V, KEYS = 4, 12, 8, 24, 16


def atomic_write_bytes(path: Path, data: bytes) -> None:
    with atomic_writer(path) as out:
        out.write(data)


def update_fixture(path: Path, data: bytes) -> bool:
    """Write ``data`` to ``path`` unless the committed file counts as equal to it (see
    ``course/cases/fixture_diff.py``); say what changed. Returns whether the file was written."""
    if path.is_file():
        differences = fixture_differences(path.name, path.read_bytes(), data)
        if not differences:
            return False
        shown = path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path
        print(f"{shown} changed:", *differences[:5], sep="\n  ")
    atomic_write_bytes(path, data)
    return True


def npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """An ``.npz`` archive with fixed member order and timestamps (``np.savez`` stamps the time)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for name in sorted(arrays):
            member = io.BytesIO()
            np.lib.format.write_array(
                member, np.asarray(arrays[name], order="C"), allow_pickle=False
            )
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            archive.writestr(info, member.getvalue())
    return buffer.getvalue()


def truncated_normal(rng: np.random.Generator, shape: tuple[int, ...], std: float) -> np.ndarray:
    """N(0, std^2) cut at three standard deviations, by redrawing the draws outside."""
    z = rng.standard_normal(shape)
    outside = np.abs(z) > 3.0
    while outside.any():
        z[outside] = rng.standard_normal(int(outside.sum()))
        outside = np.abs(z) > 3.0
    return (z * std).astype(np.float32)


def make_model_weights(config: ModelConfig) -> dict[str, torch.Tensor]:
    """The handout's initialisation (linear weights: truncated normal, variance
    ``2 / (d_in + d_out)``; embeddings: truncated standard normal), with norm gains drawn from
    N(1, 0.2^2) so that a norm ignoring its gain fails the tests.

    Drawn with NumPy's generator rather than torch's initialisers: its normal draws are table
    lookups and comparisons, so the weights are the same bits on every CPU, whereas torch's
    vectorised ``erfinv``/``log`` differ in the last bits between AVX2, AVX-512 and scalar code.
    """
    rng = np.random.default_rng(SEED)
    state = {}
    for name, tensor in sorted(transformer_lm(config, device="meta").state_dict().items()):
        shape = tuple(tensor.shape)
        if name.endswith("norm.weight") or name.split(".")[-2].startswith("ln"):
            values = (1.0 + 0.2 * rng.standard_normal(shape)).astype(np.float32)
        elif name == "token_embeddings.weight":
            values = truncated_normal(rng, shape, 1.0)
        elif len(shape) == 2:
            values = truncated_normal(rng, shape, float(np.sqrt(2.0 / (shape[0] + shape[1]))))
        else:
            raise ValueError(f"no initialisation rule for {name} of shape {shape}")
        state[name] = torch.from_numpy(values)
    return state


def make_inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(SEED)
    d_model, vocab = MODEL_CONFIG.d_model, MODEL_CONFIG.vocab_size
    mask = rng.random((BATCH, SEQ, KEYS)) < 0.5
    mask[..., 0] = True  # every query may attend to something
    mask[..., -1] = False  # and no row is all True, so an inverted mask is still defined
    positions = np.stack(
        [np.sort(rng.choice(MODEL_CONFIG.context_length, SEQ, replace=False)) for _ in range(BATCH)]
    )
    return {
        "in_embeddings": rng.standard_normal((BATCH, SEQ, d_model), dtype=np.float32),
        "in_indices": rng.integers(0, vocab, (BATCH, SEQ), dtype=np.int64),
        "in_logits": (4.0 * rng.standard_normal((BATCH, SEQ, vocab))).astype(np.float32),
        "q": rng.standard_normal((BATCH, SEQ, D_K), dtype=np.float32),
        "k": rng.standard_normal((BATCH, KEYS, D_K), dtype=np.float32),
        "v": rng.standard_normal((BATCH, KEYS, D_V), dtype=np.float32),
        "mask": mask,
        "token_positions": positions.astype(np.int64),
    }


def load_fixture_data() -> FixtureData:
    config = ModelConfig.from_json(FIXTURES / "model" / "config.json")
    state_dict = load_file(FIXTURES / "model" / "weights.safetensors")
    with np.load(FIXTURES / "inputs.npz", allow_pickle=False) as data:
        inputs = {name: torch.from_numpy(data[name].copy()) for name in data.files}
    return FixtureData(config, state_dict, inputs)


def graded_spread(name: str, truth: torch.Tensor) -> float:
    """The largest error of the correct styles on the public graded cases this snapshot
    judges (0 for the snapshots of ungraded variants)."""
    shipped = Shipped()
    cases = [c for c in CASES.values() if c.snapshot == name and c.public_inputs is not None]
    return max((spread_error(c, public_inputs(c, shipped), truth) for c in cases), default=0.0)


def snapshot_arrays(name: str, data: FixtureData) -> dict[str, np.ndarray]:
    """Run case ``name``, check it against its independent truth, and derive its tolerance."""
    result = REGISTRY[name](data)
    arrays = result.arrays()
    reference, truth = arrays["reference"], arrays["truth"]
    if reference.dtype != np.float32 or reference.shape != truth.shape:
        raise RuntimeError(f"{name}: reference must be float32 of the truth's shape {truth.shape}")
    scale = float(np.abs(truth).max(initial=0.0))
    error = float(np.abs(reference.astype(np.float64) - truth).max(initial=0.0))
    if not error <= AGREEMENT * max(scale, 1.0):
        raise RuntimeError(
            f"{name}: reference disagrees with the independent computation (max error {error:.3e})"
        )
    atol = derived_atol(error, graded_spread(name, torch.from_numpy(truth)), scale)
    match_atol = match_tolerance(atol, truth)
    out = {"expected": truth, "reference_float32": reference, "atol": np.float64(atol)}
    for slug, (hint, _) in sorted(result.wrong.items()):
        wrong = arrays[slug]
        distance = float(np.abs(wrong - truth).max()) if wrong.shape == truth.shape else np.inf
        # Far from the truth (most mistakes), or at least a few tolerances away: a student's
        # output matches a near one only when four times closer to it than to the truth
        # (tests/snapshots.py), so near mistakes are told apart too.
        if not (distance > 10 * match_atol or distance > 2.5 * atol):
            raise RuntimeError(
                f"{name}: wrong output {slug!r} is too close to the truth ({distance:.3e})"
            )
        out[f"wrong.{slug}"] = wrong
        out[f"hint.{slug}"] = np.array(hint)
    return out


def write_snapshot(name: str, data: FixtureData | None = None) -> bool:
    if name not in REGISTRY:
        raise KeyError(f"no snapshot case named {name!r}; known: {', '.join(sorted(REGISTRY))}")
    arrays = snapshot_arrays(name, data or load_fixture_data())
    written = update_fixture(FIXTURES / "snapshots" / f"{name}.npz", npz_bytes(arrays))
    if written:
        print(f"wrote fixtures/snapshots/{name}.npz")
    return written


def write_base_fixtures() -> None:
    """The model weights and config, and the shared inputs every snapshot case reads."""
    # the flat format the tests' config dicts use (and this file always had)
    flat = json.dumps(MODEL_CONFIG.flat_dict(), indent=2, sort_keys=True) + "\n"
    update_fixture(FIXTURES / "model" / "config.json", flat.encode())
    update_fixture(
        FIXTURES / "model" / "weights.safetensors", save(make_model_weights(MODEL_CONFIG))
    )
    update_fixture(FIXTURES / "inputs.npz", npz_bytes(make_inputs()))
    write_tokenizer_fixtures(FIXTURES)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "names", nargs="*", help="snapshot cases to regenerate (default: everything)"
    )
    args = parser.parse_args(argv)
    torch.use_deterministic_algorithms(True)
    if not args.names:
        write_base_fixtures()
    data = load_fixture_data()
    names = args.names or sorted(REGISTRY)
    written = sum(write_snapshot(name, data) for name in names)
    if not args.names and update_fixture(FIXTURES / "stages.npz", npz_bytes(stage_arrays(data))):
        print("wrote fixtures/stages.npz")
    write_hidden_cases()  # the grader's cases (course/cases/hidden), which read the fixtures above
    write_checksums()
    print(
        f"snapshots: {written} rewritten, {len(names) - written} unchanged "
        "(bit for bit or within the few-ulp rule of course/cases/fixture_diff.py)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
