# One command per job, the same locally and in CI (.ci/run calls `make test`).
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: help install browser haproxy a2a03 mcp1 adk agents benchjs serve cluster test fuzz lint typecheck check bench tck clean services

help:  ## list the targets
	@grep -E '^[a-z0-9-]+:.*##' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP) browser haproxy a2a03 mcp1 adk agents benchjs  ## create .venv and install ranch with its dev tools

# The browser tests drive Debian's chromium; Playwright's own browser download is never used.
CHROMIUM := /usr/bin/chromium

browser:  ## install chromium for the browser tests (apt-get, only when /usr/bin/chromium is missing)
	@test -x $(CHROMIUM) || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }
	@test -x $(CHROMIUM) || { echo "chromium is still missing at $(CHROMIUM)"; exit 1; }

# `make cluster` and its tests put replicas behind Debian's HAProxy.
HAPROXY := /usr/sbin/haproxy

haproxy:  ## install HAProxy for `make cluster` and its tests (apt-get, only when it is missing)
	@test -x $(HAPROXY) || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq haproxy; }
	@test -x $(HAPROXY) || { echo "haproxy is still missing at $(HAPROXY)"; exit 1; }

# The signed-card test checks ranch's cards with the real a2a-sdk 0.3 verifier, which cannot share
# a venv with ranch's a2a-sdk 1.x: it gets a small venv of its own, made once.
A2A03 := .venv-a2a03

$(A2A03)/.installed:
	$(PY) -m venv $(A2A03)
	$(A2A03)/bin/pip install -q 'a2a-sdk[signing]>=0.3.26,<0.4' 'cryptography>=43'
	touch $@

a2a03: $(A2A03)/.installed  ## a venv with a2a-sdk 0.3.x, for the signed-card test against 0.3 clients

# The MCP tests check ranch against the mcp 1.x SDK too (a 2025-era client and server), which cannot
# share a venv with ranch's mcp 2.x: it gets a small venv of its own, made once.
MCP1 := .venv-mcp1

$(MCP1)/.installed:
	$(PY) -m venv $(MCP1)
	$(MCP1)/bin/pip install -q 'mcp>=1.20,<2'
	touch $@

mcp1: $(MCP1)/.installed  ## a venv with the mcp 1.x SDK, for the MCP tests against 2025-era clients and servers

# The routing adapters (examples/routing_adapters/) are tested in the frameworks' own venvs, from PyPI
# and without ranch, as their users run them. ADK's A2A API is experimental: its minor is pinned, and
# its a2a extra takes the a2a-sdk 1.x the adapter is written for; its openai extra, the demo's model.
ADK := .venv-adk

$(ADK)/.installed:
	$(PY) -m venv $(ADK)
	$(ADK)/bin/pip install -q 'google-adk[a2a,openai]>=2.13,<2.14' 'a2a-sdk[http-server]>=1.3,<2' 'uvicorn>=0.34'
	touch $@

adk: $(ADK)/.installed  ## a venv with Google ADK 2.13, for examples/routing_adapters/adk.py and its test

AGENTS := .venv-agents

$(AGENTS)/.installed:
	$(PY) -m venv $(AGENTS)
	$(AGENTS)/bin/pip install -q 'openai-agents>=0.24,<0.25' 'a2a-sdk[http-server]>=1.3,<2' 'uvicorn>=0.34'
	touch $@

agents: $(AGENTS)/.installed  ## a venv with the OpenAI Agents SDK 0.24, for examples/routing_adapters/openai_agents.py and its test

# The wire benchmark compares ranch with the official @a2a-js/sdk server (Node): bench/js holds it,
# its package-lock.json pins every package, and `npm ci` installs exactly that, once.
BENCHJS := bench/js/node_modules/.installed

$(BENCHJS): bench/js/package-lock.json
	@command -v npm >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm; }
	cd bench/js && npm ci --no-audit --no-fund
	touch $@

benchjs: $(BENCHJS)  ## install the @a2a-js/sdk echo server the wire benchmark compares with (npm ci)

