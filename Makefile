# nicguard developer commands. `make run` and `make test` do all set-up on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Tools the tests look up on PATH (kubectl) come from the venv first: the pinned dev dependencies.
ON_PATH = PATH="$(CURDIR)/$(BIN):$$PATH"
# The unit tier again on Python 3.13 (what the Docker image runs), in a venv of its own.
VENV313 := .venv-3.13
STAMP313 := $(VENV313)/.installed
PYTHON313 ?= $(shell p="$$(pyenv prefix 3.13 2>/dev/null | head -n 1)"; \
  if [ -x "$$p/bin/python3.13" ]; then echo "$$p/bin/python3.13"; else command -v python3.13; fi)

.PHONY: dev run test lint unit unit-py313 slow e2e k8s-bins helm demo clean
.DEFAULT_GOAL := dev

# `make`: the venv and the tools the fast tier needs; then a bare `pytest` runs it (not e2e, slow).
dev: $(STAMP) promtool helm oracle
	@echo "nicguard: ready. pytest (fast tier), make run, make test; CONTRIBUTING.md has the rest"

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

# The fast tier: everything but the e2e tier and the timing windows of a live process (slow),
# with every Hypothesis example: the ci profile (tests/support/examples.py; a bare `pytest` tries fewer).
unit: $(STAMP) promtool helm oracle
	NICGUARD_HELM="$$(scripts/helm-bin.sh)" NICGUARD_ORACLE="$$(scripts/oracle-bin.sh)" $(ON_PATH) \
	  $(BIN)/pytest -m "not e2e and not slow" --hypothesis-profile=ci \
	  --cov --cov-report=term-missing:skip-covered
	$(BIN)/coverage report --include='app/domain/*' --fail-under=100
	$(BIN)/coverage report --fail-under=90 --format=total  # in-process branch coverage of app/, %

# promtool checks and unit-tests the alert rules (tests/monitoring); installed like wrk below.
.PHONY: promtool
promtool:
	@command -v promtool >/dev/null 2>&1 || { \
	  sudo=$$([ "$$(id -u)" = 0 ] || echo "sudo -n"); \
	  echo "unit: installing promtool (Debian package prometheus) with apt-get"; \
	  $$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus; }

# Timing windows on a live `nicguard serve` (graceful shutdown): seconds each, run by `make test`;
# and the image replay (tests/test_image_replay.py: root, strace, PYTHON313 as below; ~40 s).
slow: $(STAMP) strace
	PYTHON313="$(PYTHON313)" $(ON_PATH) $(BIN)/pytest -m slow

# The fast tier again on Python 3.13 (the slow tier runs once, in `make slow`): PYTHON313 is found with
# `pyenv prefix 3.13`, else python3.13 on PATH; pass PYTHON313=/path/to/python3.13 to choose.
unit-py313: $(STAMP313) promtool helm oracle
	NICGUARD_HELM="$$(scripts/helm-bin.sh)" NICGUARD_ORACLE="$$(scripts/oracle-bin.sh)" PATH="$(CURDIR)/$(VENV313)/bin:$$PATH" PYTHON313="$(PYTHON313)" \
	  $(VENV313)/bin/pytest -m "not e2e and not slow" --hypothesis-profile=ci

$(STAMP313): pyproject.toml
	@py="$(PYTHON313)"; \
	if [ -z "$$py" ] || ! "$$py" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))'; then \
	  echo "unit-py313: no Python 3.13 (got '$$py' from PYTHON313, 'pyenv prefix 3.13' or" \
	    "python3.13 on PATH): install one (pyenv install 3.13) or pass PYTHON313=/path/to/it" >&2; \
	  exit 1; \
	fi; \
	echo "unit-py313: $$py -m venv $(VENV313)"; \
	"$$py" -m venv $(VENV313)
	$(VENV313)/bin/pip install --quiet --upgrade pip
	$(VENV313)/bin/pip install --quiet -e '.[dev]'
	touch $@

