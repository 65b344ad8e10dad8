"""Cases for BPE training and the tokenizer. Their public expected values ship in
``fixtures/expected`` (made by the instructor with a naive trainer and tiktoken).

Bytes travel as hex strings: a vocab is ``{"<id>": "<hex>"}``, merges ``[["<hex>", "<hex>"]]``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from tests.cases.compare import equal_mismatch, first_failure
from tests.cases.core import Bundle, case
from tests.cases.shipped import END_OF_TEXT
from tests.cases.tokenizer_diff import (
    bytes_difference,
    decode_difference,
    encode_difference,
    text_difference,
)
from tests.hints import diagnosis_lines


def vocab_to_wire(vocab: dict[int, bytes]) -> dict[str, str]:
    return {str(i): token.hex() for i, token in sorted(vocab.items())}


def vocab_from_wire(wire: dict[str, str]) -> dict[int, bytes]:
    return {int(i): bytes.fromhex(token) for i, token in wire.items()}


def merges_to_wire(merges) -> list[list[str]]:
    return [[a.hex(), b.hex()] for a, b in merges]


def merges_from_wire(wire: list[list[str]]) -> list[tuple[bytes, bytes]]:
    return [(bytes.fromhex(a), bytes.fromhex(b)) for a, b in wire]


# --- BPE training ---------------------------------------------------------------------------


HANDOUT_CORPUS = END_OF_TEXT.join(["low"] * 5 + ["lower"] * 2 + ["widest"] * 3 + ["newest"] * 6)


def check_train_bpe(outputs: Bundle, expected: Bundle, inputs: Bundle) -> str | None:
    """Merges in order and the set of vocabulary tokens (not their ids) must match."""
    reveal = expected.get("reveal", True)
    merges, vocab = outputs.get("merges"), outputs.get("vocab")
    if not isinstance(vocab, list) or not isinstance(merges, list):
        return "vocab and merges: missing from the outputs"
    ours = {bytes.fromhex(t) for t in vocab}
    theirs = {bytes.fromhex(t) for t in expected["vocab"].values()}
    difference = sorted(ours ^ theirs)[:5]
    merge_problem = equal_mismatch(merges, expected["merges"], "merges (as hex byte pairs)", reveal)
    return first_failure(
        merge_problem,
        len(vocab) != len(expected["vocab"])
        and f"vocab has {len(vocab)} entries, expected {len(expected['vocab'])}",
        difference and "vocab tokens differ" + (f", e.g. {difference}" if reveal else ""),
    )


@case(
    "train_bpe",
    "handout_example",
    check=check_train_bpe,
    public=lambda s: {
        # The handout's corpus; the special token makes every word one pre-token. It holds 12
        # merges, and its 6 are asked for (running out of pairs is no_pairs_left's subject).
        "text": HANDOUT_CORPUS,
        "vocab_size": 263,
        "special_tokens": [END_OF_TEXT],
    },
)
def train_bpe(adapters, inputs: Bundle) -> Bundle:
    """Train on ``text`` written to a file; report the merges and the vocabulary's tokens."""
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "corpus.txt"
        path.write_bytes(inputs["text"].encode("utf-8"))
        vocab, merges = adapters.run_train_bpe(
            os.fspath(path), inputs["vocab_size"], list(inputs["special_tokens"])
        )
    return {
        "vocab": sorted(bytes(t).hex() for t in vocab.values()),
        "merges": [[bytes(a).hex(), bytes(b).hex()] for a, b in merges],
    }


case(
    "train_bpe",
    "no_pairs_left",
    check=check_train_bpe,
    # More merges asked for than the corpus holds (12): the trainer stops when no pair is left.
    public=lambda s: {"text": HANDOUT_CORPUS, "vocab_size": 300, "special_tokens": [END_OF_TEXT]},
)(train_bpe.call)
case(
    "train_bpe",
    "stories",
    check=check_train_bpe,
    public=lambda s: {"text": s.corpus(6000), "vocab_size": 400, "special_tokens": [END_OF_TEXT]},
)(train_bpe.call)
case(
    "train_bpe",
    "samples",
    check=check_train_bpe,
    public=lambda s: {
        "text": END_OF_TEXT.join(s.samples.values()),
        "vocab_size": 330,
        "special_tokens": [END_OF_TEXT, "<|pad|>"],
    },
)(train_bpe.call)


