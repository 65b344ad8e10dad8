"""Embedded TOML configs of ``cs336 pipeline`` (read with ``importlib.resources``)."""