# requirements.lock, what the image installs (--require-hashes): every runtime dependency and the
# build backend, pinned and hashed for Python 3.13 on Linux x86_64. Run after changing the
# dependencies of pyproject.toml (tests/test_lock.py fails until then).
.PHONY: lock
lock: $(STAMP)
	$(BIN)/python -m scripts.lock

# The image replay alone, with its transcript (tests/test_image_replay.py, also in `make slow`): the
# Dockerfile's instructions performed without Docker on Python 3.13 (PYTHON313, found as above),
# then nicguard run as uid 65532 under strace. Needs root (CI runs as root), strace and setpriv.
.PHONY: image-replay strace
image-replay: $(STAMP) strace
	PYTHON313="$(PYTHON313)" $(BIN)/pytest -m slow -s tests/test_image_replay.py

strace:
	@command -v strace >/dev/null 2>&1 && command -v setpriv >/dev/null 2>&1 || { \
	  sudo=$$([ "$$(id -u)" = 0 ] || echo "sudo -n"); \
	  echo "image-replay: installing strace and util-linux (setpriv) with apt-get"; \
	  $$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends strace util-linux; }

# kube-apiserver + etcd for the e2e tier: prints their directory (reuses the cache; builds once).
k8s-bins:
	@scripts/k8s-bins.sh

# helm for the chart tests (tests/chart, tests/e2e/test_helm.py): prints its path (builds once).
helm:
	@scripts/helm-bin.sh

# The differential tests' Go oracle (tests/oracle, tests/differential): prints its path (builds once).
.PHONY: oracle
oracle:
	@scripts/oracle-bin.sh

# End-to-end tests against a real kube-apiserver + etcd on loopback (fails, never skips, without them).
e2e: $(STAMP) k8s-bins helm
	bins="$$(scripts/k8s-bins.sh)" && NICGUARD_K8S_BIN_DIR="$$bins" NICGUARD_HELM="$$(scripts/helm-bin.sh)" $(ON_PATH) \
	  $(BIN)/pytest -m e2e tests/e2e -v

# The controllers of the chain tier, from the Go module proxy: prints their directory (builds once,
# cold on 2 busy cores ~6 min each for Trainer and JobSet, ~15 min for Kueue; scripts/chain-bins.sh).
CHAIN_COMPONENTS := trainer jobset kueue
.PHONY: chain-bins chain
chain-bins:
	@scripts/chain-bins.sh $(CHAIN_COMPONENTS)

# The chain tier (tests/chain): the real Trainer, JobSet, Job controller and garbage collector turn
# TrainJobs into Pods through nicguard on the e2e tier's control plane; Kueue queues and resumes them.
chain: $(STAMP) k8s-bins chain-bins
	bins="$$(scripts/k8s-bins.sh)" && chain="$$(scripts/chain-bins.sh $(CHAIN_COMPONENTS))" && \
	  NICGUARD_K8S_BIN_DIR="$$bins" NICGUARD_CHAIN_DIR="$$chain" $(ON_PATH) \
	  $(BIN)/pytest -m chain tests/chain -v

# The compatibility matrix (docs/compatibility.md; run before each release, not by `make test`):
# the e2e and chain tiers on each supported Kubernetes minor's newest patch (and 1.33, the newest
# without resource.k8s.io/v1), the chain tier on each supported Trainer release; builds what the
# caches lack (~8 min a minor, ~6 a Trainer), prints a summary, exits 1 if any run fails.
# Narrow it with space-separated COMPAT_K8S, COMPAT_TIERS, COMPAT_TRAINERS (scripts/compat.py).
.PHONY: compat
compat: $(STAMP) helm
	$(ON_PATH) $(BIN)/python -m scripts.compat

# nicguard behind a real apiserver: one good apply and three denials, then everything is stopped.
# A module run from the repository root, so the e2e harness imports as the package tests.e2e.
demo: $(STAMP) k8s-bins
	@bins="$$(scripts/k8s-bins.sh)" && NICGUARD_K8S_BIN_DIR="$$bins" $(ON_PATH) \
	  $(BIN)/python -m scripts.demo

