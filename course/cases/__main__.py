"""``python -m course.cases``: the fixtures, the hidden cases and their checks."""

from course.subcommands import run_part

COMMANDS = {
    "fixtures": ("course.cases.fixtures", "regenerate fixtures/ and the hidden cases"),
    "hidden": (
        "course.cases.hidden_cases",
        "regenerate the hidden cases only (course/cases/hidden)",
    ),
    "checksums": ("course.cases.checksums", "check (or --write) fixtures/MANIFEST.sha256"),
    "fairness": (
        "course.cases.fairness",
        "correct implementations in other orders pass every case",
    ),
}

if __name__ == "__main__":
    run_part("cases", COMMANDS, default="fixtures")
