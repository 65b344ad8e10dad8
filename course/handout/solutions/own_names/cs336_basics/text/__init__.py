"""Byte-level BPE: learning merges from a corpus, and encoding/decoding with them."""
