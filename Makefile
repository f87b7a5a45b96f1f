# nicguard developer commands. `make run` and `make test` do all set-up on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint unit e2e k8s-bins demo clean

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
	$(BIN)/ruff check app tests scripts bench
	$(BIN)/ruff format --check app tests scripts bench
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/hadolint Dockerfile

unit: $(STAMP)
	$(BIN)/pytest -m "not e2e" --cov --cov-report=term-missing:skip-covered
	$(BIN)/coverage report --include='app/domain/*' --fail-under=100

# kube-apiserver + etcd for the e2e tier: prints their directory (reuses the cache; builds once).
k8s-bins:
	@scripts/k8s-bins.sh

# End-to-end tests against a real kube-apiserver + etcd on loopback (fails, never skips, without them).
e2e: $(STAMP) k8s-bins
	bins="$$(scripts/k8s-bins.sh)" && NICGUARD_K8S_BIN_DIR="$$bins" $(BIN)/pytest -m e2e tests/e2e -v

# nicguard behind a real apiserver: one good apply and three denials, then everything is stopped.
demo: $(STAMP) k8s-bins
	@bins="$$(scripts/k8s-bins.sh)" && NICGUARD_K8S_BIN_DIR="$$bins" $(BIN)/python scripts/demo.py

# Benchmarks (BENCHMARKS.md): nicguard beside a bare FastAPI/uvicorn echo under wrk, RSS with 10,000
# cached objects. Installs wrk from the distribution when missing; exits 1 when a target is missed.
.PHONY: bench wrk
bench: $(STAMP) wrk
	$(BIN)/python -m bench.run

wrk:
	@command -v wrk >/dev/null 2>&1 || { \
	  sudo=$$([ "$$(id -u)" = 0 ] || echo "sudo -n"); \
	  echo "bench: installing wrk with apt-get"; \
	  $$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends wrk; }

# End to end on a real control plane (BENCHMARKS.md): create latency with no admission, an in-tree
# ValidatingAdmissionPolicy, bare FastAPI and Go echo webhooks and nicguard, as `kubectl create`
# processes (SPEC 10's kubectl-equivalent create: the target) and as bare POSTs on a warm
# connection (the strict view, printed); then nicguard's RSS in Kubernetes mode with 10,000
# cached objects. Exits 1 when the kubectl-view or RSS target is missed.
.PHONY: bench-e2e
bench-e2e: $(STAMP) k8s-bins wrk
	bins="$$(scripts/k8s-bins.sh)" && export NICGUARD_K8S_BIN_DIR="$$bins" && status=0; \
	  $(BIN)/python -m bench.e2e --client kubectl || status=$$?; \
	  $(BIN)/python -m bench.e2e --client api || echo "bench-e2e: the strict view misses 15 %"; \
	  $(BIN)/python -m bench.kube_rss || status=$$?; exit $$status

test: lint unit e2e

clean:
	rm -rf $(VENV) certs .pytest_cache .mypy_cache .ruff_cache .coverage
