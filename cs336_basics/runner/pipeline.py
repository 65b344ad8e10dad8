"""The end-to-end job: corpus -> tokenizer -> token arrays -> trained model -> sampled stories.

``run_pipeline(config)`` runs five stages and leaves everything in ``run_dir``::

    data/train.txt, data/valid.txt          the corpus (generated stories unless given)
    tokenizer/vocab.json, merges.txt, ...   the BPE tokenizer (trained unless given)
    data/train.npy, data/valid.npy          token ids
    checkpoints/latest.pt, metrics.jsonl,   the training run (see ``cs336_basics.training``)
    loss.png, config.json
    samples.txt, summary.json               sampled stories and the run's headline numbers

Each stage can take user data instead: a text corpus (``train_text``/``val_text``), an
existing tokenizer directory (``tokenizer_dir``), or ready token arrays
(``train_tokens``/``val_tokens``). The embedded defaults live in ``cs336_basics/runner/configs``.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from cs336_basics.atomic_write import atomic_writer
from cs336_basics.errors import InputError, MissingInputError, OutputExistsError

# Embedded configs, by preset name.
PRESETS = {
    "default": "pipeline.toml",  # generated stories, about five minutes on 2 CPU cores
    "tiny": "pipeline_tiny.toml",  # seconds; what the tests run
    "tinystories": "pipeline_tinystories.toml",  # the handout's experiment on real TinyStories
}


def embedded_config(preset: str = "default") -> dict[str, Any]:
    """One of the TOML configs shipped inside the package (see ``PRESETS``)."""
    import tomllib

    if preset not in PRESETS:
        raise InputError(f"unknown pipeline preset {preset!r}; choose from {', '.join(PRESETS)}")
    return tomllib.loads(
        resources.files("cs336_basics.runner.configs")
        .joinpath(PRESETS[preset])
        .read_text(encoding="utf-8")
    )


@dataclass
class PipelineConfig:
    """Settings of every stage; the sections mirror the TOML tables."""

    run_dir: str = "runs/pipeline"
    seed: int = 0
    corpus: dict[str, Any] = field(default_factory=dict)
    tokenizer: dict[str, Any] = field(default_factory=dict)
    model: dict[str, Any] = field(default_factory=dict)
    train: dict[str, Any] = field(default_factory=dict)
    sample: dict[str, Any] = field(default_factory=dict)
    train_text: str | None = None
    val_text: str | None = None
    tokenizer_dir: str | None = None
    train_tokens: str | None = None
    val_tokens: str | None = None
    workers: int | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PipelineConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise InputError(f"unknown pipeline setting(s): {', '.join(unknown)}")
        return cls(**data)

    def with_overrides(self, **overrides: Any) -> PipelineConfig:
        """A copy with top-level settings replaced and ``section.key`` settings merged in."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data = {k: dict(v) if isinstance(v, dict) else v for k, v in data.items()}
        for key, value in overrides.items():
            if value is None:
                continue
            section, _, name = key.partition(".")
            if name:
                data[section][name] = value
            else:
                data[key] = value
        return PipelineConfig.from_dict(data)


def prepare_corpus(config: PipelineConfig, data_dir: Path) -> tuple[Path, Path]:
    """Stage 1: the training and validation texts (generated stories unless given)."""
    from cs336_basics.runner.stories import write_story_corpus

    if config.train_text:
        train_text = Path(config.train_text)
        if not train_text.is_file():
            raise MissingInputError(f"training text not found: {train_text}")
        if not config.val_text:
            raise InputError("with train_text, also give val_text (a held-out text file)")
        val_text = Path(config.val_text)
        if not val_text.is_file():
            raise MissingInputError(f"validation text not found: {val_text}")
        return train_text, val_text
    if "train_bytes" not in config.corpus:
        raise InputError("this config generates no corpus; give --train-text and --val-text")
    train_text, val_text = data_dir / "train.txt", data_dir / "valid.txt"
    # Different seeds, so validation stories are not copies of training ones.
    write_story_corpus(train_text, int(config.corpus["train_bytes"]), seed=config.seed)
    write_story_corpus(val_text, int(config.corpus["val_bytes"]), seed=config.seed + 1_000_003)
    return train_text, val_text


