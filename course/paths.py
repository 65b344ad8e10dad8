"""Where things live in the repository: the one place that knows the layout.

Every part of ``course/`` finds the checkout, the fixtures, the hidden cases, the rubric and the
handout's files through these names; a folder that moves changes here only.
"""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
COURSE = REPO_ROOT / "course"
FIXTURES = REPO_ROOT / "fixtures"
TESTS = REPO_ROOT / "tests"

# grading: the rubric and the grader's own files
GRADING = COURSE / "grading"
RUBRIC = GRADING / "rubric.toml"
DRIVER = GRADING / "driver.py"

# cases: the hidden cases the grader reads (inputs for the sandbox, expected values for the judge)
HIDDEN = COURSE / "cases" / "hidden"

# handout: what ships and how
HANDOUT = COURSE / "handout"
HANDOUT_MANIFEST = HANDOUT / "manifest.toml"
SOLUTIONS = HANDOUT / "solutions"
# what the tooling builds (handouts, zips, grades), and the built handout (`make handout`), whose
# starter code the similarity check leaves out
DIST = REPO_ROOT / "dist"
BUILT_HANDOUT = DIST / "handout"

# shared: the pytest plugin that streams outcomes (the verifier, the grader, mutation testing)
PYTEST_OUTCOMES = COURSE / "pytest_outcomes.py"


def relative(path: Path) -> Path:
    """``path`` relative to the checkout (for files that name a place inside another tree)."""
    return path.relative_to(REPO_ROOT)
