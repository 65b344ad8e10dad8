"""Cases with special tokens that are hard to keep whole: tokens holding spaces or newlines (where
an ordinary text could be cut), and one special token inside another at a non-zero offset
(``<|y|>`` inside ``<|x|><|y|>``, where searching for ``<|y|>`` alone cuts the longer one).

- BPE training on a file of several MB made mostly of such tokens: a trainer that cuts the file
  into chunks for parallel pre-tokenization must never cut inside a special token, or that
  token's bytes get counted (and merged) as text;
- ``encode``, and ``encode_iterable`` over the lines of a file (the assignment's usage), of texts
  with such tokens. Reading a file by lines cuts a special token that holds a newline, and
  chunks cut anywhere are beyond the assignment's contract: both are advice
  (``tests/test_tokenizer.py``), so a text holding such a token is encoded whole only.

Failures say when the output equals what a known mistake gives: merges made of bytes found only
inside special tokens, or the ids that special tokens encoded as text, or each line encoded on
its own, give (computed by the instructor, ``course/cases/truths``, and shipped with the
expected values).
"""

from __future__ import annotations

import io
import os
import tempfile
from pathlib import Path

from tests.cases.compare import equal_mismatch, first_failure
from tests.cases.core import Bundle, case
from tests.cases.tokenizers import (
    build_tokenizer,
    check_train_bpe,
    tokenizer_inputs,
    vocab_from_wire,
    vocab_to_wire,
)

NESTED = ["<|y|>", "<|x|><|y|>"]
SPACED = "<| a b c d e f g h i j k l m n o p q r s t u v |>"
LINE_BROKEN = "<|s\nt|>"
# From 54 of this unit's 70 offsets, the next space, newline or special-token start lies inside
# a special token: a trainer's chunk boundary placed there (if it may fall inside a special
# token) cuts one.
CHUNKED_UNIT = "xy" + SPACED + "xy<|x|><|y|>" + LINE_BROKEN
# 4.2 MB: files this big are cut into chunks by the reference trainer (one per CPU), and for 2 to
# 16 chunks the first evenly spaced target lands on one of those offsets.
CHUNKED_REPEAT = 60_001
# Once after the repeated unit: a number, whose 9 pairs of digits are each seen once. The merges
# asked for end among them, so the corpus never runs out of pairs (a trainer that does not stop
# then loses no_pairs_left's points, not these), while a pair from inside a cut special token,
# seen as often and made of greater bytes, comes before them.
CHUNKED_TAIL = "0123456789"


def chunked_text(inputs: Bundle) -> str:
    return inputs["unit"] * inputs["repeat"] + inputs["tail"]


def merges_from_special_text(merges: list, expected: Bundle) -> list[bytes]:
    """Merged tokens whose bytes occur in the corpus only inside special tokens (the expected
    values list them, ``inside_only``): evidence that special-token text was counted as text."""
    inside_only = set(expected.get("inside_only", []))
    tokens = ["".join(pair) for pair in merges]
    return [bytes.fromhex(token) for token in tokens if token in inside_only]


def check_chunked(outputs: Bundle, expected: Bundle, inputs: Bundle) -> str | None:
    message = check_train_bpe(outputs, expected, inputs)
    if not message or not isinstance(outputs.get("merges"), list):
        return message
    evidence = merges_from_special_text(outputs["merges"], expected)
    if evidence:
        example = f" (e.g. {evidence[0]!r})" if expected.get("reveal", True) else ""
        message += (
            f"\nhint: {len(evidence)} of your merges{example} are made of bytes "
            "that occur only inside special tokens: special-token text was counted as ordinary "
            "text. Split on the special tokens before pre-tokenizing, and if you cut the file "
            "into chunks, cut only where no special token spans the cut (a special token may "
            "hold spaces or newlines, or contain another special token)"
        )
    return message


@case(
    "train_bpe",
    "specials_in_chunks",
    check=check_chunked,
    public=lambda s: {
        "unit": CHUNKED_UNIT,
        "repeat": CHUNKED_REPEAT,
        "tail": CHUNKED_TAIL,
        # The merge "xy" outside the special tokens, then 4 of the tail's 9.
        "vocab_size": 256 + 4 + 1 + 4,
        "special_tokens": [*NESTED, SPACED, LINE_BROKEN],
    },
)
def train_bpe_in_chunks(adapters, inputs: Bundle) -> Bundle:
    """Train on ``unit`` repeated ``repeat`` times, then ``tail`` (a file of several MB)."""
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "corpus.txt"
        path.write_bytes(chunked_text(inputs).encode("utf-8"))
        vocab, merges = adapters.run_train_bpe(
            os.fspath(path), inputs["vocab_size"], list(inputs["special_tokens"])
        )
    return {
        "vocab": sorted(bytes(t).hex() for t in vocab.values()),
        "merges": [[bytes(a).hex(), bytes(b).hex()] for a, b in merges],
    }