# --- the tokenizer --------------------------------------------------------------------------


def tokenizer_inputs(
    s, texts: dict[str, str], specials: list[str] | None = (END_OF_TEXT,)
) -> Bundle:
    vocab, merges = s.vocab_and_merges
    return {
        "vocab": vocab_to_wire(vocab),
        "merges": merges_to_wire(merges),
        "special_tokens": None if specials is None else list(specials),
        "texts": texts,
    }


def check_encode(outputs: Bundle, expected: Bundle, inputs: Bundle) -> str | None:
    reveal = expected.get("reveal", True)
    # In name order, as the grader's inputs (JSON, sorted keys) have them: the same first failure.
    for name, text in sorted(inputs["texts"].items()):
        got, want = outputs["ids"].get(name), expected["ids"][name]
        mismatch = equal_mismatch(got, want, f"encode({name})", reveal)
        if mismatch:
            vocab, merges = vocab_and_merges(inputs)
            where = reveal and (
                encode_difference(got, want, vocab, merges)
                or bytes_difference(got, text.encode("utf-8"), vocab)
            )
            return mismatch + diagnosis_lines([where], "  ")
        decoded = outputs["decoded"].get(name)
        if decoded != text:
            where = reveal and text_difference(decoded, text, f"decode(encode({name}))")
            return f"decode(encode({name})) does not give the text back" + diagnosis_lines(
                [where], "  "
            )
    return None


def vocab_and_merges(inputs: Bundle) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    vocab = vocab_from_wire(inputs["vocab"])
    for token in inputs.get("special_tokens") or []:
        if token.encode("utf-8") not in vocab.values():
            vocab[len(vocab)] = token.encode("utf-8")
    return vocab, merges_from_wire(inputs["merges"])


def build_tokenizer(adapters, inputs: Bundle):
    specials = inputs["special_tokens"]
    vocab, merges = vocab_from_wire(inputs["vocab"]), merges_from_wire(inputs["merges"])
    if specials is None:
        return adapters.get_tokenizer(vocab, merges)
    return adapters.get_tokenizer(vocab, merges, list(specials))


def as_ids(ids) -> list[int]:
    return [int(i) for i in ids]


@case(
    "tokenizer",
    "samples",
    check=check_encode,
    public=lambda s: tokenizer_inputs(s, s.samples),
)
def encode_texts(adapters, inputs: Bundle) -> Bundle:
    """Encode each text, and decode the ids back."""
    tokenizer = build_tokenizer(adapters, inputs)
    ids = {name: as_ids(tokenizer.encode(text)) for name, text in inputs["texts"].items()}
    return {"ids": ids, "decoded": {name: str(tokenizer.decode(i)) for name, i in ids.items()}}


case(
    "tokenizer",
    "stories",
    check=check_encode,
    public=lambda s: tokenizer_inputs(s, {"stories": s.corpus(20_000)}),
)(encode_texts.call)
case(
    "tokenizer",
    "no_special_tokens",
    check=check_encode,
    public=lambda s: tokenizer_inputs(
        s, {"special_tokens.txt": s.samples["special_tokens.txt"]}, None
    ),
)(encode_texts.call)


def check_iterable(outputs: Bundle, expected: Bundle, inputs: Bundle) -> str | None:
    """Fed a file's lines, lazily or as a list, encode_iterable gives encode's ids of the file."""
    reveal = expected.get("reveal", True)
    for label in ("file", "lines"):
        got, want = outputs.get(label), expected["ids"]
        mismatch = equal_mismatch(got, want, f"encode_iterable({label})", reveal)
        if mismatch:
            vocab, merges = vocab_and_merges(inputs)
            text = "".join(inputs["texts"].values()).encode("utf-8")
            where = reveal and (
                bytes_difference(got, text, vocab) or encode_difference(got, want, vocab, merges)
            )
            return mismatch + diagnosis_lines([where], "  ")
    return None


