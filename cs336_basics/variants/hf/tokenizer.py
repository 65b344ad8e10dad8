"""HF ``tokenizers`` ``tokenizer.json`` files, encoded the way their pipeline says.

A ``tokenizer.json`` describes a pipeline: added tokens are cut out of the raw text first (those
with ``normalized: false``), the rest is normalised (``normalizer``: NFC, NFKC, NFD, NFKD or a
``Sequence`` of them), the normalised added tokens are cut out next, then the ``pre_tokenizer``
splits what is left into pre-tokens and the BPE ``model`` merges inside each. Llama-3 and Qwen2
split with their own regular expression (a ``Split`` before a regex-free ``ByteLevel``), GPT-2
with ``ByteLevel``'s built-in one; a GPT-2 split of Llama-3 text gives other ids.

``HFTokenizer`` is the core ``Tokenizer`` (same merges, decoding and vocabulary) with that
pipeline in front. Supported: byte-level BPE (``ByteLevel`` in the pre-tokenizer) with
``ignore_merges``; pre-tokenizers ``ByteLevel`` (``add_prefix_space``, ``use_regex``), ``Split``
(string or regex, every ``behavior``, ``invert``), ``Digits`` and ``Sequence``; added tokens with
``single_word``, ``lstrip``, ``rstrip`` and ``normalized``. Anything else (SentencePiece-style
``Metaspace``, ``Unigram`` or ``WordPiece`` models, ``byte_fallback``, other normalisers) is
refused with an error naming the field. Like ``tokenizers``' ``encode(text,
add_special_tokens=False)``, ``encode`` adds no template tokens; ``with_special_tokens()`` gives
the tokenizer that adds them as the ``post_processor`` says (a ``TemplateProcessing`` single
template, e.g. Llama-3's ``<|begin_of_text|>`` in front), as ``transformers``' tokenizers do.
"""

from __future__ import annotations

import copy
import json
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import regex

from cs336_basics.pretokenization import gpt2_pretokenizer
from cs336_basics.tokenizer import Tokenizer
from cs336_basics.tokenizer_files import string_to_token

PreTokenizer = Callable[[str], list[str]]
_UNICODE_FORMS = ("NFC", "NFKC", "NFD", "NFKD")
_WORD_BEFORE, _WORD_AFTER = regex.compile(r"\w$"), regex.compile(r"^\w")
_SPACE_BEFORE, _SPACE_AFTER = regex.compile(r"\s*$"), regex.compile(r"^\s*")


class UnsupportedTokenizer(ValueError):
    """A ``tokenizer.json`` setting this package does not implement; the message names it."""


@dataclass(frozen=True)
class AddedToken:
    """An entry of ``added_tokens``: matched in the text before pre-tokenization."""

    content: str
    id: int
    single_word: bool = False  # only where no word character touches it
    lstrip: bool = False  # absorbs the whitespace on its left
    rstrip: bool = False  # absorbs the whitespace on its right
    normalized: bool = True  # matched in the normalised text (else in the raw text)


