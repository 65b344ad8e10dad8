"""``python -m course.mutation``: does the suite catch mistakes, and name them?"""

from course.subcommands import run_part

COMMANDS = {
    "run": (
        "course.mutation.run",
        "--source catalogue|blind|near-miss|generated --judge tests|grader|silent: the one runner",
    ),
}

if __name__ == "__main__":
    run_part("mutation", COMMANDS, default="run")