# Benchmarks (BENCHMARKS.md): nicguard under wrk beside a bare Go echo (built with go), a bare
# FastAPI echo on uvicorn's defaults and the same on nicguard's stack, RSS with 10,000
# cached objects, the audit's CPU, then scale in file mode (RSS at 10,000 in six mixes and layouts,
# the slope to 100,000, ready at 100,000), then the Pod door: bursts of 1,000 Pod creates through
# a real kube-apiserver with the shipped webhook configuration and without (bench/pod_door.py).
# Installs wrk when missing; exits 1 when a target is missed.
# `make bench-py313`: the same on Python 3.13, the image's interpreter (both servers, the states).
# `make bench-py313-pgo`: the same on CPython 3.13 built as the image's is, with PGO and LTO (built
# once, ~20 min: scripts/python-pgo-bin.sh), in its own venv.
.PHONY: bench bench-py313 bench-py313-pgo wrk
bench: $(STAMP) wrk k8s-bins
	bins="$$(scripts/k8s-bins.sh)" && export NICGUARD_K8S_BIN_DIR="$$bins" $(ON_PATH) && status=0; \
	  $(BIN)/python -m bench.run || status=$$?; \
	  $(BIN)/python -m bench.audit_pass || status=$$?; \
	  $(BIN)/python -m bench.scale || status=$$?; \
	  $(BIN)/python -m bench.pod_door || status=$$?; exit $$status

bench-py313: $(STAMP313) wrk k8s-bins
	bins="$$(scripts/k8s-bins.sh)" && export NICGUARD_K8S_BIN_DIR="$$bins" PATH="$(CURDIR)/$(VENV313)/bin:$$PATH" && status=0; \
	  $(VENV313)/bin/python -m bench.run || status=$$?; \
	  $(VENV313)/bin/python -m bench.audit_pass || status=$$?; \
	  $(VENV313)/bin/python -m bench.scale || status=$$?; \
	  $(VENV313)/bin/python -m bench.pod_door || status=$$?; exit $$status

bench-py313-pgo:
	py="$$(scripts/python-pgo-bin.sh)" && $(MAKE) bench-py313 PYTHON313="$$py" VENV313=$(VENV313)-pgo

wrk:
	@command -v wrk >/dev/null 2>&1 || { \
	  sudo=$$([ "$$(id -u)" = 0 ] || echo "sudo -n"); \
	  echo "bench: installing wrk with apt-get"; \
	  $$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends wrk; }

# End to end on a real control plane (BENCHMARKS.md): create latency with no admission, an in-tree
# ValidatingAdmissionPolicy, bare FastAPI and Go echo webhooks and nicguard, as `kubectl create`
# processes (a kubectl-equivalent create: the target) and as bare POSTs on a warm
# connection (the strict view, printed); then nicguard's RSS in Kubernetes mode with 10,000
# cached objects; then a burst of TrainJob creates from 20 clients, the apiserver's time in the
# webhook call beside bare echoes (bench.burst: no target; fails only when it cannot measure); then
# TrainJob apply to all Pods through the real controllers, with and without nicguard (bench.chain).
# Exits 1 when the kubectl-view or RSS target is missed.
.PHONY: bench-e2e
bench-e2e: $(STAMP) k8s-bins chain-bins wrk
	bins="$$(scripts/k8s-bins.sh)" && export NICGUARD_K8S_BIN_DIR="$$bins" $(ON_PATH) && status=0; \
	  export NICGUARD_CHAIN_DIR="$$(scripts/chain-bins.sh $(CHAIN_COMPONENTS))"; \
	  $(BIN)/python -m bench.e2e --client kubectl || status=$$?; \
	  $(BIN)/python -m bench.e2e --client api || echo "bench-e2e: the strict view misses 15 %"; \
	  $(BIN)/python -m bench.kube_rss || status=$$?; \
	  $(BIN)/python -m bench.audit_e2e || status=$$?; \
	  $(BIN)/python -m bench.burst || status=$$?; \
	  $(BIN)/python -m bench.chain || status=$$?; exit $$status

test: lint unit unit-py313 slow e2e chain

clean:
	rm -rf $(VENV) $(VENV313) $(VENV313)-pgo certs .pytest_cache .mypy_cache .ruff_cache .coverage