def prepare_tokenizer(config: PipelineConfig, train_text: Path, tokenizer_dir: Path):
    """Stage 2: train BPE on the training text, or load the given tokenizer directory."""
    from cs336_basics.bpe import train_bpe
    from cs336_basics.tokenizer import Tokenizer

    special_tokens = list(config.tokenizer.get("special_tokens", ["<|endoftext|>"]))
    if config.tokenizer_dir:
        source = Path(config.tokenizer_dir)
        for name in ("vocab.json", "merges.txt"):
            if not (source / name).is_file():
                raise MissingInputError(f"tokenizer directory {source} has no {name}")
            shutil.copyfile(source / name, tokenizer_dir / name)
        tokenizer = Tokenizer.from_files(
            source / "vocab.json", source / "merges.txt", special_tokens
        )
    else:
        vocab, merges = train_bpe(
            train_text,
            int(config.tokenizer["vocab_size"]),
            special_tokens,
            num_workers=config.workers,
        )
        tokenizer = Tokenizer(vocab, merges, special_tokens)
        tokenizer.save(tokenizer_dir / "vocab.json", tokenizer_dir / "merges.txt")
    with atomic_writer(tokenizer_dir / "special_tokens.json") as handle:
        handle.write(json.dumps(special_tokens).encode())
    return tokenizer


def prepare_tokens(
    config: PipelineConfig, tokenizer, texts: tuple[Path, Path], data_dir: Path
) -> tuple[Path, Path]:
    """Stage 3: encode both splits into ``.npy`` arrays, or use the given arrays."""
    from cs336_basics.runner.encode_file import encode_file, with_compiled_merges

    if config.train_tokens or config.val_tokens:
        if not (config.train_tokens and config.val_tokens):
            raise InputError("give both train_tokens and val_tokens, or neither")
        return Path(config.train_tokens), Path(config.val_tokens)
    outputs = (data_dir / "train.npy", data_dir / "valid.npy")
    total_bytes = sum(Path(text).stat().st_size for text in texts)
    tokenizer = with_compiled_merges(tokenizer, total_bytes, config.workers)
    for text, output in zip(texts, outputs, strict=False):
        encode_file(tokenizer, text, output, num_workers=config.workers)
    return outputs


def check_user_inputs(config: PipelineConfig) -> None:
    """Fail before any work if a file the config names is missing or incomplete."""
    from cs336_basics.runner.commands.inputs import require_file, tokenizer_files

    given = {"train_text": "training text", "val_text": "validation text"}
    given |= {"train_tokens": "training token array", "val_tokens": "validation token array"}
    for name, what in given.items():
        if getattr(config, name):
            require_file(getattr(config, name), f"{what} (--{name.replace('_', '-')})")
    if config.tokenizer_dir:
        tokenizer_files(config.tokenizer_dir)
    # The model and training settings, checked now rather than after BPE and encoding.
    _train_config(config, int(config.tokenizer.get("vocab_size", 256)), ("-", "-"), False)


def run_pipeline(
    config: PipelineConfig, progress: bool = True, overwrite: bool = False
) -> dict[str, Any]:
    """Run every stage; return (and write to ``summary.json``) the run's headline numbers.

    A ``run_dir`` that already holds a training run is refused unless ``overwrite``.
    """
    import numpy as np

    from cs336_basics.run_folder import RunFolder

    check_user_inputs(config)
    run_dir = Path(config.run_dir)
    if not overwrite and RunFolder(run_dir).holds_run():
        raise OutputExistsError(
            f"{run_dir} already holds a pipeline run; pass --overwrite to replace it, or choose "
            "another --run-dir"
        )
    data_dir, tokenizer_dir = run_dir / "data", run_dir / "tokenizer"
    for directory in (data_dir, tokenizer_dir):
        directory.mkdir(parents=True, exist_ok=True)
    started, timings = time.perf_counter(), {}

    texts = _run_stage(
        timings, 1, "corpus", _corpus_source(config), prepare_corpus, config, data_dir
    )
    detail = config.tokenizer_dir or f"training BPE, vocab {config.tokenizer['vocab_size']}"
    tokenizer = _run_stage(
        timings, 2, "tokenizer", detail, prepare_tokenizer, config, texts[0], tokenizer_dir
    )
    detail = "using given token arrays" if config.train_tokens else "train and validation splits"
    token_paths = _run_stage(
        timings, 3, "encode", detail, prepare_tokens, config, tokenizer, texts, data_dir
    )
    num_tokens = [len(np.load(p, mmap_mode="r")) for p in token_paths]
    print(f"      {num_tokens[0]:,} training and {num_tokens[1]:,} validation tokens")

    train_config = _train_config(config, len(tokenizer.vocab), token_paths, progress)
    detail = (
        f"{_parameter_count(train_config.model):,} parameters, up to {train_config.max_steps} steps"
    )
    if train_config.max_seconds:
        detail += f" or {train_config.max_seconds:g}s"
    result = _run_stage(timings, 4, "train", detail, _train, train_config, overwrite)
    samples = []
    if result.checkpoint is not None and result.stopped != "interrupted":
        detail = f"{len(config.sample.get('prompts', ['']))} prompt(s)"
        samples = _run_stage(
            timings, 5, "sample", detail, _sample, config, train_config, result, tokenizer
        )
    summary = _summary(config, result, samples, num_tokens, len(tokenizer.vocab), train_config)
    summary["seconds"] = {**timings, "total": time.perf_counter() - started}
    with atomic_writer(run_dir / "summary.json") as handle:
        handle.write((json.dumps(summary, indent=2) + "\n").encode())
    return summary


