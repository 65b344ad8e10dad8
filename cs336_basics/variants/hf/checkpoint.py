"""Hugging Face checkpoint directories in and out: ``load_pretrained`` and ``save_pretrained``.

A directory holds ``config.json``, the weights as ``model.safetensors`` or as shards listed by
``model.safetensors.index.json`` (``{"weight_map": {tensor name: shard file}}``), MoE experts one
tensor per expert as published (or stacked, as newer tools may write; ``expert_layout``), and
optionally a byte-level BPE tokenizer as ``tokenizer.json`` (HF ``tokenizers``, read by
``hf.tokenizer`` with its normaliser, pre-tokenizer and added tokens) or
``vocab.json`` + ``merges.txt`` (GPT-2 format). ``convert`` does the renaming; this module
reads and writes the files and checks them, naming the file and the field of every problem.

The config is parsed by ``transformers.AutoConfig`` (so its defaults and legacy fields apply;
reading a directory therefore needs ``transformers`` installed, writing one does not), from the
local directory only: nothing is downloaded.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from cs336_basics.errors import (
    InputError,
    MissingDependencyError,
    MissingInputError,
    OutputExistsError,
)
from cs336_basics.tokenizer import Tokenizer
from cs336_basics.variants.builders import build_variant_model
from cs336_basics.variants.config import VariantConfig
from cs336_basics.variants.hf.convert import FAMILIES, from_hf, to_hf
from cs336_basics.variants.hf.expert_layout import is_stacked, stack_experts, unstack_experts
from cs336_basics.variants.hf.named_builders import config_from_hf
from cs336_basics.variants.hf.tokenizer import UnsupportedTokenizer, tokenizer_from_json
from cs336_basics.variants.model import VariantTransformerLM

ARCHITECTURES = {
    "llama": "LlamaForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "qwen3_moe": "Qwen3MoeForCausalLM",
    "mixtral": "MixtralForCausalLM",
    "deepseek_v2": "DeepseekV2ForCausalLM",
    "deepseek_v3": "DeepseekV3ForCausalLM",
    "deepseek_v32": "DeepseekV32ForCausalLM",
    "gpt2": "GPT2LMHeadModel",
}
INDEX_FILE = "model.safetensors.index.json"


@dataclass
class Pretrained:
    """What ``load_pretrained`` read: the model (eval mode), its config, HF family, tokenizer,
    and the text of the token HF's ``generate`` stops at (when the tokenizer has it)."""

    model: VariantTransformerLM
    config: VariantConfig
    family: str
    tokenizer: Tokenizer | None
    end_token: str | None = None


def load_pretrained(directory: str | os.PathLike, context_length: int | None = None) -> Pretrained:
    """The model (and tokenizer, when present) of an HF checkpoint directory, in float32."""
    directory = Path(directory)
    hf_config = _read_config(directory)
    try:
        config = config_from_hf(hf_config, context_length)
    except ValueError as error:
        raise InputError(f"{directory / 'config.json'}: {error}") from error
    family = hf_config.model_type
    tokenizer = _read_tokenizer(directory, config.vocab_size)
    model = build_variant_model(config).eval()
    hf_weights = _read_weights(directory)
    _check_shapes(hf_weights, model, config, family, directory)
    weights = {name: tensor for name, (tensor, _) in hf_weights.items()}
    if not is_stacked(weights):
        weights = stack_experts(weights, family)
    model.load_state_dict(from_hf(weights, config, family))
    end_token = _end_token(directory, hf_config, tokenizer)
    return Pretrained(model, config, family, tokenizer, end_token)


def save_pretrained(
    model: torch.nn.Module,
    config: VariantConfig,
    directory: str | os.PathLike,
    family: str,
    tokenizer: Tokenizer | None = None,
    overwrite: bool = False,
) -> None:
    """Write ``model`` as an HF ``family`` checkpoint that ``from_pretrained`` loads, with the
    tensor names ``transformers``' own ``save_pretrained`` writes (MoE experts one by one).

    The directory appears complete or not at all (written beside it, then renamed); an existing
    one is replaced only with ``overwrite``.
    """
    directory = Path(directory)
    if directory.exists() and not overwrite:
        raise OutputExistsError(f"{directory} already exists; pass --force to replace it")
    weights = _file_weights(model, config, family)
    from safetensors.torch import save_file

    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
    try:
        contiguous = {name: t.detach().cpu().contiguous() for name, t in weights.items()}
        save_file(contiguous, staging / "model.safetensors", metadata={"format": "pt"})
        config_json = json.dumps(hf_config_dict(config, family), indent=2)
        (staging / "config.json").write_text(config_json, encoding="utf-8")
        if tokenizer is not None:
            tokenizer.save(staging / "vocab.json", staging / "merges.txt")
        if directory.exists():
            shutil.rmtree(directory)
        staging.rename(directory)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def hf_config_dict(config: VariantConfig, family: str) -> dict[str, Any]:
    """The ``config.json`` contents of the HF ``family`` model ``config`` describes."""
    if family not in FAMILIES:
        raise InputError(f"unsupported family {family!r}; expected one of {FAMILIES}")
    common = dict(
        model_type=family,
        architectures=[ARCHITECTURES[family]],
        vocab_size=config.vocab_size,
        tie_word_embeddings=config.tie_embeddings,
        torch_dtype="float32",
    )
    if family == "gpt2":
        return common | dict(
            n_embd=config.d_model,
            n_layer=config.num_layers,
            n_head=config.num_heads,
            n_positions=config.context_length,
            n_inner=config.d_ff,
            layer_norm_epsilon=config.norm_eps,
            activation_function="gelu" if config.ffn == "gelu" else "gelu_new",
        )
    shape = common | dict(
        hidden_size=config.d_model,
        intermediate_size=config.d_ff,
        num_hidden_layers=config.num_layers,
        num_attention_heads=config.num_heads,
        num_key_value_heads=config.kv_heads,
        rms_norm_eps=config.norm_eps,
        hidden_act="silu",
        attention_bias=False,
        head_dim=config.d_head,
    )
    return shape | _rope_fields(config) | _family_fields(config, family)


