# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
# TORCH picks the torch build installed first (default: the CPU build 2.13.0), e.g.
#   make test TORCH="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu126"
PYTHON ?= python3
TORCH ?= torch==2.13.0
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# Python writes bytecode for the test run whatever PYTHONDONTWRITEBYTECODE says: the test modules' assertion
# rewriting (about 12 s of each xdist worker's start) and gnplace's modules are compiled once, not in every process
BYTECODE := env -u PYTHONDONTWRITEBYTECODE

.PHONY: demo test lint test-slow bench install clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet $(TORCH)
	$(PY) -m pip install --quiet -e '.[dev]'
	$(PY) -m gnplace.warmup
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(PY) scripts/demo.py

# mypy takes one core for a minute and a half: pytest compiles the test modules on the other meanwhile.
# --maxschedchunk 1: each worker takes its next test when it ends one, the tests marked heavy first (conftest.py)
test: $(STAMP)
	$(VENV)/bin/ruff check gnplace tests scripts
	$(VENV)/bin/mypy gnplace scripts & mypy=$$!; \
	  $(BYTECODE) $(PY) -m pytest --collect-only -q -p no:xdist > /dev/null; \
	  wait $$mypy
	$(BYTECODE) $(PY) -m pytest -n 2 --maxschedchunk 1 --durations=20

lint: $(STAMP)
	$(VENV)/bin/ruff check gnplace tests scripts
	$(VENV)/bin/mypy gnplace scripts

test-slow: $(STAMP)
	$(PY) -m pytest -m slow

bench: $(STAMP)
	$(PY) scripts/bench.py sim

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis .mypy_cache .ruff_cache
