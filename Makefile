# Developer and instructor commands; see README.md and docs/instructor.md.
.PHONY: test test-all demo kernel-cache fixtures hidden-cases case-mutants fairness fairness-smoke bench-suite check-fixtures import-graph handout handout-extensions verify-handout submission grade grade-batch grade-summary regrade similarity mutants mutants-smoke silent silent-smoke test-thorough ci-course check-platforms gradescope gradescope-docker grader-attacks grader-hang grader-attacks-container bench bench-smoke check-solutions

test:
	uv run pytest

# Also the slow end-to-end subprocess tests (CLI, grader sandbox, DDP) that plain pytest leaves out,
# in one process (-n 0): several of them start sandboxes and time them.
test-all:
	uv run pytest -n 0 -m ""

demo:
	uv run cs336 pipeline --overwrite

fixtures:
	uv run python -m course.cases fixtures

# The compiled encoder's kernels compiled ahead of time for Linux x86_64 on Python 3.12 and 3.13
# (cs336_basics/runner/compiled/shipped_cache.py): run after editing fast_tokenizer_kernels.py.
PY313 ?= $(shell ls -d "$$(pyenv root 2>/dev/null)"/versions/3.13.*/bin/python3.13 2>/dev/null | tail -n 1)
BUILD_KERNEL_CACHE = from cs336_basics.runner.compiled.shipped_cache import build; print(*build(), sep="\n")
kernel-cache:
	uv run python -c '$(BUILD_KERNEL_CACHE)'
	UV_PROJECT_ENVIRONMENT=.venv-3.13 uv run --locked -p "$(or $(PY313),3.13)" python -c '$(BUILD_KERNEL_CACHE)'

# The grader's case inputs and expected values (course/cases/hidden; `make fixtures` runs it too).
hidden-cases:
	uv run python -m course.cases hidden

# Every catalogued bug must lose points in grading (driver + judge on public and hidden cases).
case-mutants:
	uv run python -m course.mutation --source catalogue --judge grader

# Correct implementations in other arithmetic orders (course/cases/fairness) must pass every numeric
# graded case, public and hidden, on 1 and all threads and torch's scalar code path (and through
# torch.compile in the first: long); prints each case's worst margin (error / tolerance).
# fairness-smoke: CI-sized (two configurations, no torch.compile).
fairness:
	uv run python -m course.cases fairness --compiled

fairness-smoke:
	uv run python -m course.cases fairness --smoke

check-fixtures:
	uv run python -m course.cases checksums

# The layers point one way (core <- variants <- runner <- tooling), no import cycles, and every
# module of cs336_basics imports alone in a fresh process.
import-graph:
	uv run python -m course.layers --import-each

# --- Course toolchain (course/, see docs/instructor.md and docs/grading.md) ---
SUBMISSION ?= submission.zip

handout:
	uv run python -m course.handout build

handout-extensions:
	uv run python -m course.handout build --extensions

verify-handout:
	uv run python -m course.handout verify

submission:
	uv run python -m course.handout submission

grade:
	uv run cs336-grade $(SUBMISSION)

# Course operations (course/grading/, see docs/grading.md "Course operations"). ZIPS: a folder of
# submission zips; GRADED: where grade-batch writes (results per zip, grades.csv, summary.txt).
ZIPS ?= zips
GRADED ?= grading

grade-batch:
	uv run cs336-grade --batch $(ZIPS) --out $(GRADED)

grade-summary:
	uv run python -m course.grading export summary $(GRADED)

# After a rubric change: grade $(ZIPS) again into $(GRADED)-regrade and say what changed per student.
regrade:
	uv run python -m course.grading regrade $(ZIPS) --previous $(GRADED) --out $(GRADED)-regrade

# SIMILARITY_ARGS: e.g. --public known-solutions/ (a folder of public solutions collected).
similarity: handout
	uv run python -m course.grading similarity $(ZIPS) --out similarity $(SIMILARITY_ARGS)

# Mutation testing (course/mutation/run.py: source x judge): the catalogue of common bugs, then
# mutants generated from the reference's syntax tree (the graded modules' solution regions and
# the compiled tokenizer's function bodies, on every core), judged by the tests. mutants-smoke: CI-sized.
mutants:
	uv run python -m course.mutation --source catalogue --source generated