def _run_stage(timings: dict[str, float], number: int, name: str, detail: str, work, *args):
    """Print the stage's headline, run ``work(*args)`` and record its seconds in ``timings``."""
    print(f"[{number}/5] {name}: {detail}", flush=True)
    started = time.perf_counter()
    result = work(*args)
    timings[name] = time.perf_counter() - started
    return result


def _corpus_source(config: PipelineConfig) -> str:
    if config.train_text:
        return config.train_text
    if "train_bytes" in config.corpus:
        return f"{config.corpus['train_bytes']:,} bytes of generated stories"
    return "(none given)"


def _train_config(config: PipelineConfig, vocab_size: int, token_paths, progress: bool):
    from cs336_basics.train_config import TrainConfig

    return TrainConfig.from_dict(
        {
            "seed": config.seed,
            **config.train,
            "model": {"vocab_size": vocab_size, **config.model},
            "out_dir": config.run_dir,
            "train_data": str(token_paths[0]),
            "val_data": str(token_paths[1]),
            "progress": progress and config.train.get("progress", True),
        }
    )


def _train(train_config, overwrite: bool):
    from cs336_basics.training import train

    return train(train_config, overwrite=overwrite)


def _sample(config: PipelineConfig, train_config, result, tokenizer) -> list[str]:
    """Stage 5: complete the configured prompts with the trained model."""
    from cs336_basics.checkpoint import model_from_checkpoint
    from cs336_basics.generation import complete_prompts

    device = train_config.device if train_config.device != "auto" else None
    samples = complete_prompts(
        model_from_checkpoint(result.checkpoint, device=device),
        tokenizer,
        list(config.sample.get("prompts", [""])),
        int(config.sample.get("max_new_tokens", 100)),
        float(config.sample.get("temperature", 0.8)),
        float(config.sample.get("top_p", 0.95)),
        config.seed,
        "<|endoftext|>",
    )
    with atomic_writer(Path(config.run_dir) / "samples.txt") as handle:
        text = "".join(f"--- sample {i + 1} ---\n{s}\n" for i, s in enumerate(samples))
        handle.write(text.encode())
    return samples


def _summary(config, result, samples, num_tokens, vocab_size, train_config) -> dict[str, Any]:
    first_val = next((r["loss"] for r in result.history if r["split"] == "val"), None)
    return {
        "run_dir": config.run_dir,
        "stopped": result.stopped,
        "failure": result.failure,
        "steps": result.step,
        "train_tokens": num_tokens[0],
        "val_tokens": num_tokens[1],
        "vocab_size": vocab_size,
        "parameters": _parameter_count(train_config.model),
        "final_train_loss": result.train_loss,
        "first_val_loss": first_val,
        "final_val_loss": result.val_loss,
        "tokens_per_second": result.tokens_per_second,
        "checkpoint": None if result.checkpoint is None else str(result.checkpoint),
        "loss_plot": None if result.plot is None else str(result.plot),
        "samples": samples,
    }


def _parameter_count(model_config) -> int:
    from cs336_basics.accounting import parameter_counts

    return sum(parameter_counts(model_config).values())


def print_summary(summary: dict[str, Any]) -> None:
    seconds = summary["seconds"]
    print(
        "\n".join(
            [
                "",
                f"run directory   {summary['run_dir']}",
                f"model           {summary['parameters']:,} parameters, vocab {summary['vocab_size']}",
                f"training        {summary['steps']} steps ({summary['stopped']}), "
                f"{summary['train_tokens']:,} training tokens",
                f"validation loss {summary['first_val_loss']:.3f} at the first evaluation -> "
                f"{summary['final_val_loss']:.3f} at the end"
                if summary["final_val_loss"] is not None
                else "validation loss (none)",
                f"time            {seconds['total']:.0f}s total ("
                + ", ".join(f"{k} {v:.1f}s" for k, v in seconds.items() if k != "total")
                + ")",
                f"checkpoint      {summary['checkpoint']}",
                f"loss plot       {summary['loss_plot']}",
                "",
            ]
        )
    )
    for index, text in enumerate(summary["samples"]):
        print(f"--- sample {index + 1} ---\n{text}\n")
