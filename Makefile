# Developer and instructor commands; see README.md.
.PHONY: test demo fixtures check-fixtures

test:
	uv run pytest

demo:
	uv run cs336 pipeline

fixtures:
	uv run python -m course.fixtures

check-fixtures:
	uv run python -m course.manifest
