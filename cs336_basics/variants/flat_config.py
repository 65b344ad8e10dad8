"""The earlier flat ``VariantConfig`` format: every switch at the top level (``"attention":
"mla"`` beside ``"kv_lora_rank"``, ``"ffn": "moe"`` beside ``"num_experts"``, ...).

Configs and checkpoints saved in it still load (``sectioned``), and the test adapters' config
dicts are written in it (``flattened``). The section classes come in as ``classes`` (kind ->
dataclass: ``mha``, ``mla``, ``sparse``, ``moe``) so this module needs nothing from
``config.py``.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, Literal

# The flat format wrote every switch, used or not. These were ignored when their section was
# off; the others were rejected there (e.g. ``dense_layers`` without ``ffn="moe"``), and still are.
IGNORED_WHEN_OFF = frozenset(
    {
        "num_experts",
        "top_k",
        "normalize_topk",
        "capacity_factor",
        "aux_loss_coef",
        "q_lora_rank",
        "kv_lora_rank",
        "qk_rope_head_dim",
        "qk_nope_head_dim",
        "v_head_dim",
        "index_heads",
        "index_head_dim",
    }
)
# Written only when not at their defaults (they came later), so older files write back as they were.
OPTIONAL_FIELDS = (
    "head_dim",
    "rope_scaling",
    "qkv_bias",
    "dense_layers",
    "dense_d_ff",
    "num_shared_experts",
    "routed_scaling",
    "expert_groups",
    "router_scoring",
    "index_topk",
    "index_heads",
    "index_head_dim",
)


def flat_defaults(classes: dict[str, type]) -> dict[str, dict[str, Any]]:
    """Each section's flat keys and their defaults (``index_topk``: ``None``, sparse off)."""
    defaults: dict[str, dict[str, Any]] = {}
    for kind, section_class in classes.items():
        defaults[kind] = {
            field.name: None if field.default is dataclasses.MISSING else field.default
            for field in dataclasses.fields(section_class)
            if field.name != "sparse"
        }
    return defaults


def is_flat(data: dict[str, Any], classes: dict[str, type]) -> bool:
    """Whether ``data`` is a config in the flat format (a section's switch at the top level, or
    the attention or mixture of experts named by a string)."""
    flat_keys = {key for keys in flat_defaults(classes).values() for key in keys}
    return (
        bool(flat_keys & set(data))
        or isinstance(data.get("attention"), str)
        or data.get("ffn") == "moe"
    )


def sectioned(data: dict[str, Any], classes: dict[str, type]) -> dict[str, Any]:
    """The sectioned form of a flat config; a switch set for a section that is off is an error
    unless the flat format ignored it (``IGNORED_WHEN_OFF``, dropped). Sections already written
    as objects (a config file's, with flags given on top) are read first; flat switches win."""
    defaults = flat_defaults(classes)
    rest = inlined_sections(data)
    values: dict[str, dict[str, Any]] = {kind: {} for kind in defaults}
    for kind, keys in defaults.items():
        for key in keys:
            if key in rest:
                values[kind][key] = rest.pop(key)
    attention, ffn = rest.get("attention", "mha"), rest.get("ffn", "swiglu")
    if attention not in ("mha", "mla"):
        raise ValueError(f"ModelConfig.attention must be one of ('mha', 'mla'); got {attention!r}")
    sparse = values["sparse"].get("index_topk") is not None
    chosen = {attention, "sparse" if sparse else "", "moe" if ffn == "moe" else ""}
    for kind, settings in values.items():
        if kind not in chosen:
            check_unused(kind, settings, defaults[kind], attention, data.get("num_heads"))
    rest["attention"] = {"kind": attention, **values[attention]}
    if attention == "mla":
        rest["attention"]["sparse"] = values["sparse"] if sparse else None
    elif sparse:
        raise ValueError("index_topk (DeepSeek sparse attention) needs attention='mla'")
    if ffn == "moe":
        rest["ffn"] = {"kind": "moe", **values["moe"]}
    return rest


def inlined_sections(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with its section objects spread into flat switches (the top level's win)."""
    spread: dict[str, Any] = {}
    for name in ("attention", "ffn"):
        if isinstance(data.get(name), dict):
            values = dict(data[name])
            spread[name] = values.pop("kind", None)
            spread |= (values.pop("sparse", None) or {}) | values
    top = {
        key: value for key, value in data.items() if not (key in spread and isinstance(value, dict))
    }
    return spread | top


def flag_fields(config_class: type, classes: dict[str, type], dense: tuple[str, ...]) -> type:
    """A dataclass of the flat format's fields, each with its type and default: what the
    command line offers as flags (``--attention mla``, ``--kv-lora-rank``, ``--num-experts``)."""
    hints = typing.get_type_hints(config_class)
    kinds: dict[str, Any] = {
        "attention": Literal[(classes["mha"].kind, classes["mla"].kind)],  # type: ignore[misc]
        "ffn": Literal[(*dense, classes["moe"].kind)],  # type: ignore[misc]
    }
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    for field in dataclasses.fields(config_class):
        if field.name in kinds:  # the default section's kind
            default = classes["mha"].kind if field.name == "attention" else field.default
            fields.append((field.name, kinds[field.name], dataclasses.field(default=default)))
        elif field.default is dataclasses.MISSING:
            fields.append((field.name, hints[field.name]))
        else:
            fields.append((field.name, hints[field.name], dataclasses.field(default=field.default)))
    for kind, keys in flat_defaults(classes).items():
        section_hints = typing.get_type_hints(classes[kind])
        for key, default in keys.items():
            fields.append((key, section_hints[key], dataclasses.field(default=default)))
    return dataclasses.make_dataclass(f"Flat{config_class.__name__}", fields, frozen=True)


def check_unused(
    kind: str,
    settings: dict[str, Any],
    defaults: dict[str, Any],
    attention: str,
    num_heads: object,
) -> None:
    for key, value in settings.items():
        if key in IGNORED_WHEN_OFF or value == defaults[key]:
            continue
        if key == "num_kv_heads" and value == num_heads:
            continue  # one key/value head per query head: what MLA has anyway
        if kind == "moe":
            raise ValueError(f"{key} only applies with ffn='moe'")
        raise ValueError(
            f"{key} does not apply with attention={attention!r}: attention='mla' has its own "
            "key/value compression, no biases and no fused kernel"
        )


def flattened(data: dict[str, Any], classes: dict[str, type]) -> dict[str, Any]:
    """The flat form of a sectioned config (``VariantConfig.to_dict()``): every switch at the
    top level, a section that is off at its defaults; ``OPTIONAL_FIELDS`` only when set."""
    flat = {key: value for key, value in data.items() if key not in ("attention", "ffn")}
    for keys in flat_defaults(classes).values():
        flat.update(keys)
    attention, ffn = dict(data["attention"]), data["ffn"]
    flat["attention"] = attention.pop("kind")
    sparse = attention.pop("sparse", None)
    flat.update(attention, **(sparse or {}))
    if isinstance(ffn, dict):
        flat.update({key: value for key, value in ffn.items() if key != "kind"})
        ffn = ffn["kind"]
    flat["ffn"] = ffn
    optional_defaults = {
        key: value for keys in flat_defaults(classes).values() for key, value in keys.items()
    }
    optional_defaults["rope_scaling"] = None
    for name in OPTIONAL_FIELDS:
        if flat[name] == optional_defaults[name]:
            del flat[name]
    return flat
