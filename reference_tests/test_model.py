"""The reference model's construction and decoding (its configuration: ``test_config.py``).

* ``build_model``: a ``ModelConfig`` builds the handout's model, a ``VariantConfig`` composes the
  variant parts with the same state-dict names, initial weights and function;
* decoding: greedy is the argmax; temperature and top-p sample correctly;
* the runner loads as extensions the subpackages it finds, never itself.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest
import torch

from cs336_basics.builder import build_model
from cs336_basics.config import ModelConfig
from cs336_basics.generation import generate, sample_next_token, top_p_filter
from cs336_basics.model import TransformerLM
from cs336_basics.runner.extensions import extension_names, generate_function, load_extensions
from cs336_basics.variants.config import VariantConfig
from cs336_basics.variants.decoding.generation import generate_cached
from cs336_basics.variants.decoding.kv_cache import kv_caches

SHAPE = dict(vocab_size=40, context_length=12, d_model=16, num_layers=2, num_heads=4, d_ff=24)


def seeded(config: ModelConfig) -> TransformerLM:
    torch.manual_seed(0)
    return build_model(config).eval()


def test_default_variant_config_is_the_handout_model_with_variant_parts():
    core, variant = seeded(ModelConfig(**SHAPE)), seeded(VariantConfig(**SHAPE))
    assert type(core) is TransformerLM and type(variant) is not TransformerLM
    core_state, variant_state = core.state_dict(), variant.state_dict()
    assert core_state.keys() == variant_state.keys()
    for name, tensor in core_state.items():
        assert torch.equal(variant_state[name], tensor), name
    ids = torch.randint(0, 40, (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(variant(ids), core(ids), atol=1e-6, rtol=1e-6)


def test_core_model_has_no_kv_cache_and_decodes_without_one():
    core = seeded(ModelConfig(**SHAPE))
    with pytest.raises(ValueError, match="no cache-capable attention"), kv_caches(core):
        pass
    assert generate_cached(core, [1, 2], 5, temperature=0.0) == generate(core, [1, 2], 5, 0.0)
    assert generate_function(use_kv_cache=False) is generate
    assert generate_function(use_kv_cache=True) is generate_cached


FAKE_CORE = "fake_core_for_extensions"


@pytest.fixture
def fake_core(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A package laid out like ``cs336_basics``: a runner, two extensions (written out of order),
    a plain module and a data folder; each subpackage records its import in ``loaded``."""
    root = tmp_path / FAKE_CORE
    root.mkdir()
    (root / "__init__.py").write_text("loaded = []\n")
    (root / "plain.py").write_text("raise AssertionError('a module is not an extension')\n")
    (root / "data").mkdir()
    (root / "data" / "notes.txt").write_text("a folder without __init__.py\n")
    for name in ("zeta", "runner", "alpha"):
        (root / name).mkdir()
        (root / name / "__init__.py").write_text(
            f"from {FAKE_CORE} import loaded\nloaded.append(__name__)\n"
        )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield root
    for name in [m for m in sys.modules if m.split(".")[0] == FAKE_CORE]:
        del sys.modules[name]


def test_extensions_are_the_subpackages_but_the_runner_in_name_order(fake_core):
    import fake_core_for_extensions as package

    assert extension_names(package) == [f"{FAKE_CORE}.alpha", f"{FAKE_CORE}.zeta"]
    load_extensions(package)
    assert package.loaded == [f"{FAKE_CORE}.alpha", f"{FAKE_CORE}.zeta"]
    assert f"{FAKE_CORE}.plain" not in sys.modules


def test_an_import_error_inside_an_extension_is_not_skipped(fake_core):
    (fake_core / "alpha" / "__init__.py").write_text("import no_such_module_anywhere\n")
    import fake_core_for_extensions as package

    with pytest.raises(ModuleNotFoundError, match="no_such_module_anywhere"):
        load_extensions(package)


def test_this_install_loads_the_variants():
    assert extension_names() == ["cs336_basics.variants"]


def test_sequences_longer_than_the_context_are_an_error_with_and_without_cache():
    for config in (ModelConfig(**SHAPE), VariantConfig(**SHAPE)):
        with pytest.raises(ValueError, match="context_length=12"):
            seeded(config)(torch.zeros(1, 13, dtype=torch.long))
    variant = seeded(VariantConfig(**SHAPE))
    with torch.no_grad(), kv_caches(variant):
        variant(torch.zeros(1, 10, dtype=torch.long))
        with pytest.raises(ValueError, match="13 tokens"):
            variant(torch.zeros(1, 3, dtype=torch.long))


