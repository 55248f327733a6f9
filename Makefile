# Each target bootstraps .venv by itself: `make demo` and `make test` work on a fresh machine.
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c
PY ?= python3
QUIET := 2>&1 | { grep -v "is ignored: it is neither" || true; }
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml Makefile | sha256sum | cut -c1-12)

.PHONY: demo test bench lint fmt clean screenshots

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip $(QUIET)
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[dev,bench,agentdojo]' $(QUIET)
	rm -f $(VENV)/.installed-*
	touch $@

demo: $(STAMP)
	$(BIN)/maitre demo

test: $(STAMP)
	$(BIN)/ruff check src tests examples benchmarks
	$(BIN)/ruff format --check --quiet src tests examples benchmarks
	$(BIN)/mypy
	$(BIN)/python -m pytest

# Rewrite docs/console/*.png (the README's pictures) from the browser tests; `make test` leaves them be.
screenshots: $(STAMP)
	MAITRE_SCREENSHOTS=docs $(BIN)/python -m pytest tests/browser/test_screenshots.py

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

lint: $(STAMP)
	$(BIN)/ruff check src tests examples benchmarks
	$(BIN)/ruff format --check src tests examples benchmarks
	$(BIN)/mypy

fmt: $(STAMP)
	$(BIN)/ruff format src tests examples benchmarks

clean:
	rm -rf $(VENV) build dist .pytest_cache
