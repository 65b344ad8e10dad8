"""Every error this package raises on bad input derives from ``BadInput``."""


class BadInput(Exception):
    """Input that the code cannot handle, with a message that says why."""


class ConfigError(BadInput):
    pass


class ShapeMismatch(BadInput):
    pass


class PositionOutOfRange(BadInput):
    pass


class UnknownToken(BadInput):
    pass


class CorpusError(BadInput):
    pass


class CheckpointUnreadable(BadInput):
    pass
