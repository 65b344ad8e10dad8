"""The hidden cases' inputs: other seeds, shapes and hyperparameters than the shipped fixtures.

``HIDDEN_INSTANCES[(component, case name)]`` maps each hidden instance's name to a function
building its inputs (a case's id is then ``<component>-hidden-<name>-<instance>``).
Instructor-only (``course/`` never ships); ``course/cases/hidden_cases.py`` writes them out.
"""

from __future__ import annotations

import functools
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from cs336_basics.bpe import train_bpe
from cs336_basics.runner.stories import END_OF_TEXT, SEPARATOR, generate_stories
from tests.cases.core import Bundle
from tests.cases.draws import generator, integers, normal, permutation, uniform
from tests.cases.optim import adamw_problem, clipping_problem, schedule
from tests.cases.shipped import Shipped
from tests.cases.special_tokens import CHUNKED_TAIL, with_specials
from tests.cases.tokenizers import merges_to_wire, vocab_to_wire
from tests.cases.training import batch_problem, checkpoint_problem, loss_problem

SEED = 7_000_000


def rng(offset: int) -> np.random.Generator:
    # NumPy's generator, not torch's: the same draws on every CPU (see tests/cases/draws.py).
    return generator(SEED + offset)


def randn(g: np.random.Generator, *shape: int, scale: float = 1.0) -> torch.Tensor:
    return normal(g, shape) * scale


def linear_weight(g: np.random.Generator, d_out: int, d_in: int) -> torch.Tensor:
    return randn(g, d_out, d_in, scale=(2 / (d_in + d_out)) ** 0.5)


def gain(g: np.random.Generator, d: int) -> torch.Tensor:
    return 1.0 + randn(g, d, scale=0.2)


def block_weights(g: np.random.Generator, d_model: int, d_ff: int, prefix: str = "") -> Bundle:
    w = {
        f"{prefix}attn.{n}_proj.weight": linear_weight(g, d_model, d_model)
        for n in ("q", "k", "v", "output")
    }
    w[f"{prefix}ln1.weight"], w[f"{prefix}ln2.weight"] = gain(g, d_model), gain(g, d_model)
    w[f"{prefix}ffn.w1.weight"] = linear_weight(g, d_ff, d_model)
    w[f"{prefix}ffn.w2.weight"] = linear_weight(g, d_model, d_ff)
    w[f"{prefix}ffn.w3.weight"] = linear_weight(g, d_ff, d_model)
    return w


def layers(offset: int) -> dict[str, Callable[[], Bundle]]:
    """Hidden instances of the single-layer cases, keyed "<component>/<case>/<instance>"."""
    g = lambda k: rng(offset + k)  # noqa: E731
    return {
        "linear/basic/wide": lambda: {
            "weight": linear_weight(g(1), 24, 40),
            "x": randn(g(2), 3, 5, 40),
        },
        "linear/basic/four_dims": lambda: {
            "weight": linear_weight(g(3), 8, 16),
            "x": randn(g(4), 2, 2, 3, 16),
        },
        "embedding/basic/small": lambda: {
            "weight": randn(g(5), 300, 24),
            "ids": integers(g(6), 0, 300, (3, 9)),
        },
        "embedding/out_of_range/small": lambda: {
            "weight": randn(g(7), 100, 16),
            "ids": integers(g(8), 0, 100, (2, 5)),
            "bad_ids": [100, 5000],
        },
        "rmsnorm/basic/scaled": lambda: {
            "weight": gain(g(9), 40),
            "x": randn(g(10), 2, 7, 40, scale=3.0),
            "eps": 1e-6,
        },
        "rmsnorm/basic/small": lambda: {
            "weight": gain(g(11), 16),
            "x": randn(g(12), 5, 16, scale=0.1),
            "eps": 1e-5,
        },
        "rmsnorm/float16/wide": lambda: {
            "weight": gain(g(25), 40).half(),
            "x": randn(g(26), 3, 5, 40, scale=1000.0).half(),
            "eps": 1e-6,
        },
        "silu/basic/wide": lambda: {"x": randn(g(13), 3, 50, scale=4.0)},
        "silu/extremes/other": lambda: {
            "x": torch.tensor([-500.0, -30.0, -0.5, 0.25, 30.0, 500.0, 3e4])
        },
        "swiglu/basic/other": lambda: {
            "w1": linear_weight(g(14), 80, 32),
            "w2": linear_weight(g(15), 32, 80),
            "w3": linear_weight(g(16), 80, 32),
            "x": randn(g(17), 2, 6, 32),
        },
        "swiglu/basic/four_dims": lambda: {
            "w1": linear_weight(g(21), 56, 24),
            "w2": linear_weight(g(22), 24, 56),
            "w3": linear_weight(g(23), 56, 24),
            "x": randn(g(24), 2, 2, 3, 24),
        },
        "softmax/basic/dim1": lambda: {"x": randn(g(18), 5, 7, 30, scale=5.0), "dim": 1},
        "softmax/basic/dim0": lambda: {"x": randn(g(19), 6, 4, scale=3.0), "dim": 0},
        "softmax/large_inputs/other": lambda: {
            "x": randn(g(20), 4, 5, scale=1500.0),
            "dims": [0, 1],
        },
    }


