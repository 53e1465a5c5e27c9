# memtop: `make run` sets up (first time only) and starts memtop; `make test` runs the suite.
VENV ?= .venv
ARGS ?=
PYTEST_ARGS ?=

.PHONY: run test setup lint typecheck bench screenshots clean

run: setup
	$(VENV)/bin/memtop $(ARGS)

test: setup
	$(VENV)/bin/python -m pytest $(PYTEST_ARGS)

setup:
	@bash scripts/setup.sh

lint: setup
	$(VENV)/bin/ruff check memtop tests

typecheck: setup
	$(VENV)/bin/mypy

bench: setup
	$(VENV)/bin/python bench/run.py

clean:
	rm -rf $(VENV) dist build .pytest_cache .mypy_cache
