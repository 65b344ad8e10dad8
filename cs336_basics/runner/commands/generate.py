"""``cs336 generate``: sample completions of one or many prompts from a trained checkpoint.

Example::

    cs336 generate --checkpoint runs/pipeline/checkpoints/latest.pt --tokenizer runs/pipeline/tokenizer \
        --prompt "Once upon a time" --prompt "Tom had a red ball." --temperature 0.8 --top-p 0.9

or from a Hugging Face checkpoint directory (its tokenizer.json or vocab.json + merges.txt)::

    cs336 generate --hf-model path/to/hf-dir --prompt "Once upon a time" --temperature 0

which encodes prompts as ``transformers``' tokenizer does (its template's tokens, e.g. a BOS,
included) and stops at the directory's end token (``generation_config.json``'s
``eos_token_id``).

Text is printed as it is generated (``--no-stream``: each sample when it is complete). With the
variants installed, ``--static-cache`` decodes over preallocated KV caches and ``--compile``
also compiles the one-token step (CUDA graphs on a GPU).
"""

from __future__ import annotations

import argparse
import inspect
from collections.abc import Callable

from cs336_basics.errors import InputError
from cs336_basics.runner.commands.arguments import non_negative_float, positive_int, probability
from cs336_basics.runner.commands.inputs import load_tokenizer_dir, reading, require_file


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--checkpoint", help="a checkpoint written by cs336 train or pipeline")
    source.add_argument(
        "--hf-model",
        metavar="DIR",
        help="a Hugging Face checkpoint directory (config.json, *.safetensors, tokenizer)",
    )
    parser.add_argument(
        "--tokenizer",
        metavar="DIR",
        help="directory with vocab.json and merges.txt (required with --checkpoint; with "
        "--hf-model it replaces the directory's own tokenizer)",
    )
    parser.add_argument(
        "--prompt",
        action="append",
        default=None,
        help="text to continue; repeat for several (default: one empty prompt)",
    )
    parser.add_argument("--prompts-file", help="a text file with one prompt per line")
    parser.add_argument(
        "--max-new-tokens", type=positive_int, default=256, help="at least 1 (default: 256)"
    )
    parser.add_argument(
        "--temperature",
        type=non_negative_float,
        default=0.8,
        help="0 or more; 0 means greedy (default: 0.8)",
    )
    parser.add_argument(
        "--top-p", type=probability, default=0.95, help="nucleus mass in (0, 1] (default: 0.95)"
    )
    parser.add_argument("--seed", type=int, default=0, help="(default: 0)")
    parser.add_argument("--device", default="auto", help="cpu, cuda, cuda:1, mps or auto (default)")
    parser.add_argument(
        "--no-kv-cache", action="store_true", help="recompute the whole sequence each step"
    )
    parser.add_argument(
        "--static-cache",
        action="store_true",
        help="preallocate the KV caches (fixed-size buffers written in place)",
    )
    parser.add_argument(
        "--compile",
        action="store_true",
        help="compile the one-token decoding step over a static cache: torch.compile with "
        "CUDA graphs on a GPU (a minute of compiling first; on a CPU it needs a C++ compiler)",
    )
    parser.add_argument(
        "--no-stream",
        action="store_true",
        help="print each sample when it is complete instead of token by token",
    )
    parser.add_argument(
        "--end-token",
        default=None,
        help="stop after this special token (default: <|endoftext|>; with --hf-model the "
        "directory's eos token)",
    )


def run(args: argparse.Namespace) -> int:
    if args.no_kv_cache and (args.static_cache or args.compile):
        raise InputError(
            "--static-cache and --compile decode with the KV cache: drop --no-kv-cache"
        )
    prompts = list(args.prompt or [])
    if args.prompts_file:
        path = require_file(args.prompts_file, "prompts file")
        with reading(f"prompts file {path}"):
            prompts += [
                line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
            ]
    end_token = args.end_token or "<|endoftext|>"
    if args.hf_model:
        model, tokenizer, hf_end_token = _hf_model(args)
        end_token = args.end_token or hf_end_token or end_token
    else:
        model, tokenizer = _checkpoint_model(args)

    from cs336_basics.generation import complete_prompts
    from cs336_basics.runner.extensions import generate_function

    try:
        decode = generate_function(not args.no_kv_cache, args.static_cache, args.compile)
    except ValueError as error:
        raise InputError(f"{error} (the architecture variants' code)") from error
    prompts = prompts or [""]
    # Only the variants' decoding loops report tokens as they come (the handout's does not).
    streaming = not args.no_stream and "on_token" in inspect.signature(decode).parameters
    if streaming:
        decode = _printing_as_generated(decode, tokenizer, prompts)
    completions = complete_prompts(
        model,
        tokenizer,
        prompts,
        args.max_new_tokens,
        args.temperature,
        args.top_p,
        args.seed,
        end_token,
        decode,
    )
    if not streaming:
        for index, text in enumerate(completions):
            print(f"--- sample {index + 1} ---\n{text}")
    return 0


