"""``python -m course.grading``: grade zips, and what a course does around a grade."""

from course.subcommands import run_part

COMMANDS = {
    "grade": (
        "course.grading.grade",
        "grade submission zips (cs336-grade): one, or --batch a folder",
    ),
    "export": (
        "course.grading.export",
        "grades.csv and a summary of a graded batch (export summary DIR)",
    ),
    "regrade": ("course.grading.regrade", "grade a batch again and say what changed per student"),
    "similarity": ("course.grading.similarity", "similarity between submissions (and public code)"),
    "gradescope": ("course.grading.gradescope", "build the Gradescope autograder zip"),
    "gradescope-docker": (
        "course.grading.gradescope_docker",
        "run the Gradescope bundle in a default Docker container",
    ),
    "attacks": (
        "course.grading.attacks",
        "every hostile submission against the sandbox, at both isolation levels",
    ),
    "confine": ("course.grading.confine", "run a command confined as container mode confines it"),
}

if __name__ == "__main__":
    run_part("grading", COMMANDS, default="grade")
