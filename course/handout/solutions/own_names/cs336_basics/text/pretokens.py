"""GPT-2 pre-tokenization and the special-token splitter shared by training and encoding."""

import regex

from ..failures import BadInput

GPT2_SPLIT = regex.compile(
    r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
)


def checked_specials(special_tokens):
    specials = list(special_tokens or [])
    if any(not s for s in specials):
        raise BadInput("special tokens must be non-empty strings")
    if len(set(specials)) != len(specials):
        raise BadInput(f"duplicate special tokens in {specials}")
    return specials


def special_splitter(specials):
    """A pattern capturing any special token, longest first (so overlaps prefer the longer)."""
    if not specials:
        return None
    alternatives = sorted(specials, key=len, reverse=True)
    return regex.compile("(" + "|".join(map(regex.escape, alternatives)) + ")")
