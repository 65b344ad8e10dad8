"""Learning BPE merges. Vocabulary layout (ours): special tokens first, then the 256 bytes,
then one token per merge."""

import heapq
from collections import Counter, defaultdict

from ..failures import ConfigError, CorpusError
from .pretokens import GPT2_SPLIT, checked_specials, special_splitter


class _Greater:
    """Heap key that pops the lexicographically greatest byte pair first."""

    __slots__ = ("pair",)

    def __init__(self, pair):
        self.pair = pair

    def __lt__(self, other):
        return self.pair > other.pair


def read_corpus(path):
    try:
        with open(path, "rb") as file:
            raw = file.read()
    except (FileNotFoundError, IsADirectoryError) as error:
        raise CorpusError(f"cannot read corpus {path}: {error.strerror}") from error
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise CorpusError(f"{path} is not UTF-8 (offset {error.start})") from error


def word_counts(text, specials):
    splitter = special_splitter(specials)
    pieces = splitter.split(text)[::2] if splitter else [text]
    counts = Counter()
    for piece in pieces:
        counts.update(GPT2_SPLIT.findall(piece))
    return counts


def learn_bpe(path, vocab_size, special_tokens):
    specials = checked_specials(special_tokens)
    if vocab_size < 256 + len(specials):
        raise ConfigError(
            f"vocab_size {vocab_size} cannot hold 256 bytes and {len(specials)} specials"
        )
    counts = word_counts(read_corpus(path), specials)
    if not counts:
        raise CorpusError(f"{path}: empty corpus (nothing outside special tokens)")

    vocab = [s.encode("utf-8") for s in specials] + [bytes([b]) for b in range(256)]
    offset = len(specials)
    words = [[offset + b for b in word.encode("utf-8")] for word in counts]
    weights = list(counts.values())
    pair_count = Counter()
    holders = defaultdict(set)
    for index, word in enumerate(words):
        for pair in zip(word, word[1:], strict=False):
            pair_count[pair] += weights[index]
            holders[pair].add(index)
    heap = [(-n, _Greater((vocab[a], vocab[b])), (a, b)) for (a, b), n in pair_count.items()]
    heapq.heapify(heap)

    merges = []
    while len(vocab) < vocab_size and heap:
        negative, _, pair = heapq.heappop(heap)
        if pair_count.get(pair, 0) != -negative or negative == 0:
            continue  # stale entry
        new_id = len(vocab)
        vocab.append(vocab[pair[0]] + vocab[pair[1]])
        merges.append((vocab[pair[0]], vocab[pair[1]]))
        touched = set()
        for index in holders.pop(pair, ()):
            word, weight = words[index], weights[index]
            for old in zip(word, word[1:], strict=False):
                pair_count[old] -= weight
                touched.add(old)
            rebuilt, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
                    rebuilt.append(new_id)
                    i += 2
                else:
                    rebuilt.append(word[i])
                    i += 1
            words[index] = rebuilt
            for new in zip(rebuilt, rebuilt[1:], strict=False):
                pair_count[new] += weight
                holders[new].add(index)
                touched.add(new)
        for changed in touched:
            n = pair_count.get(changed, 0)
            if n > 0:
                heapq.heappush(
                    heap, (-n, _Greater((vocab[changed[0]], vocab[changed[1]])), changed)
                )
            else:
                pair_count.pop(changed, None)
    return dict(enumerate(vocab)), merges
