# nicguard developer commands. `make run` and `make test` do all set-up on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint unit e2e check-env clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

lint: $(STAMP)
	$(BIN)/ruff check app tests
	$(BIN)/ruff format --check app tests
	$(BIN)/mypy
	$(BIN)/lint-imports

unit: $(STAMP)
	$(BIN)/pytest -m "not e2e" --cov --cov-report=term-missing:skip-covered
	$(BIN)/coverage report --include='app/domain/*' --fail-under=100

test: lint unit

clean:
	rm -rf $(VENV) certs .pytest_cache .mypy_cache .ruff_cache .coverage
