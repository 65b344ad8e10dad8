"""A regrade after a rubric change: grade a folder again and say, per student, what changed.

``python -m course.grading.regrade zips/ --previous grading/ --out regrading/ [--rubric R]``
grades the folder again and compares the new ``grades.csv`` with the previous one; it writes
``changes.csv`` beside the new one and prints the per-student description.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from course.grading.export import (
    KEY,
    describe_changes,
    grade_changes,
    read_grades,
    write_csv,
)
from course.grading.grade import grade_batch


def regrade(folder: Path, previous: Path, out_dir: Path, **grading) -> str:
    """Grade ``folder`` again into ``out_dir``; compare with ``previous``'s grades.csv; write
    changes.csv; return the per-student description."""
    previous_csv = previous / "grades.csv" if previous.is_dir() else previous
    old = read_grades(previous_csv)  # first: a wrong path fails before an hour of grading
    new_csv = grade_batch(folder, out_dir, **grading)
    changes = grade_changes(old, read_grades(new_csv))
    write_csv(out_dir / "changes.csv", [[KEY, "column", "before", "after"], *changes])
    return describe_changes(changes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("zips", type=Path)
    parser.add_argument("--previous", type=Path, required=True, help="the earlier output folder")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rubric", type=Path, help="the changed rubric (default: the course's)")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    options = {"rubric": args.rubric} if args.rubric else {}
    try:
        print(regrade(args.zips, args.previous, args.out, jobs=args.jobs, **options))
    except (OSError, ValueError) as error:
        print(f"regrade: {error}", file=sys.stderr)
        return 1
    print(f"wrote {args.out / 'grades.csv'} and {args.out / 'changes.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
