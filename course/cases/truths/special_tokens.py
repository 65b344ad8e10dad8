"""The special-token cases' references (``tests/cases/special_tokens.py``): the naive trainer on
the repeated unit and the byte strings found only inside its special tokens, tiktoken on each
text, and the ids of the mistakes the case's hints name (special tokens encoded as text; each
piece of a stream encoded on its own)."""

from __future__ import annotations

import regex

from course.cases.truths.tokenizers import naive_train_bpe, tiktoken_of
from tests.cases.core import Bundle
from tests.cases.special_tokens import chunked_text, pieces_of
from tests.cases.tokenizers import merges_to_wire, vocab_from_wire, vocab_to_wire


def inside_only(unit: str, special_tokens: list[str]) -> list[str]:
    """Every byte string (hex) that occurs inside a special token but nowhere in the ordinary
    text of ``unit`` repeated (twice covers the text across a repetition's seam)."""
    ordered = sorted(special_tokens, key=len, reverse=True)
    pattern = "|".join(regex.escape(t) for t in ordered)
    ordinary = [piece.encode("utf-8") for piece in regex.split(pattern, unit * 2)]
    found = set()
    for token in (t.encode("utf-8") for t in special_tokens):
        for start in range(len(token)):
            for end in range(start + 2, len(token) + 1):
                if not any(token[start:end] in piece for piece in ordinary):
                    found.add(token[start:end].hex())
    return sorted(found)


def chunked_expected(inputs: Bundle) -> Bundle:
    text = chunked_text(inputs)
    counts: list[int] = []
    vocab, merges = naive_train_bpe(
        text, inputs["vocab_size"], inputs["special_tokens"], counts=counts
    )
    return {
        "vocab": vocab_to_wire(vocab),
        "merges": merges_to_wire(merges),
        "merge_counts": counts,
        "inside_only": inside_only(inputs["unit"], inputs["special_tokens"]),
    }


def tricky_expected(inputs: Bundle) -> Bundle:
    vocab = vocab_from_wire(inputs["vocab"])
    right, as_text = tiktoken_of(vocab, inputs["special_tokens"]), tiktoken_of(vocab, [])
    ids, mistakes = {}, {}
    for name, text in inputs["texts"].items():
        ids[name] = right.encode(text, allowed_special="all")
        mistakes[name] = {
            "as_text": as_text.encode(text, disallowed_special=()),
            "per_piece": {
                label: [i for piece in pieces for i in right.encode(piece, allowed_special="all")]
                for label, pieces in pieces_of(text, inputs["special_tokens"]).items()
            },
        }
    return {"ids": ids, "mistakes": mistakes}


TRUTHS = {
    ("train_bpe", "specials_in_chunks"): chunked_expected,
    ("tokenizer", "tricky_special_tokens"): tricky_expected,
}
