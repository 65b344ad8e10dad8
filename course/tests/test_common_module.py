"""``tests/common.py`` keeps the names and values the course's own suite gives them, so student
code that imports it works here (and in grading, where it is one of the case files)."""

from __future__ import annotations

from tests.common import FIXTURES_PATH, gpt2_bytes_to_unicode


def test_table_is_gpt2s_byte_spelling():
    table = gpt2_bytes_to_unicode()
    assert sorted(table) == list(range(256))
    assert len(set(table.values())) == 256
    assert all(c.isprintable() and not c.isspace() for c in table.values())
    # Known GPT-2 spellings: the space is "Ġ", the newline "Ċ", printable ASCII itself.
    assert (table[ord(" ")], table[ord("\n")], table[0]) == ("\u0120", "\u010a", "\u0100")
    assert all(table[b] == chr(b) for b in range(ord("!"), ord("~") + 1))


def test_fixtures_path_is_the_shipped_fixtures_folder():
    assert (FIXTURES_PATH / "model" / "config.json").is_file()
