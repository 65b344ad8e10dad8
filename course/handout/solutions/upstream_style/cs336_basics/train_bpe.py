"""Byte-level BPE training, written the way the course's assignment lays it out."""

from __future__ import annotations

from collections import Counter, defaultdict

import regex as re

PAT = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def pretokenize(text: str, special_tokens: list[str]) -> Counter[tuple[bytes, ...]]:
    """Count pre-tokens as tuples of single bytes; special tokens split the text first."""
    if special_tokens:
        docs = re.split(
            "|".join(re.escape(t) for t in sorted(special_tokens, key=len, reverse=True)), text
        )
    else:
        docs = [text]
    counts: Counter[tuple[bytes, ...]] = Counter()
    for doc in docs:
        for m in re.finditer(PAT, doc):
            counts[tuple(bytes([b]) for b in m.group().encode("utf-8"))] += 1
    return counts


def train_bpe(input_path, vocab_size: int, special_tokens: list[str], **kwargs):
    with open(input_path, encoding="utf-8") as f:
        text = f.read()
    vocab = {i: bytes([i]) for i in range(256)}
    for tok in special_tokens:
        vocab[len(vocab)] = tok.encode("utf-8")

    word_counts = pretokenize(text, special_tokens)
    words = [list(w) for w in word_counts]
    freqs = list(word_counts.values())

    # pair -> count, and pair -> the words it appears in
    pair_counts: Counter[tuple[bytes, bytes]] = Counter()
    where: dict[tuple[bytes, bytes], set[int]] = defaultdict(set)
    for idx, word in enumerate(words):
        for pair in zip(word, word[1:], strict=False):
            pair_counts[pair] += freqs[idx]
            where[pair].add(idx)

    merges = []
    while len(vocab) < vocab_size:
        pair_counts = +pair_counts  # drop zero counts
        if not pair_counts:
            break
        best = max(pair_counts, key=lambda p: (pair_counts[p], p))
        merges.append(best)
        new_token = best[0] + best[1]
        vocab[len(vocab)] = new_token
        for idx in list(where[best]):
            word, f = words[idx], freqs[idx]
            for pair in zip(word, word[1:], strict=False):
                pair_counts[pair] -= f
            merged, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and word[i] == best[0] and word[i + 1] == best[1]:
                    merged.append(new_token)
                    i += 2
                else:
                    merged.append(word[i])
                    i += 1
            words[idx] = merged
            for pair in zip(merged, merged[1:], strict=False):
                pair_counts[pair] += f
                where[pair].add(idx)
        del where[best]
    return vocab, merges
