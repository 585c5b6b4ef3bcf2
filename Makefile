# Two commands matter: `make run` (set up, start the main job) and `make test` (set up, run everything).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup run test lint bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is required (found %s)" % sys.version.split()[0])'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: setup
	$(BIN)/scratchpad serve

lint: setup
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy

test: setup lint
	$(BIN)/pytest

bench: setup
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	$(BIN)/python bench/runtime.py
	$(BIN)/python bench/observations.py
	$(BIN)/python bench/server.py
	$(BIN)/python bench/scrub.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