serve: $(STAMP)  ## run the built-in demo team on http://127.0.0.1:8000 (the page: key rk_demo)
	$(BIN)/ranch serve

cluster: $(STAMP) haproxy  ## 3 replicas on PostgreSQL and Redis behind HAProxy on http://127.0.0.1:8100 (docs/deploy.md)
	$(BIN)/python scripts/cluster.py $(CLUSTER_ARGS)

# The suite needs PostgreSQL and Redis running on 127.0.0.1 (README "The two commands"): this says in
# one line which one is not, before anything is installed or run.
SERVICES ?= PostgreSQL=127.0.0.1:5432 Redis=127.0.0.1:6379

services:  ## say in one line if PostgreSQL (127.0.0.1:5432) or Redis (127.0.0.1:6379), which the tests need, is not running
	@$(PY) -c 'import socket, sys; down = [f"{n} at {a}" for n, a in (s.split("=", 1) for s in sys.argv[1:]) if socket.socket().connect_ex((a.rsplit(":", 1)[0], int(a.rsplit(":", 1)[1])))]; down and sys.exit("make test needs " + " and ".join(down) + ", not running here (README, \"The two commands\")")' $(SERVICES)

# pytest-xdist: two workers per core, since the suite waits on servers, processes and timers more than it
# computes (one worker per core kept two cores about 40 % busy: 312 s of pytest, against 218 s with two per
# core). A file's tests share a worker (its module-scoped servers start once, and the benchmark smoke
# tests, which pin CPUs, never run side by side). WORKERS=0 runs serially.
WORKERS ?= $(shell echo $$((2 * $$(nproc))))
# PRECOMPILED: the suite starts about two hundred Python processes (servers, replicas, CLI commands). Where
# PYTHONDONTWRITEBYTECODE is set (containers often set it), none of them writes bytecode, so each would
# compile ranch's modules from source again; `compileall` writes it once, before pytest starts them.

test: services $(STAMP) browser haproxy a2a03 mcp1 adk agents benchjs  ## the whole suite: ruff, mypy --strict, the layers contract, pytest on two workers per core, then the benchmarks' smoke runs
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python -m compileall -q -j 0 src tests  # see PRECOMPILED
	$(BIN)/pytest -q -n $(WORKERS) --dist loadfile -m "not bench_smoke"
	$(MAKE) --no-print-directory bench-smoke

bench-smoke: $(STAMP) benchjs  ## each benchmark at its smallest: it still runs and prints its tables (no speed asserted)
	$(BIN)/pytest -q -n 1 -m bench_smoke  # one file, one worker: the benchmarks take whole CPUs

FUZZ_TESTS := tests/policy/test_fuzz.py tests/policy/test_api_fuzz.py tests/wire/test_codec.py \
	tests/wire/test_jsonrpc_equivalence.py tests/tasks/test_store.py

fuzz: $(STAMP)  ## the property tests random, 50x the suite's examples (RANCH_FUZZ=long; about an hour)
	RANCH_FUZZ=long $(BIN)/pytest -q $(FUZZ_TESTS)

lint: $(STAMP)  ## ruff check and format check
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/ruff format --check src tests bench scripts

typecheck: $(STAMP)  ## mypy --strict over src, tests and bench
	$(BIN)/mypy

check: lint test  ## format check, then the whole suite

bench: $(STAMP) benchjs  ## side-by-side benchmarks (see bench/README.md)
	$(BIN)/python -m bench

tck: $(STAMP)  ## the A2A conformance suite against `ranch serve --root tck` (TCK=/path/to/a2a-tck make tck)
	@test -n "$(TCK)" || { echo "usage: TCK=/path/to/a2a-tck make tck (docs/conformance.md)"; exit 2; }
	TCK="$(TCK)" RANCH_BIN="$(BIN)" bash scripts/tck.sh

clean:  ## remove the virtualenv and caches
	rm -rf $(VENV) $(A2A03) $(MCP1) $(ADK) $(AGENTS) bench/js/node_modules .pytest_cache .mypy_cache .ruff_cache