def test_input_checks_run_on_a_torch_without_torch_compiler_is_compiling(monkeypatch):
    """Intel Macs run torch 2.2, whose torch.compiler has no is_compiling: the shipped id and
    position checks ask dynamo's own flag there, and still refuse out-of-range input. (Checked
    by hand on torch 2.2.2 too; here torch 2.15's dynamo stands in, its flag recorded.)"""
    from torch import _dynamo

    from cs336_basics.devices import is_compiling
    from cs336_basics.embedding import check_token_ids
    from cs336_basics.rope import check_positions

    asked = []

    def dynamo_flag() -> bool:
        asked.append(True)
        return False

    monkeypatch.delattr(torch.compiler, "is_compiling")
    monkeypatch.setattr(_dynamo, "is_compiling", dynamo_flag)
    assert is_compiling() is False
    check_token_ids(torch.tensor([0, 3]), vocab_size=4)
    with pytest.raises(IndexError, match="token id 4"):
        check_token_ids(torch.tensor([4]), vocab_size=4)
    with pytest.raises(IndexError, match="position 9"):
        check_positions(torch.tensor([9]), max_seq_len=8)
    assert len(asked) == 4


CONFIG = ModelConfig(
    vocab_size=50, context_length=32, d_model=32, num_layers=2, num_heads=4, d_ff=64
)


@pytest.fixture(scope="module")
def model() -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model(CONFIG)


def test_generation_greedy_is_argmax_of_the_full_forward_at_every_step(model):
    prompt = [3, 14, 15, 9, 2, 6]
    generated = generate(model, prompt, 20, temperature=0.0)
    assert len(generated) == 20
    sequence = list(prompt)
    with torch.no_grad():
        for _ in range(20):
            sequence.append(int(model(torch.tensor([sequence]))[0, -1].argmax()))
    assert sequence[len(prompt) :] == generated


def test_generation_seeded_sampling_is_reproducible(model):
    def sample(seed):
        return generate(
            model,
            [7],
            15,
            temperature=1.0,
            top_p=0.9,
            generator=torch.Generator().manual_seed(seed),
        )

    assert sample(1) == sample(1)
    assert sample(1) != sample(2)


def test_generation_stops_at_end_token_and_context_window(model):
    greedy = generate(model, [4, 5], 10, temperature=0.0)
    eos = greedy[3]
    stopped = generate(model, [4, 5], 10, temperature=0.0, eos_id=eos)
    assert stopped == greedy[: greedy.index(eos) + 1]
    full = generate(model, list(range(30)), 100, temperature=0.0)
    assert len(full) == CONFIG.context_length - 30
    long_prompt = generate(model, list(range(40)), 5, temperature=0.0)
    assert len(long_prompt) == 1  # kept the last 31 prompt tokens, room for one more
    with pytest.raises(ValueError, match="at least one token"):
        generate(model, [], 5)


def test_generation_top_p_keeps_the_smallest_nucleus():
    probabilities = torch.tensor([0.05, 0.5, 0.1, 0.3, 0.05])
    kept = top_p_filter(probabilities, 0.75)  # 0.5 + 0.3 reaches 0.75; nothing else is needed
    torch.testing.assert_close(kept, torch.tensor([0.0, 0.625, 0.0, 0.375, 0.0]))
    kept = top_p_filter(probabilities, 0.85)  # 0.5 + 0.3 = 0.8 < 0.85, so 0.1 joins
    torch.testing.assert_close(kept, torch.tensor([0.0, 0.5, 0.1, 0.3, 0.0]) / 0.9)
    assert torch.equal(top_p_filter(probabilities, 1.0), probabilities)
    assert top_p_filter(probabilities, 0.01).tolist() == [0.0, 1.0, 0.0, 0.0, 0.0]


def test_generation_sampling_follows_tempered_softmax():
    logits = torch.tensor([1.0, 2.0, 0.0])
    generator = torch.Generator().manual_seed(0)
    draws = Counter(sample_next_token(logits, 2.0, 1.0, generator) for _ in range(4000))
    expected = torch.softmax(logits / 2.0, dim=-1)
    for token in range(3):
        assert abs(draws[token] / 4000 - expected[token].item()) < 0.03
    assert sample_next_token(logits, 0.0) == 1
    with pytest.raises(ValueError, match="temperature"):
        sample_next_token(logits, -1.0)