# --- the tokenizer --------------------------------------------------------------------------


def with_specials(inputs: Bundle) -> Bundle:
    """The vocab extended by the special tokens (new ids after the last one)."""
    vocab = vocab_from_wire(inputs["vocab"])
    for token in inputs["special_tokens"]:
        vocab[len(vocab)] = token.encode("utf-8")
    return inputs | {"vocab": vocab_to_wire(vocab)}


def tricky_inputs(s) -> Bundle:
    texts = {
        "nested": "a<|x|><|y|>b<|y|><|x|><|x|><|y|><|y|> <|x|>< |y|>",
        "spaced": f"one {SPACED}two{SPACED}{SPACED}\n <| a b |> end ",
        "lines": f"first line\n{LINE_BROKEN}second{LINE_BROKEN}\n\n<|s\n|>t|>last",
    }
    return with_specials(tokenizer_inputs(s, texts, [*NESTED, SPACED, LINE_BROKEN]))


# The known mistakes whose ids ``expected["mistakes"]`` holds, by key: for the whole text, and
# for each way ``check_tricky`` feeds it in pieces (each piece encoded on its own).
MISTAKES = {
    "as_text": "special tokens are encoded as ordinary text: split the text on them first and "
    "give each its own id",
    "per_piece": "each line is encoded on its own, so a pre-token that spans a line break is "
    "split: keep the undecided tail of a piece (a partial pre-token) for the next one",
}


LINES = "encode_iterable over a file's lines"


def read_by_lines(text: str, special_tokens: list[str]) -> bool:
    """Whether ``text``'s lines are graded: not when a special token in it holds a newline."""
    return not any("\n" in token and token in text for token in special_tokens)


def pieces_of(text: str, special_tokens: list[str]) -> dict[str, list[str]]:
    """How each graded run feeds ``text``, by label: whole, and a file's lines."""
    runs = {"encode": [text]}
    if read_by_lines(text, special_tokens):
        runs[LINES] = io.StringIO(text, newline="").readlines()
    return runs


def run_outputs(outputs: Bundle, name: str, lines: bool) -> dict[str, object]:
    """The ids each run gave for text ``name``, by the labels of ``pieces_of``."""
    runs = {"encode": outputs["encode"].get(name)}
    return runs | ({LINES: outputs["lines"].get(name)} if lines else {})


def lost_tail_only(got, want: list[int]) -> bool:
    """Whether streamed ids are the right ones cut short: every special token streamed whole up to
    where the stream stopped, only its end lost (a final piece never flushed)."""
    return isinstance(got, list) and len(got) < len(want) and got == want[: len(got)]


def check_tricky(outputs: Bundle, expected: Bundle, inputs: Bundle) -> str | None:
    reveal = expected.get("reveal", True)
    # In name order: the grader's inputs come back from JSON with sorted keys, pytest's do not,
    # and both must report the same first failure.
    for name in sorted(inputs["texts"]):
        want, mistakes = expected["ids"][name], expected["mistakes"][name]
        lines = read_by_lines(inputs["texts"][name], inputs["special_tokens"])
        for label, got in run_outputs(outputs, name, lines).items():
            if label == LINES and lost_tail_only(got, want):
                continue  # a stream that stops early is the encode_iterable case's subject
            message = equal_mismatch(got, want, f"{label} ({name})", reveal)
            if message:
                wrong = {"as_text": mistakes["as_text"], "per_piece": mistakes["per_piece"][label]}
                hints = [MISTAKES[key] for key, ids in wrong.items() if ids == got]
                return message + "".join(f"\nhint: {h}" for h in hints[:1] if reveal)
    return first_failure(
        *(
            outputs["decoded"].get(name) != text
            and f"decode(encode({name})) does not give the text back"
            for name, text in sorted(inputs["texts"].items())
        )
    )


@case(
    "tokenizer",
    "tricky_special_tokens",
    check=check_tricky,
    public=tricky_inputs,
)
def encode_tricky(adapters, inputs: Bundle) -> Bundle:
    """Encode each text in one piece and, unless a special token in it holds a newline, line by
    line from a file."""
    tokenizer = build_tokenizer(adapters, inputs)
    texts = inputs["texts"]
    outputs: Bundle = {"encode": {}, "decoded": {}, "lines": {}}
    for name, text in texts.items():
        ids = [int(i) for i in tokenizer.encode(text)]
        outputs["encode"][name] = ids
        outputs["decoded"][name] = str(tokenizer.decode(ids))
        if not read_by_lines(text, inputs["special_tokens"]):
            continue
        with tempfile.TemporaryDirectory() as scratch:
            path = Path(scratch) / "text.txt"
            path.write_bytes(text.encode("utf-8"))
            with open(path, encoding="utf-8", newline="") as file:
                outputs["lines"][name] = [int(i) for i in tokenizer.encode_iterable(file)]
    return outputs