def _printing_as_generated(
    decode: Callable[..., list[int]], tokenizer, prompts: list[str]
) -> Callable[..., list[int]]:
    """``decode`` that prints the sample it decodes as it goes: a header and the prompt, then
    every new token's text as soon as it completes a character. ``complete_prompts`` calls it
    once per prompt, in order."""
    from cs336_basics.runner.commands.text_stream import TextStream

    samples = iter(enumerate(prompts, start=1))

    def decode_and_print(model, prompt_ids: list[int], *args) -> list[int]:
        index, prompt = next(samples)
        print(f"--- sample {index} ---\n{prompt}", end="", flush=True)
        stream = TextStream(tokenizer.vocab)
        new_ids = decode(model, prompt_ids, *args, on_token=stream.write)
        stream.close()
        print(flush=True)
        return new_ids

    return decode_and_print


def _device(args: argparse.Namespace) -> str:
    from cs336_basics.devices import auto_device

    return auto_device() if args.device == "auto" else args.device


def _checkpoint_model(args: argparse.Namespace):
    if not args.tokenizer:
        raise InputError("--checkpoint needs --tokenizer DIR (the tokenizer it was trained with)")
    checkpoint = require_file(args.checkpoint, "checkpoint")
    tokenizer = load_tokenizer_dir(args.tokenizer)

    from cs336_basics.checkpoint import CheckpointError, model_from_checkpoint

    try:
        model = model_from_checkpoint(checkpoint, device=_device(args))
    except CheckpointError as error:
        raise InputError(str(error)) from error
    except RuntimeError as error:  # an unusable --device
        raise InputError(f"{error}; pick another --device (cpu, cuda, mps or auto)") from error
    if len(tokenizer.vocab) != model.lm_head.weight.shape[0]:
        raise InputError(
            f"the tokenizer in {args.tokenizer} has {len(tokenizer.vocab)} tokens but the model "
            f"in {checkpoint} has a vocabulary of {model.lm_head.weight.shape[0]}: they were not "
            "trained together; give the tokenizer the model was trained with (a pipeline run "
            "keeps it in <run-dir>/tokenizer)"
        )
    if not args.no_kv_cache:
        model = _cache_capable(model)
    return model, tokenizer


def _cache_capable(model):
    """The handout's model with the variants' cache-capable attention (same weights), so the
    KV cache applies to checkpoints of the core model too; unchanged without the variants."""
    try:
        from cs336_basics.variants.builders import with_cache_capable_attention
    except ImportError:
        return model
    return with_cache_capable_attention(model)


def _hf_model(args: argparse.Namespace):
    """The model, tokenizer (``--tokenizer`` overrides) and end token of an HF checkpoint
    directory; a ``tokenizer.json`` adds its template's special tokens to prompts, as
    ``transformers`` does."""
    from cs336_basics.variants.hf.checkpoint import load_pretrained

    loaded = load_pretrained(args.hf_model)
    tokenizer = loaded.tokenizer
    if hasattr(tokenizer, "with_special_tokens"):
        tokenizer = tokenizer.with_special_tokens()
    if args.tokenizer:
        tokenizer = load_tokenizer_dir(args.tokenizer)
    if tokenizer is None:
        raise InputError(
            f"{args.hf_model} has no tokenizer.json nor vocab.json + merges.txt; "
            "give one with --tokenizer DIR"
        )
    if max(tokenizer.vocab) >= loaded.config.vocab_size:
        raise InputError(
            f"the tokenizer has token id {max(tokenizer.vocab)} but {args.hf_model}/config.json "
            f"has vocab_size {loaded.config.vocab_size}: they do not belong together"
        )
    try:
        return loaded.model.to(_device(args)), tokenizer, loaded.end_token
    except RuntimeError as error:  # an unusable --device
        raise InputError(f"{error}; pick another --device (cpu, cuda, mps or auto)") from error
