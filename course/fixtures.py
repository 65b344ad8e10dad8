"""``make fixtures``: regenerate everything under ``fixtures/`` from the reference solution.

Deterministic: fixed seeds, sorted keys, fixed zip timestamps, so running it twice gives
byte-identical files and any diff under ``fixtures/`` means behaviour changed.

Every snapshot is cross-checked here against an independent float64 computation; a case whose
reference disagrees, or whose catalogued mistake is indistinguishable from the right answer,
stops the run before anything is written. Tolerances are derived, not guessed:
``atol = 10 * max|reference_f32 - truth_f64| + 8 * eps_f32 * max|truth|``.
"""

from __future__ import annotations

import argparse
import io
import zipfile
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save

import course.cases_model  # noqa: F401  (registers the model cases)
import course.cases_variants  # noqa: F401  (registers the architecture-variant cases)
from course.hidden_cases import write_hidden_cases
from course.manifest import write_manifest
from course.snapshot_case import REGISTRY, FixtureData
from course.tokenizer_fixtures import write_tokenizer_fixtures
from cs336_basics.atomic_write import atomic_writer
from cs336_basics.config import ModelConfig
from cs336_basics.model import TransformerLM
from tests.snapshots import match_tolerance

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
SEED = 20250401

MODEL_CONFIG = ModelConfig(
    vocab_size=512,
    context_length=16,
    d_model=64,
    num_layers=3,
    num_heads=4,
    d_ff=128,
    rope_theta=10000.0,
)
BATCH, SEQ, D_K, D_V, KEYS = 4, 12, 16, 24, 16


def atomic_write_bytes(path: Path, data: bytes) -> None:
    with atomic_writer(path) as out:
        out.write(data)


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


def make_model_weights(config: ModelConfig) -> dict[str, torch.Tensor]:
    """The reference initialisation, with norm gains drawn from N(1, 0.2^2) so that a norm
    ignoring its gain fails the tests."""
    torch.manual_seed(SEED)
    model = TransformerLM(config)
    generator = torch.Generator().manual_seed(SEED + 1)
    state = {}
    for name, tensor in sorted(model.state_dict().items()):
        if name.endswith(("ln1.weight", "ln2.weight", "ln_final.weight")):
            tensor = 1.0 + 0.2 * torch.randn(tensor.shape, generator=generator)
        state[name] = tensor.detach().contiguous()
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


def snapshot_arrays(name: str, data: FixtureData) -> dict[str, np.ndarray]:
    """Run case ``name``, check it against its independent truth, and derive its tolerance."""
    result = REGISTRY[name](data)
    arrays = result.arrays()
    reference, truth = arrays["reference"], arrays["truth"]
    if reference.dtype != np.float32 or reference.shape != truth.shape:
        raise RuntimeError(f"{name}: reference must be float32 of the truth's shape {truth.shape}")
    scale = float(np.abs(truth).max(initial=0.0))
    error = float(np.abs(reference.astype(np.float64) - truth).max(initial=0.0))
    if not error <= 1e-4 * max(scale, 1.0):
        raise RuntimeError(
            f"{name}: reference disagrees with the independent computation (max error {error:.3e})"
        )
    atol = 10 * error + 8 * float(np.finfo(np.float32).eps) * scale
    match_atol = match_tolerance(atol, truth)
    out = {"expected": truth, "reference_float32": reference, "atol": np.float64(atol)}
    for slug, (hint, _) in sorted(result.wrong.items()):
        wrong = arrays[slug]
        distance = float(np.abs(wrong - truth).max()) if wrong.shape == truth.shape else np.inf
        if not distance > 10 * match_atol:
            raise RuntimeError(
                f"{name}: wrong variant {slug!r} is too close to the truth ({distance:.3e})"
            )
        out[f"wrong.{slug}"] = wrong
        out[f"hint.{slug}"] = np.array(hint)
    return out


def write_snapshot(name: str, data: FixtureData | None = None) -> None:
    if name not in REGISTRY:
        raise KeyError(f"no snapshot case named {name!r}; known: {', '.join(sorted(REGISTRY))}")
    arrays = snapshot_arrays(name, data or load_fixture_data())
    atomic_write_bytes(FIXTURES / "snapshots" / f"{name}.npz", npz_bytes(arrays))


def write_base_fixtures() -> None:
    """The model weights and config, and the shared inputs every snapshot case reads."""
    atomic_write_bytes(FIXTURES / "model" / "config.json", MODEL_CONFIG.to_json().encode())
    atomic_write_bytes(
        FIXTURES / "model" / "weights.safetensors", save(make_model_weights(MODEL_CONFIG))
    )
    atomic_write_bytes(FIXTURES / "inputs.npz", npz_bytes(make_inputs()))
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
    for name in args.names or sorted(REGISTRY):
        write_snapshot(name, data)
        print(f"wrote fixtures/snapshots/{name}.npz")
    write_hidden_cases()  # the grader's cases (course/hidden), which read the fixtures above
    write_manifest()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
