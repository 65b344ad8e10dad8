"""``python -m course.handout``: build, verify and pack the student handout."""

from course.subcommands import run_part

COMMANDS = {
    "build": ("course.handout.build", "write dist/handout (--extensions: the extension handout)"),
    "verify": ("course.handout.verify", "prove the handout sound (skeletons, imports, tests)"),
    "submission": ("course.handout.submission", "pack a submission zip"),
    "check-solutions": (
        "course.handout.check_solutions",
        "the shipped suite against the independent solutions",
    ),
    "check-platforms": (
        "course.handout.check_platforms",
        "the handout's lock resolved for every student platform",
    ),
    "signatures": ("course.handout.adapter_signatures", "rewrite tests/adapter_signatures.py"),
}

if __name__ == "__main__":
    run_part("handout", COMMANDS, default="build")
