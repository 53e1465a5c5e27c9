# memtop: `make run` sets up (first time only) and starts memtop; `make test` runs the suite.
VENV ?= .venv
ARGS ?=
PYTEST_ARGS ?=

.PHONY: run test setup lint typecheck bench screenshots recording image clean

run: setup
	$(VENV)/bin/memtop $(ARGS)

test: setup
	$(VENV)/bin/python -m pytest $(PYTEST_ARGS)

setup:
	@bash scripts/setup.sh

# the guard rails .ci/run and the pre-commit hooks run: formatting, lint, strict types over memtop,
# tests, bench and scripts (pyproject.toml [tool.mypy]), the import contracts ([tool.importlinter])
lint: setup
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-logo

typecheck: setup
	$(VENV)/bin/mypy

# an SVG of every pane and of the drill-in screen, replayed from a recording made under pressure
screenshots: setup
	$(VENV)/bin/python scripts/screenshots.py tests/data/pressure.jsonl.gz --output-dir screenshots

# re-make that recording on this machine (root: memory cgroup 100 MiB + swap, 300 MiB workload, a leaker)
recording: setup
	$(VENV)/bin/python scripts/make_recording.py

# every case (root), each into bench/results/NAME.json, then bench/report.py: bench/RESULTS.md
bench: setup
	$(VENV)/bin/python bench/run.py

# the exporter's container image (contrib/container/Containerfile; IMAGE names its tag): memtop's
# wheel and its dependencies' built here with pip, then podman builds from build/
IMAGE ?= localhost/memtop:latest
image: setup
	PIP=$(VENV)/bin/pip bash scripts/container_image.sh $(IMAGE)

clean:
	rm -rf $(VENV) dist build .pytest_cache .mypy_cache .ruff_cache .import_linter_cache
