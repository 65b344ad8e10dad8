"""A seeded generator of English-like prose with a large vocabulary, for tokenizer benchmarks.

The bundled story corpus repeats a few hundred words, so a tokenizer's word cache hides how fast
it merges a word it has not seen. Real English has a long tail: most distinct words are rare.
This text has one too. A lexicon of ``lexicon_size`` (60,000) distinct words is built from
hand-written syllables and morphemes (stems of one to three syllables, English-looking prefixes
and suffixes, compounds; one word in twelve a capitalised name), ranked after a list of function
words, and drawn with a Zipf-Mandelbrot law, as word frequencies in natural text are. Sentences
add capitalisation, contractions, hyphenated compounds, numbers (years, prices, decimals,
percentages, thousands), quotes, parentheses and punctuation; about one paragraph in fifty is in
another script or carries emoji. Documents are separated by ``<|endoftext|>``.

The parameters are set so that 10 MB (about 1.6M words) has the statistics of English prose of
that length: about 70,000 distinct word forms, a third of them seen once, the 100 commonest
words about half of the running text, words of about five letters on average.

Every word list here was written for this project; nothing is downloaded. The same ``seed``
gives the same text.

    uv run python -m benchmarks.english OUT.txt --size-mb 10
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import os
import random
import sys

from cs336_basics.atomic_write import atomic_writer

END_OF_TEXT = "<|endoftext|>"


def _words(text: str) -> list[str]:
    return text.split()


# The most frequent words of English prose, most frequent first.
FUNCTION_WORDS = _words(
    "the of and to a in that is was he for it with as his on be at by I this had not are "
    "but from or have an they which one you were her all she there would their we him been "
    "has when who will more no if out so said what up its about into than them can only "
    "other new some could time these two may then do first any my now such like our over "
    "man me even most made after also did many before must through back years where much "
    "your way well down should because each just those people how too little state good "
    "very make world still own see men work long get here between both life being under "
    "never day same another know while last might us great old year off come since against "
    "go came right used take three"
)

# Common letters are listed more than once, so they are drawn more often.
_ONSETS = _words(
    "- - - b b c c d d f g h h j k l l m m n n p p r r s s s t t t v w w y bl br ch cl cr "
    "dr fl fr gl gr ph pl pr qu sh sk sl sp st str sw th th tr wh"
)
_VOWELS = _words("a a e e e i i o o u a e i o ea ee ai oa ou oo ie y")
_CODAS = _words("- - - - - - b ck d d g l ll m n n nd ng nt p r r rd rt s s sh st t t th x")
_PREFIXES = _words(
    "un re in dis en non pre over mis sub inter fore de trans super semi anti mid under out up"
)
_SUFFIXES = _words(
    "s s s ed ed ing ing er ers ly est ness ment ments tion tions able ful less ous ive "
    "ity al ism ist ize ized ship hood ward wards ery ish"
)

# Words and symbols of other scripts, and emoji (about one paragraph in fifty uses them).
_FOREIGN = _words(
    "café naïve façade über Straße Größe niño jalapeño señor déjà-vu smörgåsbord Ångström "
    "Москва привет спасибо книга αλφα λόγος θάλασσα 東京 日本語 学校 こんにちは ありがとう 서울 감사합니다 مرحبا "
    "שלום नमस्ते ไทย 😀 🎉 👍 🚀 ❤️ ✨ 🌍 → ≈ € £ ¥ ½ ° ©"
)

_END_MARKS = [".", ".", ".", ".", ".", ".", "?", "!", "..."]
_MONTHS = "January February March April May June July August September October November December"


def _syllable(rng: random.Random) -> str:
    coda = rng.choice(_CODAS)
    onset = rng.choice(_ONSETS)
    return ("" if onset == "-" else onset) + rng.choice(_VOWELS) + ("" if coda == "-" else coda)


def _new_word(rng: random.Random) -> str:
    """A word from the morpheme model: a stem of 1-3 syllables, maybe a prefix, suffix, compound."""
    stem = "".join(_syllable(rng) for _ in range(rng.choice([1, 1, 1, 1, 2, 2, 3])))
    if rng.random() < 0.1:
        stem = rng.choice(_PREFIXES) + stem
    if rng.random() < 0.3:
        stem += rng.choice(_SUFFIXES)
    if rng.random() < 0.05:
        stem += rng.choice(["", "-"]) + _syllable(rng)
    return stem


NAME_EVERY = 12


def build_lexicon(size: int, rng: random.Random) -> list[str]:
    """The function words, then ``size`` distinct generated words, in frequency-rank order.

    One generated word in ``NAME_EVERY`` is a proper name: capitalised wherever it appears.
    """
    seen = set(FUNCTION_WORDS)
    words = list(FUNCTION_WORDS)
    while len(words) < len(FUNCTION_WORDS) + size:
        word = _new_word(rng)
        if len(words) % NAME_EVERY == 0:
            word = word.capitalize()
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


def zipf_cumulative_weights(n: int, exponent: float = 1.15, shift: float = 2.7) -> list[float]:
    """Cumulative Zipf-Mandelbrot weights ``1 / (rank + shift) ** exponent`` for ranks 1..n."""
    return list(itertools.accumulate(1.0 / (rank + shift) ** exponent for rank in range(1, n + 1)))


def _number(rng: random.Random) -> str:
    kind = rng.randrange(7)
    if kind == 0:
        return str(rng.randint(1700, 2030))  # a year
    if kind == 1:
        return f"${rng.randint(1, 999)}.{rng.randint(0, 99):02d}"
    if kind == 2:
        return f"{rng.randint(1, 99)}%"
    if kind == 3:
        return f"{rng.randint(1, 999):,}" if rng.random() < 0.5 else f"{rng.randint(1000, 99999):,}"
    if kind == 4:
        return f"{rng.random() * 100:.{rng.randint(1, 3)}f}"
    if kind == 5:
        return f"{rng.choice(_MONTHS.split())} {rng.randint(1, 28)}"
    return str(rng.randint(0, 100))


class EnglishLikeText:
    """Draws sentences, paragraphs and documents from a seeded lexicon."""

    def __init__(self, seed: int = 0, lexicon_size: int = 60_000) -> None:
        self.rng = random.Random(seed)
        self.lexicon = build_lexicon(lexicon_size, self.rng)
        self.cumulative = zipf_cumulative_weights(len(self.lexicon))

    def _words(self, count: int) -> list[str]:
        total = self.cumulative[-1]
        random_draw = self.rng.random
        return [
            self.lexicon[bisect.bisect(self.cumulative, random_draw() * total)]
            for _ in range(count)
        ]

    def _dress(self, word: str) -> str:
        """One word with its occasional decoration: a name, contraction, number, comma, ..."""
        u = self.rng.random()
        if u < 0.003:
            return word.upper()
        if u < 0.015:
            return word + self.rng.choice(["'s", "'s", "n't", "'re", "'ll", "'ve", "'d"])
        if u < 0.03:
            return _number(self.rng)
        if u < 0.035:
            return f"{word}-{self._words(1)[0]}"
        if u < 0.1:
            return word + self.rng.choice([",", ",", ",", ";", ":"])
        return word

    def sentence(self) -> str:
        length = min(40, 3 + int(self.rng.expovariate(1 / 12)))
        words = [self._dress(word) for word in self._words(length)]
        words[0] = words[0][:1].upper() + words[0][1:]
        text = " ".join(words).rstrip(",;:") + self.rng.choice(_END_MARKS)
        u = self.rng.random()
        if u < 0.08:
            return f'"{text}"'
        if u < 0.11:
            return f"({text})"
        return text

    def paragraph(self) -> str:
        sentences = [self.sentence() for _ in range(1 + int(self.rng.expovariate(1 / 5)))]
        if self.rng.random() < 0.02:
            foreign = self.rng.sample(_FOREIGN, self.rng.randint(2, 8))
            sentences.insert(self.rng.randrange(len(sentences) + 1), " ".join(foreign))
        return " ".join(sentences)

    def document(self) -> str:
        paragraphs = [self.paragraph() for _ in range(1 + int(self.rng.expovariate(1 / 4)))]
        return "\n\n".join(paragraphs)

    def pieces(self, num_bytes: int):
        """Documents separated by ``<|endoftext|>`` until ``num_bytes`` UTF-8 bytes are reached."""
        size = 0
        while size < num_bytes:
            piece = (f"\n{END_OF_TEXT}\n" if size else "") + self.document()
            size += len(piece.encode("utf-8"))
            yield piece


def generate_english(num_bytes: int, seed: int = 0) -> str:
    """English-like documents: the shortest such text of at least ``num_bytes`` bytes."""
    return "".join(EnglishLikeText(seed).pieces(num_bytes))


def write_english_corpus(path: str | os.PathLike, num_bytes: int, seed: int = 0) -> int:
    """Write ``generate_english(num_bytes, seed)`` to ``path`` atomically; return its size in bytes."""
    written = 0
    with atomic_writer(path) as file:
        for piece in EnglishLikeText(seed).pieces(num_bytes):
            written += file.write(piece.encode("utf-8"))
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="the text file to write")
    parser.add_argument("--size-mb", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    written = write_english_corpus(args.out, int(args.size_mb * 1e6), args.seed)
    print(f"wrote {written:,} bytes to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
