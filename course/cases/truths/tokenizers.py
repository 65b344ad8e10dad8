"""The tokenizer cases' references: the handout's BPE training done naively (every pair recounted
at every step), and tiktoken built offline from a case's vocabulary."""

from __future__ import annotations

from collections import Counter

import regex
import tiktoken

from tests.cases.core import Bundle
from tests.cases.tokenizers import merges_to_wire, vocab_from_wire, vocab_to_wire

# Written out here rather than imported, so a wrong pattern in the code under test is caught.
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def naive_train_bpe(
    text: str,
    vocab_size: int,
    special_tokens: list[str],
    mistake: str | None = None,
    counts: list[int] | None = None,
):
    """The handout's algorithm, slowly: recount every pair over every pre-token at each step.

    ``mistake`` reproduces a common error, for hints: "ties_to_smaller" (ties go to the smaller
    pair) or "no_special_split" (pre-tokenize across special tokens). ``counts``, when given,
    gets each merge's count at its step (the evidence the shipped diagnoses read for ties)."""
    vocab = {i: bytes([i]) for i in range(256)}
    for token in special_tokens:
        vocab[len(vocab)] = token.encode("utf-8")
    pieces = [text]
    if special_tokens and mistake != "no_special_split":
        alternatives = sorted(special_tokens, key=len, reverse=True)
        pieces = regex.split("|".join(regex.escape(t) for t in alternatives), text)
    words: Counter[tuple[bytes, ...]] = Counter()
    for piece in pieces:
        for pretoken in regex.findall(GPT2_PATTERN, piece):
            words[tuple(bytes([b]) for b in pretoken.encode("utf-8"))] += 1
    merges = []
    while len(vocab) < vocab_size:
        pairs: Counter[tuple[bytes, bytes]] = Counter()
        for word, count in words.items():
            for pair in zip(word, word[1:], strict=False):
                pairs[pair] += count
        if not pairs:
            break
        if mistake == "ties_to_smaller":
            best = min(pairs, key=lambda pair: (-pairs[pair], pair))
        else:
            best = max(pairs, key=lambda pair: (pairs[pair], pair))
        merges.append(best)
        if counts is not None:
            counts.append(pairs[best])
        vocab[len(vocab)] = best[0] + best[1]
        words = Counter({merge_word(word, best): count for word, count in words.items()})
    return vocab, merges


def merge_word(word: tuple[bytes, ...], pair: tuple[bytes, bytes]) -> tuple[bytes, ...]:
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            out.append(pair[0] + pair[1])
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def train_bpe_expected(inputs: Bundle) -> Bundle:
    counts: list[int] = []
    vocab, merges = naive_train_bpe(
        inputs["text"], inputs["vocab_size"], inputs["special_tokens"], counts=counts
    )
    return {"vocab": vocab_to_wire(vocab), "merges": merges_to_wire(merges), "merge_counts": counts}


def tiktoken_of(vocab: dict[int, bytes], special_tokens: list[str]) -> tiktoken.Encoding:
    """tiktoken, built offline from our vocab with ids as ranks (valid because ids follow merge
    order) and the given special tokens."""
    specials = {t.encode("utf-8") for t in special_tokens}
    return tiktoken.Encoding(
        name="cs336",
        pat_str=GPT2_PATTERN,
        mergeable_ranks={t: i for i, t in vocab.items() if t not in specials},
        special_tokens={t.decode("utf-8"): i for i, t in vocab.items() if t in specials},
    )


def naive_encode(text: str, vocab, merges, special_tokens: list[str]) -> list[int]:
    """BPE as the handout states it, slowly: split off special tokens, pre-tokenize, then in each
    pre-token merge the pair earliest in ``merges`` (leftmost first) until none applies. With
    the merges reversed it reproduces a common mistake, for hints."""
    id_of = {token: i for i, token in vocab.items()}
    rank = {pair: r for r, pair in reversed(list(enumerate(merges)))}
    pattern = "|".join(regex.escape(t) for t in sorted(special_tokens, key=len, reverse=True))
    ids = []
    for piece in regex.split(f"({pattern})", text) if pattern else [text]:
        if piece in special_tokens:
            ids.append(id_of[piece.encode("utf-8")])
            continue
        for pretoken in regex.findall(GPT2_PATTERN, piece):
            parts = [bytes([b]) for b in pretoken.encode("utf-8")]
            while True:
                pairs = enumerate(zip(parts, parts[1:], strict=False))
                candidates = [(rank[pair], i) for i, pair in pairs if pair in rank]
                if not candidates:
                    break
                _, i = min(candidates)
                parts[i : i + 2] = [parts[i] + parts[i + 1]]
            ids += [id_of[p] for p in parts]
    return ids


def tiktoken_encoding(inputs: Bundle) -> tiktoken.Encoding:
    """tiktoken for a case's vocab and special tokens."""
    return tiktoken_of(vocab_from_wire(inputs["vocab"]), inputs["special_tokens"] or [])


def encode_expected(inputs: Bundle) -> Bundle:
    encoding = tiktoken_encoding(inputs)
    allowed = {"allowed_special": "all"} if inputs["special_tokens"] else {"disallowed_special": ()}
    return {
        "ids": {name: encoding.encode(text, **allowed) for name, text in inputs["texts"].items()}
    }


def iterable_expected(inputs: Bundle) -> Bundle:
    text = "".join(inputs["texts"].values())
    return {"ids": tiktoken_encoding(inputs).encode(text, allowed_special="all")}


def decode_malformed_expected(inputs: Bundle) -> Bundle:
    vocab = vocab_from_wire(inputs["vocab"])
    texts = [b"".join(vocab[i] for i in ids) for ids in inputs["sequences"]]
    return {"decoded": [t.decode("utf-8", errors="replace") for t in texts]}


TRUTHS = {
    **{
        ("train_bpe", n): train_bpe_expected
        for n in ("handout_example", "no_pairs_left", "stories", "samples")
    },
    **{("tokenizer", n): encode_expected for n in ("samples", "stories", "no_special_tokens")},
    ("tokenizer", "encode_iterable"): iterable_expected,
    ("tokenizer", "overlapping_specials"): lambda inputs: {},
    ("tokenizer", "decode_malformed"): decode_malformed_expected,
}
