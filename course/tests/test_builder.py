"""``build_model``: a ``ModelConfig`` builds the handout's model, a ``VariantConfig`` composes the
variant parts with the same state-dict names, initial weights and function."""

from __future__ import annotations

import pytest
import torch

from cs336_basics.builder import build_model
from cs336_basics.config import ModelConfig
from cs336_basics.generation import generate
from cs336_basics.model import TransformerLM
from cs336_basics.runner.extensions import generate_function
from cs336_basics.variants.config import VariantConfig
from cs336_basics.variants.decoding.generation import generate_cached
from cs336_basics.variants.decoding.kv_cache import kv_caches

pytestmark = pytest.mark.instructor

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
