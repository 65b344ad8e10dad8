"""The fairness check: correct implementations that differ only in arithmetic order pass every
numeric graded case, and by what margin (``python -m course.cases.fairness``, ``make fairness``)."""