mutants-smoke:
	uv run python -m course.mutation --source generated --smoke --jobs 2

# Silent hidden losses (the grader takes a component's points while its shipped tests all pass)
# and double charges: each mistake graded, then its component's tests where it lost points; the
# generated mutants tested first, then graded where their tests miss (docs/grading.md). silent:
# every set, the generated mutants of the graded modules too (about two hours on 2 cores);
# silent-smoke: CI-sized, the near misses but Linear's 3-D-only one (the slowest, and caught by
# the shipped tests before this check existed).
silent:
	uv run python -m course.mutation --source near-miss --source catalogue --source blind \
		--source second-blind --judge silent
	uv run python -m course.mutation --source generated --graded --judge silent

silent-smoke:
	uv run python -m course.mutation --source near-miss --judge silent near_miss_rmsnorm_3d_only \
		near_miss_rmsnorm_eps_fixed near_miss_swiglu_3d_only near_miss_lm_final_eps near_miss_bpe_no_stop

# The property tests with many random examples (the default profile is quick and derandomized).
test-thorough:
	HYPOTHESIS_PROFILE=thorough uv run pytest -n 0 -m ""

# The shipped suite on the independent solutions in course/handout/solutions/ (graded cases must pass, and
# for the two that wire every adapter, every test not marked robustness).
check-solutions:
	uv run python -m course.handout check-solutions

# CI check of the course toolchain (course/handout/ci.py): verify both handouts, then grade (in the
# sandbox) the reference and the three independent solutions of course/handout/solutions/ (full
# marks) and the bare handout (zero); ends with a table of every step, its score and its time.
ci-course:
	uv run python -m course.handout ci

# The handout's lock resolved for every platform students work on (Linux x86_64/aarch64, macOS
# arm64/x86_64, Windows x86_64) by uv's cross-platform resolution: index metadata only, no wheels.
check-platforms:
	uv run python -m course.handout check-platforms --build

# The Gradescope autograder zip (setup.sh, run_autograder, grader, hidden cases; no solution).
gradescope:
	uv run python -m course.grading gradescope build --out dist/gradescope-autograder.zip

# The bundle in a default-security Docker container, as Gradescope runs it (needs root, docker.io
# with its daemon running, debootstrap): reference full marks, bare handout and a hostile zip 0.
gradescope-docker:
	uv run python -m course.grading gradescope-docker

# Every hostile submission against the real sandbox, at both isolation levels (CI runs the smoke
# subset below). The container level runs where namespaces work too: the grader is
# started the way a default Docker container starts it (course/grading/confine.py no-namespaces).
grader-attacks:
	uv run python -m course.grading attacks

# CI's subset at both levels: every attack at once in one zip, the runaway processes, the notes
# between sandboxes, the busy neighbour, the replayed answers, and tests/test_grader.py in container mode.
grader-attacks-smoke:
	uv run python -m course.grading attacks --attacks smoke

# The full-rubric hang zip alone, at both levels: a 64/64 solution whose train_bpe starts a pool that
# never starts must grade 49/64 (minutes per level: not in CI).
grader-hang:
	uv run python -m course.grading attacks --attacks hang

grader-attacks-container:
	uv run python -m course.grading attacks --level container --attacks $(or $(CS336_GRADER_ATTACKS),smoke)

# --- Benchmarks (benchmarks/, see docs/benchmarks.md) ---
# Ours beside peer libraries, as ratios; prints a table and writes benchmarks/results/bench-<time>.json.
# Options go in BENCH_ARGS, e.g. make bench BENCH_ARGS="--input owt_train.txt --torch-threads 1".
bench:
	uv run python -m benchmarks.run $(BENCH_ARGS)

# The same harness end to end on tiny inputs (asserts no timings); for CI.
bench-smoke:
	uv run python -m benchmarks.run --smoke

# How long the suites take, side by side on this machine: the repository's `pytest`, the handout's
# suite with the reference solution and, given UPSTREAM=path/to/an/upstream/checkout, upstream's.
bench-suite:
	uv run python -m benchmarks.suite $(if $(UPSTREAM),--upstream "$(UPSTREAM)")
