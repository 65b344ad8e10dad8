"""``cs336 export-hf``: write a training checkpoint as a Hugging Face checkpoint directory.

The directory (``config.json``, ``model.safetensors`` and, with ``--tokenizer``, ``vocab.json``
and ``merges.txt``) loads with ``transformers.AutoModelForCausalLM.from_pretrained`` and gives
the same logits. The HF family is the first that describes the model (the handout's model is a
``llama``); ``--family`` picks another that fits. Example::

    cs336 export-hf runs/pipeline/checkpoints/latest.pt runs/hf --tokenizer runs/pipeline/tokenizer
"""

from __future__ import annotations

import argparse
from pathlib import Path

from cs336_basics.errors import InputError
from cs336_basics.runner.commands.arguments import add_force_flag
from cs336_basics.runner.commands.inputs import (
    load_tokenizer_dir,
    reading,
    refuse_existing,
    require_file,
)

# The families variants.hf.convert knows, named here so that `--help` does not import transformers (seconds);
# reference_tests/test_cli.py checks the two lists agree.
FAMILIES = (
    "llama",
    "qwen2",
    "qwen3",
    "qwen3_moe",
    "mixtral",
    "deepseek_v2",
    "deepseek_v3",
    "deepseek_v32",
    "gpt2",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("checkpoint", help="a checkpoint written by cs336 train or pipeline")
    parser.add_argument("output", metavar="DIR", help="the HF checkpoint directory to write")
    parser.add_argument(
        "--tokenizer", metavar="DIR", help="include this cs336 train-bpe tokenizer directory"
    )
    parser.add_argument(
        "--family", choices=FAMILIES, help="HF model_type (default: the first that fits)"
    )
    add_force_flag(parser, "the output directory")


def run(args: argparse.Namespace) -> int:
    checkpoint = require_file(args.checkpoint, "checkpoint")
    output = Path(args.output)
    if not args.force:
        refuse_existing([output])
    tokenizer = load_tokenizer_dir(args.tokenizer) if args.tokenizer else None

    from cs336_basics.variants.hf.checkpoint import save_pretrained
    from cs336_basics.variants.hf.convert import family_of

    model, config = _variant_model(checkpoint)
    if tokenizer is not None and max(tokenizer.vocab) >= config.vocab_size:
        raise InputError(
            f"the tokenizer in {args.tokenizer} has {len(tokenizer.vocab)} tokens but the model "
            f"in {checkpoint} has a vocabulary of {config.vocab_size}: give the tokenizer the "
            "model was trained with"
        )
    try:
        family = args.family or family_of(config)
        save_pretrained(model, config, output, family, tokenizer, overwrite=args.force)
    except ValueError as error:
        raise InputError(f"{checkpoint}: {error}") from error
    print(f"wrote {family} checkpoint {output}")
    return 0


def _variant_model(checkpoint: Path):
    """The checkpoint's model rebuilt as a variant model, with its ``VariantConfig`` (the
    handout's ``ModelConfig`` is the variant config with every switch at its default)."""
    from cs336_basics.checkpoint import read_checkpoint
    from cs336_basics.config import ModelConfig
    from cs336_basics.variants.builders import build_variant_model
    from cs336_basics.variants.config import VariantConfig

    with reading(f"checkpoint {checkpoint}"):
        saved = read_checkpoint(checkpoint)
        settings = saved.get("config") or {}
        config = ModelConfig.from_dict(settings.get("model", settings))
        if not isinstance(config, VariantConfig):  # the handout's fields: every switch off
            config = VariantConfig(**config.to_dict())
        model = build_variant_model(config, device="cpu")
        model.load_state_dict(saved["model"])
    return model.eval(), config
