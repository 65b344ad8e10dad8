"""``python -m course.mutation``: does the suite catch mistakes, and name them?"""

from course.subcommands import run_part

COMMANDS = {
    "catalogue": (
        "course.mutation.run_catalogue",
        "the catalogue of bugs (--set blind: written blind)",
    ),
    "generated": (
        "course.mutation.generated",
        "mutants generated from the reference's syntax tree",
    ),
    "grader": ("course.mutation.case_mutants", "every catalogued bug loses points in grading"),
}

if __name__ == "__main__":
    run_part("mutation", COMMANDS, default="catalogue")
