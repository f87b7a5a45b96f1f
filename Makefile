# nicguard developer commands. `make run` and `make test` do all set-up on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint unit e2e clean

# Serve the webhook on the example cluster state (file mode) with self-signed certs in certs/.
run: $(STAMP)
	@echo "nicguard: webhook https://127.0.0.1:8443/validate, probes http://127.0.0.1:8080/{healthz,readyz,metrics}"
	@echo "try, in another shell:"
	@echo "  curl -sS --cacert certs/ca.crt -H 'Content-Type: application/json' --data @examples/reviews/drifted-runtime.json https://127.0.0.1:8443/validate"
	$(BIN)/nicguard serve --state examples/cluster --cert-dir certs --host 127.0.0.1

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
