# Two entry points that work on a fresh machine with Python 3.11: `make demo` and `make test`.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck unit docs bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/caldera simulate --cycles 2 examples/
	@echo
	@echo "== why is production/climate-sim-0 pending in cycle 2? (caldera explain) =="
	$(BIN)/caldera explain --cycles 2 production/climate-sim-0 examples/

test: lint typecheck docs unit

lint: $(STAMP)
	$(BIN)/ruff check operator tests benchmarks examples
	$(BIN)/ruff format --check operator tests benchmarks examples
	PYTHONPATH=operator $(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

# the documentation site: every page and anchor a link names must exist
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir $(VENV)/site

unit: $(STAMP)
	$(BIN)/pytest

bench: $(STAMP)
	$(BIN)/python benchmarks/scheduling_basic.py --nodes 5000 --pods 10000
	$(BIN)/python benchmarks/scheduling_basic.py --nodes 1000 --pods 10000 --gang-size 20

clean:
	rm -rf $(VENV) site .mypy_cache .ruff_cache .pytest_cache .import_linter_cache
