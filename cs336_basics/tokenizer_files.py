"""GPT-2-format tokenizer files: ``vocab.json`` and ``merges.txt``.

Tokens are bytes, but JSON and text files hold strings, so GPT-2 maps each of the 256 byte
values to a printable Unicode character (printable Latin-1 bytes stand for themselves, the
others are shifted to U+0100 and up; the space becomes ``Ġ``). A token is written as the
string of its bytes' characters.

* ``vocab.json``: ``{"token string": id, ...}``.
* ``merges.txt``: an optional ``#version`` line, then one merge per line, the two token
  strings separated by a single space, earliest merge first.

Files written by other tools (GPT-2's own, Hugging Face ``tokenizers``) load too. Their special
tokens sometimes appear literally (``"<|endoftext|>"``) rather than byte-mapped; a vocab string
containing a character outside the byte map is therefore read as literal UTF-8 text.
"""

from __future__ import annotations

import json
import os
from functools import cache

from cs336_basics.atomic_write import atomic_writer


@cache
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's map from each byte value to a printable character."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    mapping = {b: chr(b) for b in printable}
    shifted = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + shifted)
            shifted += 1
    return mapping


@cache
def unicode_to_bytes() -> dict[str, int]:
    """The inverse of :func:`bytes_to_unicode`."""
    return {char: b for b, char in bytes_to_unicode().items()}


def token_to_string(token: bytes) -> str:
    """The GPT-2 file representation of a token."""
    table = bytes_to_unicode()
    return "".join(table[b] for b in token)


def string_to_token(text: str) -> bytes:
    """The token a GPT-2 file string stands for (literal UTF-8 if it is not byte-mapped)."""
    table = unicode_to_bytes()
    if all(char in table for char in text):
        return bytes(table[char] for char in text)
    return text.encode("utf-8")


def save_vocab(vocab: dict[int, bytes], path: str | os.PathLike) -> None:
    """Write ``vocab`` as GPT-2 ``vocab.json`` (ids ascending), atomically."""
    strings = {token_to_string(vocab[i]): i for i in sorted(vocab)}
    if len(strings) != len(vocab):
        raise ValueError("vocab has duplicate tokens; a GPT-2 vocab.json cannot hold them")
    _write_atomically(path, json.dumps(strings, ensure_ascii=False, indent=0) + "\n")


def save_merges(merges: list[tuple[bytes, bytes]], path: str | os.PathLike) -> None:
    """Write ``merges`` as GPT-2 ``merges.txt``, atomically."""
    lines = ["#version: 0.2"] + [f"{token_to_string(a)} {token_to_string(b)}" for a, b in merges]
    _write_atomically(path, "\n".join(lines) + "\n")


def load_vocab(path: str | os.PathLike) -> dict[int, bytes]:
    """Read a GPT-2 ``vocab.json`` into ``{id: bytes}``."""
    try:
        with open(path, encoding="utf-8") as file:
            strings = json.load(file)
    except FileNotFoundError:
        raise FileNotFoundError(f"vocab file not found: {os.fspath(path)!r}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{os.fspath(path)!r} is not a JSON vocab file: {error}") from None
    if not isinstance(strings, dict) or not all(isinstance(i, int) for i in strings.values()):
        raise ValueError(
            f"{os.fspath(path)!r} must hold a JSON object mapping token strings to integer ids"
        )
    vocab = {i: string_to_token(text) for text, i in strings.items()}
    if len(vocab) != len(strings):
        raise ValueError(f"{os.fspath(path)!r} gives the same id to more than one token")
    return vocab


def load_merges(path: str | os.PathLike) -> list[tuple[bytes, bytes]]:
    """Read a GPT-2 ``merges.txt`` into a list of byte pairs."""
    try:
        with open(path, encoding="utf-8") as file:
            lines = file.read().split("\n")
    except FileNotFoundError:
        raise FileNotFoundError(f"merges file not found: {os.fspath(path)!r}") from None
    merges = []
    for number, line in enumerate(lines, start=1):
        line = line.rstrip("\r")
        if not line or (number == 1 and line.startswith("#version")):
            continue
        parts = line.split(" ")
        if len(parts) != 2 or not all(parts):
            raise ValueError(
                f"{os.fspath(path)!r} line {number}: expected two tokens separated by one space, got {line!r}"
            )
        merges.append((string_to_token(parts[0]), string_to_token(parts[1])))
    return merges


def _write_atomically(path: str | os.PathLike, text: str) -> None:
    with atomic_writer(path) as file:
        file.write(text.encode("utf-8"))
