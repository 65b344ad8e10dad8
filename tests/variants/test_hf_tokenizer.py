"""``tokenizer.json`` files read with the pipeline they describe: ids and text equal to HF
``tokenizers``' own on the styles of GPT-2, Llama-3 and Qwen2. Every file is built here with the
``tokenizers`` library (pre-tokenizer regexes as published), trained on generated text."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import (
    AddedToken,
    Regex,
    Tokenizer,
    decoders,
    models,
    normalizers,
    processors,
    trainers,
)
from tokenizers import pre_tokenizers as pre

from ..adapters import get_tokenizer
from .adapters import get_hf_tokenizer

# The published split regexes (Llama-3's tiktoken pattern; Qwen2 splits digits one by one).
LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN2_SPLIT = LLAMA3_SPLIT.replace(r"\p{N}{1,3}", r"\p{N}")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

WORDS = [
    "the",
    "cat",
    "sat",
    "on",
    "a",
    "mat",
    "It's",
    "THEY'LL",
    "we've",
    "don't",
    "Über",
    "café",
    "naïve",
]
PIECES = [
    "12345",
    "3.14159",
    "2026",
    "def f(x):\n    return x ** 2\n",
    "if (a != b) { y += 1; }",
    "\t\t",
    "   ",
    "\n\n\n",
    "\r\n",
    "😀",
    "🐈‍⬛",
    "日本語のテキスト",
    "中文分词",
    "한국어",
    "e\u0301",  # e + combining acute: NFC composes it
    "ﬁ",  # a ligature NFKC would split
    "<|endoftext|>",
]
MIXED = [
    "Hello world! It's 2026, and THE cat's 12345678 toys cost $3.50.",
    "def tokenize(text):\n    return [t for t in text.split()  if t]\n\n\n",
    "emoji 😀🐈‍⬛ and CJK 日本語のテキスト 中文 한국어 mixed in",
    "whitespace   runs\t\t and\r\nnewlines\n\n  indented   \n",
    "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
    "café cafe\u0301 ﬁne ＡＢＣ １２３ e\u0301\u0301",
    "I'M SURE you'Ve SEEN it, they'd've said 1,234,567.89",
    "",
    " ",
    "a<|endoftext|>b <|endoftext|> c",
]


def training_text(seed: int = 0, lines: int = 400) -> list[str]:
    rng = random.Random(seed)
    vocabulary = WORDS + PIECES
    return [
        " ".join(rng.choice(vocabulary) for _ in range(rng.randint(3, 12))) for _ in range(lines)
    ]


def build(style: str, vocab_size: int = 600, specials: list[str] = SPECIALS) -> Tokenizer:
    """A BPE tokenizer in ``style`` (gpt2, llama3 or qwen2), trained on generated text."""
    tokenizer = Tokenizer(models.BPE(ignore_merges=style == "llama3"))
    byte_level = pre.ByteLevel(add_prefix_space=False, use_regex=style == "gpt2")
    if style == "gpt2":
        tokenizer.pre_tokenizer = byte_level
    else:
        split = LLAMA3_SPLIT if style == "llama3" else QWEN2_SPLIT
        tokenizer.pre_tokenizer = pre.Sequence(
            [pre.Split(Regex(split), behavior="isolated", invert=False), byte_level]
        )
    if style == "qwen2":
        tokenizer.normalizer = normalizers.NFC()
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(training_text(), trainer)
    return tokenizer


STYLES = ("gpt2", "llama3", "qwen2")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, tuple[Tokenizer, object]]:
    """style -> (HF's tokenizer, ours read from the file HF saved)."""
    directory = tmp_path_factory.mktemp("tokenizers")
    pairs = {}
    for style in STYLES:
        reference = build(style)
        reference.save(str(directory / f"{style}.json"))
        pairs[style] = (reference, get_hf_tokenizer(directory / f"{style}.json"))
    return pairs


def assert_same(reference: Tokenizer, ours, text: str) -> None:
    expected = reference.encode(text, add_special_tokens=False).ids
    ids = ours.encode(text)
    assert ids == expected, text
    assert ours.decode(ids) == reference.decode(ids, skip_special_tokens=False)


@pytest.mark.parametrize("style", STYLES)
def test_ids_and_text_equal_hf_on_mixed_text(built, style: str) -> None:
    reference, ours = built[style]
    for text in [*MIXED, *training_text(seed=1, lines=50)]:
        assert_same(reference, ours, text)


@pytest.mark.parametrize("style", STYLES)
@settings(max_examples=150, deadline=None)
@given(text=st.text(st.characters(exclude_categories=("Cs",)), max_size=40))
def test_ids_and_text_equal_hf_on_any_string(built, style: str, text: str) -> None:
    reference, ours = built[style]
    assert_same(reference, ours, text)


@settings(max_examples=100, deadline=None)
@given(
    text=st.lists(st.sampled_from([*WORDS, *PIECES, " ", "  ", "\n", "9", "'s", "'S"])).map("".join)
)
def test_ids_equal_hf_on_text_made_of_the_training_pieces(built, text: str) -> None:
    """Strings where the learned merges apply (the unconstrained ones rarely hit them)."""
    for reference, ours in built.values():
        assert_same(reference, ours, text)


def test_the_pre_tokenizer_changes_the_ids(built) -> None:
    """The same vocabulary and merges split GPT-2's way give other ids than Llama-3's split:
    what a reader that ignores the pre_tokenizer would feed the model."""
    reference, ours = built["llama3"]
    text = "def f(x):\n    return x ** 2\n THEY'LL"  # "(x" and "'LL" are Llama-3 pre-tokens
    data = json.loads(reference.to_str())["model"]
    gpt2_split = get_tokenizer(
        {i: ours.vocab[i] for i in data["vocab"].values()},
        [(ours.vocab[data["vocab"][a]], ours.vocab[data["vocab"][b]]) for a, b in data["merges"]],
    )
    assert gpt2_split.encode(text) != reference.encode(text, add_special_tokens=False).ids
    assert ours.encode(text) == reference.encode(text, add_special_tokens=False).ids


BEHAVIORS = ["removed", "isolated", "merged_with_previous", "merged_with_next", "contiguous"]


@pytest.mark.parametrize("invert", [False, True])
@pytest.mark.parametrize("behavior", BEHAVIORS)
def test_split_behaviors_and_digits(tmp_path: Path, behavior: str, invert: bool) -> None:
    reference = build("gpt2", vocab_size=400)
    reference.pre_tokenizer = pre.Sequence(
        [
            pre.Split(Regex(r"[aeo]|\s"), behavior=behavior, invert=invert),
            pre.Digits(individual_digits=invert),
            pre.ByteLevel(add_prefix_space=not invert, use_regex=invert),
        ]
    )
    reference.save(str(tmp_path / "tokenizer.json"))
    ours = get_hf_tokenizer(tmp_path / "tokenizer.json")
    for text in [*MIXED, *training_text(seed=2, lines=20)]:
        assert_same(reference, ours, text)


def test_added_token_flags(tmp_path: Path) -> None:
    """lstrip / rstrip absorb whitespace, single_word refuses a match inside a word, and a
    normalized (non-special) token matches after NFKC."""
    reference = build("qwen2", vocab_size=400)
    reference.normalizer = normalizers.NFKC()
    reference.add_special_tokens(
        [
            AddedToken("<mask>", lstrip=True, rstrip=True),
            AddedToken("<|im_start|>user", special=True),  # longer than <|im_start|>: wins
        ]
    )
    reference.add_tokens(
        [
            AddedToken("cat", single_word=True, normalized=True),
            AddedToken("fi", normalized=True),  # "ﬁ" normalises to it
        ]
    )
    reference.save(str(tmp_path / "tokenizer.json"))
    ours = get_hf_tokenizer(tmp_path / "tokenizer.json")
    texts = [
        "a  <mask>  b",
        "<mask>\n\nx",
        "cat concatenate cat, bobcat cat_ cat",
        "ﬁne fish ﬁ",
        "the<mask>cat<|im_end|> <mask>",
    ]
    for text in texts + MIXED:
        assert_same(reference, ours, text)
    mask = reference.token_to_id("<mask>")
    assert ours.encode("a  <mask>  b").count(mask) == 1
    assert ours.encode("<|im_start|>user") == [reference.token_to_id("<|im_start|>user")]


@pytest.mark.parametrize("ignore_merges", [False, True])
def test_ignore_merges(tmp_path: Path, ignore_merges: bool) -> None:
    """ "abc" is in the vocabulary, but merging (b, c) first leaves a + bc, which no merge joins:
    with ignore_merges a pre-token that is a vocabulary entry is taken whole."""
    alphabet = pre.ByteLevel.alphabet()
    vocab = {c: i for i, c in enumerate(sorted(alphabet))}
    vocab |= {"bc": len(vocab), "ab": len(vocab) + 1, "abc": len(vocab) + 2}
    merges = [("b", "c"), ("a", "b"), ("ab", "c")]
    reference = Tokenizer(models.BPE(vocab, merges, ignore_merges=ignore_merges))
    reference.pre_tokenizer = pre.ByteLevel(add_prefix_space=False)
    reference.decoder = decoders.ByteLevel()
    reference.save(str(tmp_path / "tokenizer.json"))
    ours = get_hf_tokenizer(tmp_path / "tokenizer.json")
    expected = [vocab["abc"]] if ignore_merges else [vocab["a"], vocab["bc"]]
    assert reference.encode("abc").ids == expected
    for text in ["abc", "abc abcabc ab bc", *MIXED]:
        assert_same(reference, ours, text)


def test_post_processor_template_when_special_tokens_are_added(tmp_path: Path) -> None:
    """Llama-3 puts <|begin_of_text|> first (a ByteLevel, then a TemplateProcessing)."""
    reference = build("llama3", vocab_size=400)
    start, end = (reference.token_to_id(t) for t in ("<|im_start|>", "<|im_end|>"))
    reference.post_processor = processors.Sequence(
        [
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(
                single="<|im_start|> $A <|im_end|>",
                special_tokens=[("<|im_start|>", start), ("<|im_end|>", end)],
            ),
        ]
    )
    reference.save(str(tmp_path / "tokenizer.json"))
    plain = get_hf_tokenizer(tmp_path / "tokenizer.json")
    templated = get_hf_tokenizer(tmp_path / "tokenizer.json", add_special_tokens=True)
    for text in MIXED:
        assert templated.encode(text) == reference.encode(text).ids
        assert_same(reference, plain, text)
    assert templated.encode("x")[0] == start and templated.encode("x")[-1] == end


def unsupported_files(directory: Path) -> dict[str, Path]:
    """field named in the error -> a tokenizer.json that uses it."""
    files = {}
    unigram = Tokenizer(models.Unigram([("a", -1.0), ("b", -2.0)]))
    files["model.type"] = unigram
    fallback = Tokenizer(models.BPE(byte_fallback=True))
    files["byte_fallback"] = fallback
    metaspace = build("gpt2", vocab_size=300)
    metaspace.pre_tokenizer = pre.Metaspace()
    files["Metaspace"] = metaspace
    lowercase = build("gpt2", vocab_size=300)
    lowercase.normalizer = normalizers.Lowercase()
    files["normalizer.type 'Lowercase'"] = lowercase
    roberta = build("gpt2", vocab_size=300)
    roberta.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 1))
    files["post_processor.*RobertaProcessing"] = roberta
    paths = {}
    for field, tokenizer in files.items():
        path = directory / f"{len(paths)}.json"
        tokenizer.save(str(path))
        paths[field] = path
    return paths


def test_unsupported_kinds_are_refused_naming_the_field(tmp_path: Path) -> None:
    for field, path in unsupported_files(tmp_path).items():
        with pytest.raises(ValueError, match=field) as error:
            get_hf_tokenizer(path)
        assert "\n" not in str(error.value)