def attention_mask(g: np.random.Generator, queries: int, keys: int) -> torch.Tensor:
    mask = uniform(g, (queries, keys)) < 0.5
    mask[:, 0] = True
    return mask


def changed_after(x: torch.Tensor, t: int, g: np.random.Generator) -> torch.Tensor:
    changed = x.clone()
    changed[:, t + 1 :] = randn(g, *changed[:, t + 1 :].shape)
    return changed


def attention_case(offset: int, d_model: int, heads: int, seq: int, theta: float | None) -> Bundle:
    g = rng(offset)
    x = randn(g, 2, seq, d_model)
    inputs = {f"{n}_proj": linear_weight(g, d_model, d_model) for n in ("q", "k", "v", "output")}
    inputs |= {"x": x, "x_changed": changed_after(x, seq // 2, g), "num_heads": heads}
    if theta is not None:
        inputs |= {"theta": theta, "max_seq_len": seq + 8}
    return inputs


def rope_case(offset: int, batch: int, heads: int | None, seq: int, d_k: int) -> Bundle:
    g, max_seq_len = rng(offset), 3 * seq
    x = randn(g, batch, seq, d_k)
    positions = torch.stack([permutation(g, max_seq_len)[:seq].sort().values for _ in range(batch)])
    inputs = {"x": x, "positions": positions, "theta": 500.0, "max_seq_len": max_seq_len}
    if heads is not None:
        inputs |= {
            "x": x[:, None].expand(-1, heads, -1, -1).contiguous(),
            "positions": positions[:, None],
            "heads": heads,
        }
    return inputs


def lm_case(offset: int, length: int, prefixes: list[int]) -> Bundle:
    g = rng(offset)
    config = {
        "vocab_size": 97,
        "context_length": 20,
        "d_model": 32,
        "num_layers": 2,
        "num_heads": 2,
        "d_ff": 64,
        "rope_theta": 10000.0,
    }
    weights = {"token_embeddings.weight": randn(g, 97, 32)}
    for layer in range(2):
        weights |= block_weights(g, 32, 64, prefix=f"layers.{layer}.")
    weights |= {"ln_final.weight": gain(g, 32), "lm_head.weight": linear_weight(g, 97, 32)}
    ids = integers(g, 0, 97, (2, length))
    return {**{f"w.{k}": v for k, v in weights.items()}, **config, "ids": ids, "prefixes": prefixes}


def block_case(offset: int, d_model: int, heads: int, d_ff: int, seq: int, context: int) -> Bundle:
    g = rng(offset)
    config = {"d_model": d_model, "num_heads": heads, "d_ff": d_ff, "context_length": context}
    weights = {f"w.{k}": v for k, v in block_weights(g, d_model, d_ff).items()}
    return {**weights, **config, "rope_theta": 1000.0, "x": randn(g, 2, seq, d_model)}


def model(offset: int) -> dict[str, Callable[[], Bundle]]:
    def sdpa(k: int, masked: bool) -> Bundle:
        g = rng(offset + k)
        shapes = {"q": (2, 3, 10, 8), "k": (2, 3, 14, 8), "v": (2, 3, 14, 12)}
        inputs = {n: randn(g, *shape) for n, shape in shapes.items()}
        return inputs | ({"mask": attention_mask(g, 10, 14)} if masked else {})

    return {
        "scaled_dot_product_attention/masked/heads": lambda: sdpa(1, True),
        "scaled_dot_product_attention/unmasked_extra_dims/heads": lambda: sdpa(2, False),
        "multihead_self_attention/causal/three_heads": lambda: attention_case(
            offset + 3, 48, 3, 10, None
        ),
        "multihead_self_attention/rope_causal/two_heads": lambda: attention_case(
            offset + 4, 32, 2, 12, 500.0
        ),
        "rope/basic/d32": lambda: rope_case(offset + 5, 3, None, 10, 32),
        "rope/heads/four": lambda: rope_case(offset + 6, 2, 4, 8, 16),
        "transformer_block/basic/d48": lambda: block_case(offset + 7, 48, 4, 96, 12, 12),
        "transformer_block/basic/short_seq": lambda: block_case(offset + 10, 32, 2, 80, 7, 16),
        "transformer_lm/prefixes/small": lambda: lm_case(offset + 8, 20, [3, 11]),
        "transformer_lm/truncated/small": lambda: lm_case(offset + 9, 6, []),
    }


def training() -> dict[str, Callable[[], Bundle]]:
    s = SEED % 1000
    return {
        "cross_entropy/basic/wide": lambda: loss_problem(s + 1, (16, 11)),
        "cross_entropy/leading_dims/three": lambda: loss_problem(s + 2, (3, 4, 9)),
        "cross_entropy/large_logits/huge": lambda: loss_problem(s + 3, (5, 8), scale=3000.0),
        "cross_entropy/gradient/wide": lambda: loss_problem(s + 4, (6, 10)),
        "adamw/formula/three_params": lambda: (
            adamw_problem(s + 5, [(5,), (3, 3), (2,)], 25)
            | {"defaults": {"lr": 0.02, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1}}
        ),
        "adamw/param_groups/decayed_and_not": lambda: (
            adamw_problem(s + 6, [(4, 2), (3,)], 15)
            | {"group_of": [1, 0], "groups": [{"weight_decay": 0.0}, {"lr": 0.1}]}
        ),
        "cosine_schedule/handout/long": lambda: schedule(3e-3, 3e-4, 10, 50, list(range(61))),
        "cosine_schedule/no_warmup/sparse": lambda: schedule(
            0.5, 0.05, 3, 30, [0, 1, 2, 3, 4, 15, 29, 30, 31, 100]
        ),
        "gradient_clipping/large_norm/two": lambda: (
            clipping_problem(s + 7, 20.0, [3.0], [], shapes=((6,), (4, 3))) | {"container": "list"}
        ),
        # As small as the public instance's: a norm of about 5e-3, where the 1e-6 added to the
        # norm and one added under the square root differ by more than the tolerance.
        "gradient_clipping/small_norm/tiny": lambda: (
            clipping_problem(s + 8, 1e-3, [5.0, 1e-3], []) | {"container": "tuple"}
        ),
        "gradient_clipping/missing_grad/two_missing": lambda: (
            clipping_problem(s + 9, 4.0, [0.5], [0, 2], shapes=((2, 3), (4,), (3,), (5, 1)))
            | {"container": "list"}
        ),
        "gradient_clipping/generator/three": lambda: (
            clipping_problem(s + 14, 6.0, [2.5], [1], shapes=((3, 2), (5,), (2,)))
            | {"container": "generator"}
        ),
        "get_batch/windows/longer": lambda: batch_problem(s + 10, 55, 8, 9, 150),
        "get_batch/one_window/nine": lambda: batch_problem(s + 11, 9, 4, 8, 3),
        "checkpoint/path/later": lambda: checkpoint_problem(s + 12, 5, 2, "path"),
        "checkpoint/bytesio/early": lambda: checkpoint_problem(s + 13, 1, 4, "bytesio"),
    }


@functools.cache
def hidden_tokenizer() -> tuple[dict, list]:
    """A 600-token BPE tokenizer trained (by the reference; these are only inputs) on stories
    and samples the handout never ships."""
    text = SEPARATOR.join([generate_stories(60_000, seed=SEED % 97), *Shipped().samples.values()])
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "train.txt"
        path.write_bytes(text.encode("utf-8"))
        return train_bpe(path, 600, [END_OF_TEXT], num_workers=1)


HIDDEN_TEXT = (
    "Ünïcödé  tabs\tand\r\nnewlines; numbers 1234567 and 3.14, it's we'll they've —"
    f" emoji 🙂🙃 and 日本語のテキスト{END_OF_TEXT}After the end.   \n\n  trailing spaces   "
)


def tokenizer_inputs(texts: dict[str, str], specials: list[str] | None = (END_OF_TEXT,)) -> Bundle:
    vocab, merges = hidden_tokenizer()
    return {
        "vocab": vocab_to_wire(vocab),
        "merges": merges_to_wire(merges),
        "special_tokens": None if specials is None else list(specials),
        "texts": texts,
    }


def malformed() -> Bundle:
    inputs = tokenizer_inputs({})
    byte_id = {bytes.fromhex(t): int(i) for i, t in inputs["vocab"].items()}
    sequences = [
        [byte_id[b"\xf0"], byte_id[b"\x9f"], byte_id[b"b"]],
        [byte_id[b"\xc3"]],
        [byte_id[b"\x80"], byte_id[b"z"]],
    ]
    return inputs | {"sequences": sequences}


def tokenizers() -> dict[str, Callable[[], Bundle]]:
    stories = generate_stories(20_000, seed=SEED % 89)
    words = ["hug"] * 10 + ["pug"] * 5 + ["pun"] * 12 + ["bun"] * 4 + ["hugs"] * 5
    return {
        # The corpus holds 7 merges: 6 are asked for here, and more than 7 in no_pairs_left,
        # so a trainer that does not stop when no pair is left loses that case's points only.
        "train_bpe/handout_example/hugs": lambda: {
            "text": END_OF_TEXT.join(words),
            "vocab_size": 263,
            "special_tokens": [END_OF_TEXT],
        },
        "train_bpe/no_pairs_left/hugs": lambda: {
            "text": END_OF_TEXT.join(words),
            "vocab_size": 300,
            "special_tokens": [END_OF_TEXT],
        },
        "train_bpe/stories/other": lambda: {
            "text": stories[:7000],
            "vocab_size": 420,
            "special_tokens": [END_OF_TEXT],
        },
        "train_bpe/samples/mixed": lambda: {
            "text": HIDDEN_TEXT * 3,
            "vocab_size": 300,
            "special_tokens": [END_OF_TEXT],
        },
        "train_bpe/samples/two_specials": lambda: {
            # Stories cut by a second special token too: no merge may cross either.
            "text": "<|pad|>".join(stories[3000:6000].split(" the ")),
            "vocab_size": 360,
            "special_tokens": ["<|pad|>", END_OF_TEXT],
        },
        "tokenizer/samples/hidden": lambda: tokenizer_inputs(
            {"mixed": HIDDEN_TEXT, "story": stories[:3000]}
        ),
        "tokenizer/stories/long": lambda: tokenizer_inputs({"stories": stories}),
        "tokenizer/no_special_tokens/hidden": lambda: tokenizer_inputs(
            {"mixed": HIDDEN_TEXT}, None
        ),
        "tokenizer/encode_iterable/hidden": lambda: tokenizer_inputs(
            {"mixed": HIDDEN_TEXT, "story": stories[:2000]}
        ),
        "tokenizer/overlapping_specials/short": lambda: tokenizer_inputs(
            {"mixed": "a<s><s><s>b<s>"}, ["<s>", "<s><s>"]
        ),
        "tokenizer/decode_malformed/hidden": malformed,
    }


def special_tokens() -> dict[str, Callable[[], Bundle]]:
    """Other hard-to-keep special tokens: nested at another offset, holding tabs and newlines."""
    spaced = "<<< one two\tthree four five six seven eight nine ten >>>"
    nested = ["[B]", "[A][B]", "[C][A][B]"]
    unit = "pq" + spaced + "pq[C][A][B]rs[A][B]\n<\n\n>"
    specials = [*nested, spaced, "<\n\n>"]
    texts = {
        "nested": "z[C][A][B][A][B] [B][A] [C][A][B][B]\n[C][A]",
        "spaced": f"word {spaced}{spaced} <<< one two >>>\nend",
        "lines": "x\n<\n\n>y<\n\n>\n<\n>\n\n>",
    }
    return {
        "train_bpe/specials_in_chunks/other": lambda: {
            "unit": unit,
            "repeat": 4_400_000 // len(unit) + 13,
            "tail": CHUNKED_TAIL,
            # The merges "pq" and "rs" outside the special tokens, then 4 of the tail's 9.
            "vocab_size": 256 + len(specials) + 2 + 4,
            "special_tokens": specials,
        },
        "tokenizer/tricky_special_tokens/other": lambda: with_specials(
            tokenizer_inputs(texts, specials)
        ),
    }


def collect() -> dict[tuple[str, str], dict[str, Callable[[], Bundle]]]:
    table: dict[tuple[str, str], dict[str, Callable[[], Bundle]]] = {}
    for key, make in {
        **layers(100),
        **model(200),
        **training(),
        **tokenizers(),
        **special_tokens(),
    }.items():
        component, name, instance = key.split("/")
        table.setdefault((component, name), {})[instance] = make
    return table


HIDDEN_INSTANCES = collect()
