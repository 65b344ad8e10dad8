"""The test suite. Hypothesis profiles: ``quick`` (the default: few examples, derandomized, so
``uv run pytest`` is fast and repeatable) and ``thorough`` (``HYPOTHESIS_PROFILE=thorough``,
``make test-thorough``: many random examples)."""

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "quick",
    max_examples=25,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "thorough", max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "quick"))
