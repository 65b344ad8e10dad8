"""Subcommands of the ``cs336`` console script (see ``cs336_basics.runner.cli``)."""
