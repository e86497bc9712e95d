PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-benchmarks

.PHONY: demo test lint bench clean clean-cache

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test,plot]"
	touch $(STAMP)

$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e ".[test,plot,benchmarks]"
	touch $(BENCH_STAMP)

demo: $(STAMP)
	$(VENV)/bin/cipherforest demo

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks

test: lint
	$(PY) -m pytest -n 2 -q

bench: $(BENCH_STAMP)
	$(PY) benchmarks/trees.py --markdown docs/benchmarks-trees-latest.md

clean-cache:
	find src -name '*.nbi' -delete -o -name '*.nbc' -delete

clean: clean-cache
	rm -rf $(VENV) build *.egg-info src/*.egg-info