class HFTokenizer(Tokenizer):
    """A byte-level BPE ``Tokenizer`` with a ``tokenizer.json``'s normaliser, pre-tokenizer and
    added tokens in front of the merges."""

    def __init__(
        self,
        vocab: dict[int, bytes],
        merges: list[tuple[bytes, bytes]],
        added_tokens: list[AddedToken],
        normalize: Callable[[str], str],
        pre_tokenize: PreTokenizer,
        ignore_merges: bool = False,
        template: tuple[list[int], list[int]] = ([], []),
    ) -> None:
        # The model's own tokens come first: a merge yielding an added token's bytes makes the
        # model's token.
        self._model_ids = {token: token_id for token_id, token in vocab.items()}
        vocab = vocab | {t.id: t.content.encode("utf-8") for t in added_tokens}
        super().__init__(vocab, merges)
        self.special_tokens = [t.content for t in added_tokens]
        self.special_ids = {t.content: t.id for t in added_tokens}
        self.template = template  # ids before and after the text, when special tokens are added
        self.adds_special_tokens = False
        self._normalize = normalize
        self._pre_tokenize = pre_tokenize
        self._ignore_merges = ignore_merges
        self._raw_tokens = _TokenMatcher([t for t in added_tokens if not t.normalized])
        self._normalized_tokens = _TokenMatcher(
            [t for t in added_tokens if t.normalized], normalize
        )

    def with_special_tokens(self) -> HFTokenizer:
        """This tokenizer, encoding as ``tokenizers``' ``encode(text)``: the template's ids around
        the text's."""
        templated = copy.copy(self)
        templated.adds_special_tokens = True
        return templated

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``, as ``tokenizers``' ``encode(text, add_special_tokens=False)``
        (or ``True`` for a tokenizer from ``with_special_tokens``)."""
        ids = self._encode_text(text)
        if self.adds_special_tokens:
            before, after = self.template
            return before + ids + after
        return ids

    def _encode_text(self, text: str) -> list[int]:
        ids: list[int] = []
        pretoken_ids = self._cache.__getitem__
        for raw, raw_id in self._raw_tokens.split(text):
            if raw_id is not None:
                ids.append(raw_id)
                continue
            for piece, token_id in self._normalized_tokens.split(self._normalize(raw)):
                if token_id is not None:
                    ids.append(token_id)
                else:
                    for pretoken in self._pre_tokenize(piece):
                        ids.extend(pretoken_ids(pretoken))
        return ids

    def _encode_word(self, word: str) -> list[int]:
        """The ids of one pre-token (the cache's key here); with ``ignore_merges`` a pre-token
        that is a whole vocabulary entry is that entry, whatever the merges would give."""
        if self._ignore_merges:
            whole = self._model_ids.get(word.encode("utf-8"))
            if whole is not None:
                return [whole]
        return self._encode_pretoken(word)

    def encode_iterable(self, iterable: Iterable[str]) -> Iterator[int]:
        """The ids of the concatenation of ``iterable``. A ``tokenizer.json``'s regex may join
        text across any boundary (Llama-3's ``\\s*[\\r\\n]+`` spans lines), so the text is read
        whole: this does not stream."""
        yield from self.encode("".join(iterable))


class _TokenMatcher:
    """Finds added tokens the way ``tokenizers`` does: leftmost-longest matches scanned left to
    right; a ``single_word`` match touching a word character is skipped (the scan goes on after
    it); ``lstrip``/``rstrip`` widen a match over adjacent whitespace."""

    def __init__(self, tokens: list[AddedToken], normalize: Callable[[str], str] = str) -> None:
        patterns = {normalize(t.content): t for t in tokens if t.content}
        self._tokens = patterns
        longest_first = sorted(patterns, key=len, reverse=True)
        self._regex = (
            regex.compile("|".join(map(regex.escape, longest_first))) if patterns else None
        )

    def split(self, text: str) -> list[tuple[str, int | None]]:
        """``text`` cut into ``(piece, added token id or None)``, in order, without empties."""
        if self._regex is None:
            return [(text, None)] if text else []
        pieces: list[tuple[str, int | None]] = []
        done = 0
        for match in self._regex.finditer(text):
            token = self._tokens[match.group()]
            start, stop = match.span()
            if token.single_word and (
                _WORD_BEFORE.search(text[:start]) or _WORD_AFTER.search(text[stop:])
            ):
                continue
            if token.lstrip:
                start = max(_SPACE_BEFORE.search(text[:start]).start(), done)
            if token.rstrip:
                stop += _SPACE_AFTER.search(text[stop:]).end()
            if done < start:
                pieces.append((text[done:start], None))
            pieces.append((text[start:stop], token.id))
            done = stop
        if done < len(text):
            pieces.append((text[done:], None))
        return pieces


def tokenizer_from_json(path: str | Path) -> HFTokenizer:
    """The ``HFTokenizer`` of a ``tokenizer.json``; ``UnsupportedTokenizer`` names the field of
    anything it cannot reproduce, ``ValueError`` a malformed file."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    model = data.get("model") or {}
    _check_model(model)
    pre_tokenize = _pre_tokenizer(data.get("pre_tokenizer"))
    _check_decoder(data.get("decoder"))
    vocab = {token_id: string_to_token(text) for text, token_id in model["vocab"].items()}
    merges = [m.split(" ") if isinstance(m, str) else m for m in model["merges"]]
    pairs = [(string_to_token(left), string_to_token(right)) for left, right in merges]
    added = [
        AddedToken(
            t["content"],
            t["id"],
            **{f: bool(t.get(f, False)) for f in ("single_word", "lstrip", "rstrip")},
            normalized=bool(t.get("normalized", not t.get("special", False))),
        )
        for t in data.get("added_tokens") or []
    ]
    normalize = _normalizer(data.get("normalizer"))
    template = _template(data.get("post_processor"))
    ignore_merges = bool(model.get("ignore_merges"))
    return HFTokenizer(vocab, pairs, added, normalize, pre_tokenize, ignore_merges, template)


def _template(spec: dict[str, Any] | None) -> tuple[list[int], list[int]]:
    """The special-token ids a ``post_processor`` puts before and after one sequence: those of
    its ``TemplateProcessing`` (alone, or in a ``Sequence`` with ``ByteLevel``, as Llama-3's)."""
    steps = (spec or {}).get("processors", [spec] if spec else [])
    kinds = [step.get("type") for step in steps]
    templates = [step for step in steps if step.get("type") == "TemplateProcessing"]
    _require(
        set(kinds) <= {"ByteLevel", "TemplateProcessing"} and len(templates) <= 1,
        f"post_processor {kinds} is not supported; supported: one 'TemplateProcessing', "
        "'ByteLevel' (offsets only), a 'Sequence' of them, or none",
    )
    pieces: tuple[list[int], list[int]] = ([], [])
    side = 0  # 0 before the text, 1 after it
    for item in templates[0]["single"] if templates else []:
        if "Sequence" in item:
            side = 1
        else:
            token = item["SpecialToken"]["id"]
            pieces[side].extend(templates[0]["special_tokens"][token]["ids"])
    return pieces


def _check_model(model: dict[str, Any]) -> None:
    kind = model.get("type")
    _require(
        kind == "BPE",
        f"model.type {kind!r} is not supported (SentencePiece Unigram and WordPiece models "
        "are not); supported: 'BPE' (byte-level)",
    )
    _require(
        not model.get("byte_fallback"),
        "model.byte_fallback=true (SentencePiece-style <0x..> byte tokens) is not supported; "
        "supported: byte-level BPE (a ByteLevel pre_tokenizer)",
    )
    for field in ("continuing_subword_prefix", "end_of_word_suffix", "dropout"):
        _require(
            not model.get(field),
            f"model.{field}={model.get(field)!r} is not supported; supported: null",
        )


def _check_decoder(decoder: dict[str, Any] | None) -> None:
    kind = (decoder or {}).get("type", "ByteLevel")
    _require(
        kind == "ByteLevel",
        f"decoder.type {kind!r} is not supported; supported: 'ByteLevel' (or none)",
    )


def _normalizer(spec: dict[str, Any] | None) -> Callable[[str], str]:
    if spec is None:
        return str
    kind = spec.get("type")
    if kind in _UNICODE_FORMS:
        return lambda text: unicodedata.normalize(kind, text)
    if kind == "Sequence":
        steps = [_normalizer(step) for step in spec["normalizers"]]

        def normalize(text: str) -> str:
            for step in steps:
                text = step(text)
            return text

        return normalize
    raise UnsupportedTokenizer(
        f"normalizer.type {kind!r} is not supported; supported: {_UNICODE_FORMS}, "
        "'Sequence' of them, or none"
    )


def _pre_tokenizer(spec: dict[str, Any] | None) -> PreTokenizer:
    """The pre-tokenizer as one function, after checking that it is byte-level."""
    steps = _pre_tokenizer_steps(spec)
    _require(
        any(kind == "ByteLevel" for kind, _ in steps),
        "pre_tokenizer has no 'ByteLevel' step: only byte-level BPE is supported "
        "(a SentencePiece-style 'Metaspace' tokenizer is not)",
    )
    functions = [function for _, function in steps]

    def pre_tokenize(text: str) -> list[str]:
        pieces = [text]
        for function in functions:
            pieces = [p for piece in pieces for p in function(piece) if p]
        return pieces

    return pre_tokenize


def _pre_tokenizer_steps(spec: dict[str, Any] | None) -> list[tuple[str, PreTokenizer]]:
    kind = (spec or {}).get("type")
    if kind == "Sequence":
        return [step for inner in spec["pretokenizers"] for step in _pre_tokenizer_steps(inner)]
    if kind == "ByteLevel":
        return [("ByteLevel", _byte_level(spec))]
    if kind == "Split":
        pattern = spec["pattern"]
        text = pattern["Regex"] if "Regex" in pattern else regex.escape(pattern["String"])
        behavior = spec.get("behavior", "Isolated")
        _require(
            behavior in _BEHAVIORS,
            f"pre_tokenizer Split behavior {behavior!r} is not supported; "
            f"supported: {tuple(_BEHAVIORS)}",
        )
        return [("Split", _splitter(regex.compile(text), behavior, bool(spec.get("invert"))))]
    if kind == "Digits":
        digits = regex.compile(r"\p{N}" if spec.get("individual_digits") else r"\p{N}+")
        return [("Digits", _splitter(digits, "Isolated", False))]
    raise UnsupportedTokenizer(
        f"pre_tokenizer type {kind!r} is not supported; supported: 'ByteLevel', 'Split', "
        "'Digits', 'Sequence'"
    )


def _byte_level(spec: dict[str, Any]) -> PreTokenizer:
    """``ByteLevel``: a space before a piece that does not start with one (``add_prefix_space``),
    then GPT-2's split (``use_regex``). Its byte-to-character mapping is the vocabulary's
    spelling only: ``HFTokenizer`` works on bytes."""
    prefix = bool(spec.get("add_prefix_space"))
    use_regex = spec.get("use_regex", True)

    def byte_level(text: str) -> list[str]:
        if prefix and not text.startswith(" "):
            text = " " + text
        return gpt2_pretokenizer().findall(text) if use_regex else [text]

    return byte_level


def _splitter(pattern: regex.Pattern, behavior: str, invert: bool) -> PreTokenizer:
    """``Split``: the text cut into the pattern's matches and the gaps between them, then
    grouped by ``behavior`` (``invert`` swaps which pieces count as matches)."""

    def split(text: str) -> list[str]:
        pieces, end = [], 0
        for match in pattern.finditer(text):
            if match.start() > end:
                pieces.append((text[end : match.start()], invert))
            pieces.append((match.group(), not invert))
            end = match.end()
        if end < len(text):
            pieces.append((text[end:], invert))
        return _BEHAVIORS[behavior](pieces)

    return split


def _merged_with_previous(pieces: list[tuple[str, bool]]) -> list[str]:
    """A match joins the piece before it, unless that piece is a match too."""
    out: list[str] = []
    previous = False
    for piece, is_match in pieces:
        if is_match and not previous and out:
            out[-1] += piece
        else:
            out.append(piece)
        previous = is_match
    return out


def _merged_with_next(pieces: list[tuple[str, bool]]) -> list[str]:
    """A match joins the piece after it, unless that piece is a match too."""
    out: list[str] = []
    following = False
    for piece, is_match in reversed(pieces):
        if is_match and not following and out:
            out[-1] = piece + out[-1]
        else:
            out.append(piece)
        following = is_match
    return out[::-1]


def _contiguous(pieces: list[tuple[str, bool]]) -> list[str]:
    """Adjacent matches form one piece."""
    out: list[str] = []
    previous = False
    for piece, is_match in pieces:
        if is_match == previous and out:
            out[-1] += piece
        else:
            out.append(piece)
        previous = is_match
    return out


_BEHAVIORS: dict[str, Callable[[list[tuple[str, bool]]], list[str]]] = {
    "Removed": lambda pieces: [piece for piece, is_match in pieces if not is_match],
    "Isolated": lambda pieces: [piece for piece, _ in pieces],
    "MergedWithPrevious": _merged_with_previous,
    "MergedWithNext": _merged_with_next,
    "Contiguous": _contiguous,
}


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise UnsupportedTokenizer(message)
