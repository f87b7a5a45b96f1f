#!/usr/bin/env bash
# helm-bin.sh - print ONE line on stdout: the path of a `helm` executable for the chart tests.
# Precedence: NICGUARD_HELM (an explicit executable, printed as-is) > versioned cache, built once from
#   the Go module proxy (a throw-away wrapper module; no upstream source enters this repo). Progress -> stderr.
# Env: NICGUARD_HELM_VERSION (v3.22.0), NICGUARD_HELM_CACHE (cache root), NICGUARD_GOTOOLCHAIN (auto),
#   NICGUARD_NO_BUILD=1 (print the cached helm or fail; never build: what the tests use).
# Usage: HELM=$(scripts/helm-bin.sh)
set -euo pipefail
# shellcheck source=scripts/cache-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/cache-lib.sh" helm-bin

HELM_VERSION="${NICGUARD_HELM_VERSION:-v3.22.0}"
[[ "$HELM_VERSION" =~ ^v3\.[0-9]+\.[0-9]+$ ]] || die "NICGUARD_HELM_VERSION must look like v3.22.0"
BIN_DIR="$(cache_root "${NICGUARD_HELM_CACHE:-}")/helm-$HELM_VERSION"
BIN="$BIN_DIR/helm"

# 1) explicit binary: must be an executable file.
emit_explicit NICGUARD_HELM

# 2) versioned cache: fast path without the lock, then re-check under an exclusive flock.
reuse_or_lock "$BIN_DIR" "$BIN" "build helm $HELM_VERSION" \
  "helm $HELM_VERSION is not built: run \`make helm\`" test -x "$BIN"

go_build_env mod
WORK="$BIN_DIR/build"       # the wrapper module lives here (only go.mod/go.sum), removed after success
tmp="$BIN_DIR/.helm.tmp.$$"
rm -f "$BIN_DIR"/.helm.tmp.*                 # leftovers of interrupted builds (we hold the lock)
trap 'rm -f "$tmp"' EXIT
trap 'exit 130' INT TERM HUP                 # make signals run the EXIT trap too

SECONDS=0
log "building helm $HELM_VERSION (cold ~3 min on 2 cores)..."
rm -rf "$WORK"; mkdir -p "$WORK"; cd "$WORK"
go mod init nicguard.local/helm-bin 2>/dev/null
go get "helm.sh/helm/v3@$HELM_VERSION"
# As helm's own Makefile does: the version `helm version` prints, and the Kubernetes version that
# `helm template`/`helm lint` assume (from the client-go it is built with; unset, they assume 1.20,
# which fails a chart's kubeVersion constraint).
client_go="$(go list -f '{{.Version}}' -m k8s.io/client-go)"
[[ "$client_go" =~ ^v0\.([0-9]+)\. ]] || die "unexpected k8s.io/client-go version: $client_go"
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
for pkg in pkg/lint/rules pkg/chartutil; do
  ldflags+=" -X helm.sh/helm/v3/$pkg.k8sVersionMajor=1 -X helm.sh/helm/v3/$pkg.k8sVersionMinor=${BASH_REMATCH[1]}"
done
go build -p "$PAR" -trimpath -ldflags "$ldflags" -o "$tmp" helm.sh/helm/v3/cmd/helm
"$tmp" version --short >/dev/null 2>&1 || die "helm built but 'helm version' fails"
"$tmp" template --help >/dev/null 2>&1 || die "helm built but 'helm template --help' fails"
mv -f "$tmp" "$BIN"
log "helm $("$BIN" version --short) -> $BIN ($(du -h "$BIN" | cut -f1)) built in ${SECONDS}s"
cd /; rm -rf "$WORK"
emit "$BIN"
