# One command per job, the same locally and in CI (.ci/run calls `make test`).
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: help install browser serve test fuzz lint typecheck check bench clean

help:  ## list the targets
	@grep -E '^[a-z]+:.*##' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP) browser  ## create .venv and install ranch with its dev tools

# The browser tests drive Debian's chromium; Playwright's own browser download is never used.
CHROMIUM := /usr/bin/chromium

browser:  ## install chromium for the browser tests (apt-get, only when /usr/bin/chromium is missing)
	@test -x $(CHROMIUM) || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }
	@test -x $(CHROMIUM) || { echo "chromium is still missing at $(CHROMIUM)"; exit 1; }

serve: $(STAMP)  ## run the built-in demo team on http://127.0.0.1:8000 (the page: key rk_demo)
	$(BIN)/ranch serve

test: $(STAMP) browser  ## the whole suite: ruff, mypy --strict, then pytest
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy
	$(BIN)/pytest -q

FUZZ_TESTS := tests/policy/test_fuzz.py tests/policy/test_api_fuzz.py

fuzz: $(STAMP)  ## the fuzz properties random, 50x the suite's examples (RANCH_FUZZ=long; about half an hour)
	RANCH_FUZZ=long $(BIN)/pytest -q $(FUZZ_TESTS)

lint: $(STAMP)  ## ruff check and format check
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: $(STAMP)  ## mypy --strict over src, tests and bench
	$(BIN)/mypy

check: lint test  ## format check, then the whole suite

bench: $(STAMP)  ## side-by-side benchmarks (see bench/README.md)
	$(BIN)/python -m bench

clean:  ## remove the virtualenv and caches
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
