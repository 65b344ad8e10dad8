"""The project's error types: failures a user can fix, reported as one line by the ``cs336`` CLI.

Code that detects an expected failure (a missing file, a bad value, two inputs that disagree)
raises one of these with a message that names the path, field or value and says what to do.
``cs336_basics.runner.cli`` prints it as ``cs336 <command>: error: <message>`` and exits with
``exit_code``: 2 for bad input or usage, 1 for a run that failed on its own (a non-finite
loss). Each type also derives from the matching built-in exception, so library callers that
catch ``ValueError`` or ``FileNotFoundError`` keep working.

This module imports nothing heavy: the CLI reports errors without loading torch.
"""

from __future__ import annotations


class CS336Error(Exception):
    """An expected failure with a message fit to show the user as it is."""

    exit_code = 2


class InputError(CS336Error, ValueError):
    """A value, file format or combination of inputs that cannot work."""


class MissingInputError(CS336Error, FileNotFoundError):
    """An input path that does not exist or is not the kind of file expected."""


class OutputExistsError(CS336Error, FileExistsError):
    """An output that would replace something the user made; the message names the flag."""


class MissingDependencyError(CS336Error, RuntimeError):
    """An optional package the chosen settings need is not installed; the message says how."""


class RunFailedError(CS336Error, RuntimeError):
    """The work started but could not finish (e.g. the training loss became NaN)."""

    exit_code = 1
