# Developer and instructor commands; see README.md.
.PHONY: test demo fixtures check-fixtures handout verify-handout submission grade mutants mutants-smoke test-thorough ci-course bench bench-smoke

test:
	uv run pytest

demo:
	uv run cs336 pipeline

fixtures:
	uv run python -m course.fixtures

check-fixtures:
	uv run python -m course.manifest

# --- Course toolchain (course/, see README "Instructor commands") ---
SUBMISSION ?= submission.zip

handout:
	uv run python -m course.handout

verify-handout:
	uv run python -m course.verify_handout

submission:
	uv run python -m course.submission

grade:
	uv run cs336-grade $(SUBMISSION)

# Mutation testing (course/mutants.py, course/generated_mutants.py): the catalogue of common bugs,
# then mutants generated from the reference's syntax tree, on every core. mutants-smoke: CI-sized.
mutants:
	uv run python -m course.mutants
	uv run python -m course.generated_mutants

mutants-smoke:
	uv run python -m course.generated_mutants --smoke --jobs 2

# The property tests with many random examples (the default profile is quick and derandomized).
test-thorough:
	HYPOTHESIS_PROFILE=thorough uv run pytest

# CI smoke test: verify the handout, then grade the reference (full marks) and the bare handout (zero).
ci-course:
	uv run python -m course.verify_handout
	uv run python -m course.handout
	uv run python -m course.submission --out dist/reference.zip
	uv run python -m course.submission --root dist/handout --out dist/bare-handout.zip
	uv run cs336-grade dist/reference.zip --out dist/grading/reference --expect full
	uv run cs336-grade dist/bare-handout.zip --out dist/grading/bare-handout --expect zero

# --- Benchmarks (benchmarks/, see README "Benchmarks") ---
# Ours beside peer libraries, as ratios; prints a table and writes benchmarks/results/bench-<time>.json.
# Options go in BENCH_ARGS, e.g. make bench BENCH_ARGS="--input owt_train.txt --torch-threads 1".
bench:
	uv run python -m benchmarks.run $(BENCH_ARGS)

# The same harness end to end on tiny inputs (asserts no timings); for CI.
bench-smoke:
	uv run python -m benchmarks.run --smoke