@case(
    "tokenizer",
    "encode_iterable",
    check=check_iterable,
    public=lambda s: tokenizer_inputs(s, s.samples),
)
def encode_iterable(adapters, inputs: Bundle) -> Bundle:
    """The texts, joined into one file, fed to encode_iterable as the assignment does: an open
    file handle (its lines, read lazily), and a list of the same lines."""
    tokenizer = build_tokenizer(adapters, inputs)
    text = "".join(inputs["texts"].values())
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "text.txt"
        path.write_bytes(text.encode("utf-8"))
        # newline="" hands over the lines as written (\r\n stays), so the file holds `text`.
        with open(path, encoding="utf-8", newline="") as file:
            from_file = as_ids(tokenizer.encode_iterable(file))
    lines = text.splitlines(keepends=True)
    return {"file": from_file, "lines": as_ids(tokenizer.encode_iterable(lines))}


def check_overlapping(outputs: Bundle, expected: Bundle, inputs: Bundle) -> str | None:
    """With specials E and EE, "EE" is one token, "EEE" is [EE, E], and text round-trips."""
    single, double, triple = outputs["single"], outputs["double"], outputs["triple"]
    text, round_trip = inputs["texts"]["mixed"], outputs["round_trip"]
    reveal = expected.get("reveal", True)
    where = reveal and text_difference(round_trip, text, "decode(encode(text))")
    return first_failure(
        (len(single) != 1 or len(double) != 1 or single == double)
        and "each special token must encode to its own single id\n  hint: special tokens E and "
        f"EE must each be one id of its own; yours encodes E as {single}, EE as {double}",
        triple != double + single
        and "overlapping special tokens must match longest first: EEE is [EE, E]\n  hint: the "
        f"longest special token matches first: EEE must be [EE, E] = {double + single}; yours "
        f"gives {triple}",
        round_trip != text
        and "decode(encode(text)) does not give the text back"
        + (f"\n  hint: {where}" if where else ""),
    )


@case(
    "tokenizer",
    "overlapping_specials",
    check=check_overlapping,
    public=lambda s: tokenizer_inputs(
        s, {"mixed": f"x{END_OF_TEXT * 3}y"}, [END_OF_TEXT, END_OF_TEXT * 2]
    ),
)
def overlapping(adapters, inputs: Bundle) -> Bundle:
    """Special tokens E and EE: encode E, EE, EEE, and round-trip a text holding them."""
    tokenizer = build_tokenizer(adapters, inputs)
    single, double = inputs["special_tokens"]
    return {
        "single": as_ids(tokenizer.encode(single)),
        "double": as_ids(tokenizer.encode(double)),
        "triple": as_ids(tokenizer.encode(single * 3)),
        "round_trip": str(tokenizer.decode(tokenizer.encode(inputs["texts"]["mixed"]))),
    }


def check_malformed(outputs: Bundle, expected: Bundle, inputs: Bundle) -> str | None:
    reveal = expected.get("reveal", True)
    decoded = outputs.get("decoded")
    mismatch = equal_mismatch(decoded, expected["decoded"], "decoded texts", reveal)
    if not mismatch or not reveal or not isinstance(decoded, list):
        return mismatch
    vocab = vocab_from_wire(inputs["vocab"])
    found = (
        decode_difference(got, ids, vocab)
        for got, ids in zip(decoded, inputs["sequences"], strict=False)
    )
    return mismatch + diagnosis_lines([next((line for line in found if line), "")], "  ")


def malformed_inputs(s) -> Bundle:
    inputs = tokenizer_inputs(s, {})
    byte_id = {bytes.fromhex(t): int(i) for i, t in inputs["vocab"].items()}
    # The first two bytes of "€" (e2 82 ac) then "a"; and a lone 0xff.
    return inputs | {
        "sequences": [[byte_id[b"\xe2"], byte_id[b"\x82"], byte_id[b"a"]], [byte_id[b"\xff"]]]
    }


@case(
    "tokenizer",
    "decode_malformed",
    check=check_malformed,
    public=malformed_inputs,
)
def decode_malformed(adapters, inputs: Bundle) -> Bundle:
    """Ids whose bytes are not valid UTF-8 decode with U+FFFD replacements."""
    tokenizer = build_tokenizer(adapters, inputs)
    return {"decoded": [str(tokenizer.decode(ids)) for ids in inputs["sequences"]]}
