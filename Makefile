PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test,plot,benchmarks]"
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/cipherforest demo

test: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
	$(PY) -m pytest -n 2 -q

bench: $(STAMP)
	$(PY) benchmarks/trees.py

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