def _rope_fields(config: VariantConfig) -> dict[str, Any]:
    """``max_position_embeddings`` and the RoPE fields; HF's ``dynamic`` scaling reads its
    original context from ``max_position_embeddings``."""
    scaling = dict(config.rope_scaling or {"rope_type": "default"})
    context = config.context_length
    if scaling["rope_type"] == "dynamic":
        context = scaling.pop("original_max_position_embeddings")
    return dict(
        max_position_embeddings=context,
        rope_theta=config.rope_theta,
        rope_parameters=scaling | {"rope_theta": config.rope_theta},
    )


def _family_fields(config: VariantConfig, family: str) -> dict[str, Any]:
    if family == "qwen3_moe":
        return dict(
            intermediate_size=config.moe.dense_d_ff or config.d_ff,
            moe_intermediate_size=config.d_ff,
            num_experts=config.moe.num_experts,
            num_experts_per_tok=config.moe.top_k,
            norm_topk_prob=config.moe.normalize_topk,
            router_aux_loss_coef=config.moe.aux_loss_coef,
            decoder_sparse_step=1,
            mlp_only_layers=list(config.moe.dense_layers or []),
        )
    if family == "mixtral":
        return dict(
            num_local_experts=config.moe.num_experts,
            num_experts_per_tok=config.moe.top_k,
            router_aux_loss_coef=config.moe.aux_loss_coef,
        )
    if family == "deepseek_v32":
        sparse = dict(
            index_topk=config.sparse.index_topk,
            index_n_heads=config.sparse.index_heads,
            index_head_dim=config.sparse.index_head_dim,
        )
        return _family_fields(config, "deepseek_v3") | sparse
    if family in ("deepseek_v2", "deepseek_v3"):
        return dict(
            q_lora_rank=config.mla.q_lora_rank,
            kv_lora_rank=config.mla.kv_lora_rank,
            qk_rope_head_dim=config.mla.qk_rope_head_dim,
            qk_nope_head_dim=config.mla_nope_dim,
            v_head_dim=config.mla_v_dim,
            head_dim=config.mla.qk_rope_head_dim,  # what HF's DeepSeek configs derive
            rope_interleave=True,
        ) | _deepseek_experts(config)
    return {}


def _deepseek_experts(config: VariantConfig) -> dict[str, Any]:
    if config.moe is None:
        return dict(first_k_dense_replace=config.num_layers)
    dense = config.moe.dense_layers or []
    if dense != list(range(len(dense))):
        raise InputError(
            f"DeepSeek's dense layers come first; dense_layers={dense} cannot be saved"
        )
    groups = config.moe.expert_groups
    if config.moe.router_scoring == "sigmoid":  # DeepSeek-V3
        routing = dict(topk_method="noaux_tc", scoring_func="sigmoid")
    else:
        method = "group_limited_greedy" if groups else "greedy"
        routing = dict(topk_method=method, scoring_func="softmax")
    return routing | dict(
        first_k_dense_replace=len(dense),
        intermediate_size=config.moe.dense_d_ff or config.d_ff,
        moe_intermediate_size=config.d_ff,
        n_routed_experts=config.moe.num_experts,
        num_experts_per_tok=config.moe.top_k,
        n_shared_experts=config.moe.num_shared_experts or 0,
        routed_scaling_factor=config.moe.routed_scaling or 1.0,
        norm_topk_prob=config.moe.normalize_topk,
        n_group=groups[0] if groups else 1,
        topk_group=groups[1] if groups else 1,
        moe_layer_freq=1,
    )


def _file_weights(
    model: torch.nn.Module, config: VariantConfig, family: str, stacked: bool = False
) -> dict[str, Tensor]:
    """The tensors of ``model`` under the names a checkpoint file gives them."""
    weights = to_hf(model.state_dict(), config, family)
    if config.tie_embeddings:  # HF stores a tied head once, as the embedding
        weights.pop("lm_head.weight")
    return weights if stacked else unstack_experts(weights, family)


