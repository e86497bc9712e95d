PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-benchmarks
DOCS_STAMP := $(VENV)/.installed-docs

.PHONY: demo test test-fast sklearn-tests lint bench docs precompile clean clean-cache

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test,plot]"
	$(PY) -m cipherforest.precompile
	touch $(STAMP)

$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e ".[test,plot,benchmarks]"
	touch $(BENCH_STAMP)

$(DOCS_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e ".[test,plot,docs]"
	touch $(DOCS_STAMP)

demo: $(STAMP)
	$(VENV)/bin/cipherforest demo

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks dev

test: lint
	$(PY) -m pytest -n 2 -q

# the same without the tests marked slow (fresh numba caches, the whole encrypted protocol)
test-fast: lint
	$(PY) -m pytest -n 2 -q -m "not slow"

# scikit-learn's own tree/ensemble tests against ours (minutes; see tests/sklearn_upstream)
sklearn-tests: $(STAMP)
	CIPHERFOREST_SKLEARN_UPSTREAM=1 $(PY) -m pytest -q -s -p no:cacheprovider \
		tests/sklearn_upstream/test_sklearn_upstream.py -k upstream_tests

bench: $(BENCH_STAMP)
	$(PY) benchmarks/trees.py --markdown docs/benchmarks-trees-latest.md

# The documentation site into site/ (docs/contributing.md): strict, so a broken link or anchor,
# a public name no API page documents or a public class without a docstring fails the build.
docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

# Compile the numba kernels into the cache again (the install step does it once; a changed
# source file drops the whole cache, see cipherforest/_kernel_cache.py).
precompile: $(STAMP)
	$(PY) -m cipherforest.precompile

clean-cache:
	find src -name '*.nbi' -delete -o -name '*.nbc' -delete

clean: clean-cache
	rm -rf $(VENV) build site *.egg-info src/*.egg-info
