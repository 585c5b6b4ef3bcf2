# Two commands matter: `make run` (set up, start the main job) and `make test` (set up, run everything).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
TEST_WORKERS ?= auto  # pytest-xdist workers: one per core
STAMP := $(VENV)/.installed

.PHONY: setup browser run test lint bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is required (found %s)" % sys.version.split()[0])'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: setup
	@echo "In a second terminal (same SCRATCHPAD_HOME): source $(BIN)/activate, then e.g. scratchpad exec main 'print(1)'"
	$(BIN)/scratchpad serve

lint: setup
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy

# Debian's chromium for the web UI's tests: Playwright drives it (no browser download). Where it
# cannot be installed (not Debian, not root), the browser tests say what is missing and skip.
browser:
	@if [ -x "$${SCRATCHPAD_BROWSER:-/usr/bin/chromium}" ]; then :; \
	elif command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	  echo "installing Debian's chromium for the browser tests"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    --no-install-recommends chromium fonts-liberation >/dev/null; \
	elif command -v apt-get >/dev/null && sudo -n true 2>/dev/null; then \
	  echo "installing Debian's chromium for the browser tests (sudo)"; \
	  sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    --no-install-recommends chromium fonts-liberation >/dev/null; \
	else \
	  echo "note: no chromium at /usr/bin/chromium and no apt-get as root: the browser tests skip"; \
	fi

test: setup browser lint
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile

bench: setup
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	$(BIN)/python bench/runtime.py
	$(BIN)/python bench/checkpoint.py
	$(BIN)/python bench/observations.py
	$(BIN)/python bench/server.py
	$(BIN)/python bench/events.py
	$(BIN)/python bench/scrub.py
	$(BIN)/python bench/confinement.py
	$(BIN)/python bench/sleep.py
	$(BIN)/python bench/ray_backend.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