def _read_config(directory: Path) -> Any:
    path = directory / "config.json"
    if not path.is_file():
        raise MissingInputError(f"{path} not found; an HF checkpoint directory needs config.json")
    try:
        model_type = json.loads(path.read_text(encoding="utf-8")).get("model_type")
    except (ValueError, AttributeError) as error:
        raise InputError(f"{path} is not a JSON object: {error}") from error
    if model_type not in FAMILIES:
        raise InputError(
            f"{path}: model_type {model_type!r} is not supported; use one of {FAMILIES}"
        )
    try:
        from transformers import AutoConfig
    except ImportError as error:
        raise MissingDependencyError(
            f"reading {path} needs the transformers package (its config defaults): "
            "pip install transformers (or uv sync, which installs the dev group)"
        ) from error
    return AutoConfig.from_pretrained(directory, local_files_only=True)


def _end_token(directory: Path, hf_config: Any, tokenizer: Tokenizer | None) -> str | None:
    """The special token at ``generation_config.json``'s ``eos_token_id`` (else config.json's).
    Of a list of ids, the first: decoding stops at one token."""
    path = directory / "generation_config.json"
    eos = None
    if path.is_file():
        try:
            eos = json.loads(path.read_text(encoding="utf-8")).get("eos_token_id")
        except (ValueError, AttributeError) as error:
            raise InputError(f"{path} is not a JSON object: {error}") from error
    if eos is None:
        eos = getattr(hf_config, "eos_token_id", None)
    if isinstance(eos, list):
        eos = eos[0] if eos else None
    specials = {token_id: text for text, token_id in getattr(tokenizer, "special_ids", {}).items()}
    return specials.get(eos)


def _read_weights(directory: Path) -> dict[str, tuple[Tensor, str]]:
    """Every tensor of the directory's safetensors files, with the file it came from."""
    from safetensors.torch import load_file

    single, index = directory / "model.safetensors", directory / INDEX_FILE
    if single.is_file():
        shards = {single.name: None}
    elif index.is_file():
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        except (ValueError, KeyError, TypeError) as error:
            raise InputError(f"{index}: no usable weight_map ({error})") from error
        shards = dict.fromkeys(weight_map.values())
        for shard in shards:
            if not (directory / shard).is_file():
                raise MissingInputError(f"{index} lists shard {shard}, which is not in {directory}")
    else:
        raise MissingInputError(f"{directory} has neither model.safetensors nor {INDEX_FILE}")
    weights: dict[str, tuple[Tensor, str]] = {}
    for shard in shards:
        for name, tensor in load_file(directory / shard).items():
            weights[name] = (tensor.float(), shard)
    return weights


def _check_shapes(
    hf_weights: dict[str, tuple[Tensor, str]],
    model: torch.nn.Module,
    config: VariantConfig,
    family: str,
    directory: Path,
) -> None:
    """Every tensor the config implies is present with the shape the config implies, in the
    expert layout the directory uses."""
    stacked = is_stacked({name: tensor for name, (tensor, _) in hf_weights.items()})
    expected = _file_weights(model, config, family, stacked)
    for name, tensor in expected.items():
        if name not in hf_weights:
            raise InputError(
                f"{directory}: tensor {name} (required by config.json) is in no weights file"
            )
        found, shard = hf_weights[name]
        if found.shape != tensor.shape:
            raise InputError(
                f"{directory / shard}: tensor {name} has shape {tuple(found.shape)} but "
                f"config.json implies {tuple(tensor.shape)} (check hidden_size, "
                "intermediate_size, vocab_size and the head counts)"
            )


def _read_tokenizer(directory: Path, vocab_size: int) -> Tokenizer | None:
    path = directory / "tokenizer.json"
    if path.is_file():
        tokenizer = _tokenizer_from_json(path)
        source = path
    elif (directory / "vocab.json").is_file() and (directory / "merges.txt").is_file():
        source = directory / "vocab.json"
        try:
            tokenizer = Tokenizer.from_files(source, directory / "merges.txt", [])
        except (ValueError, KeyError) as error:
            raise InputError(f"{source}: {error}") from error
    else:
        return None
    largest = max(tokenizer.vocab)
    if largest >= vocab_size:
        raise InputError(
            f"{source}: the tokenizer has token id {largest} but config.json's vocab_size is "
            f"{vocab_size}: they do not belong together"
        )
    return tokenizer


def _tokenizer_from_json(path: Path) -> Tokenizer:
    """The tokenizer of an HF ``tokenizers`` ``tokenizer.json``, splitting text as it says."""
    try:
        return tokenizer_from_json(path)
    except UnsupportedTokenizer as error:
        raise InputError(f"{path}: {error}") from error
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise InputError(f"{path}: not a usable byte-level BPE tokenizer ({error!r})") from error
