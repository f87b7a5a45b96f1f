#!/usr/bin/env bash
# oracle-bin.sh - print ONE line on stdout: the path of the differential tests' Go oracle
# (tests/oracle: GKE's annotation parser, Trainer's patch merge and snapshot decoding, kubectl's YAML
# reading, from the upstream modules pinned in its go.mod/go.sum). Precedence: NICGUARD_ORACLE (an explicit executable, printed as-is) > cache,
# built once per source version (key: hash of tests/oracle's go.mod, go.sum and *.go) from the Go
# module proxy with GOFLAGS=-mod=readonly. Progress -> stderr.
# Env: NICGUARD_ORACLE_CACHE (cache root), NICGUARD_GOTOOLCHAIN (auto: may fetch go.mod's toolchain),
#   NICGUARD_NO_BUILD=1 (print the cached oracle or fail; never build: what the tests use).
# Usage: ORACLE=$(scripts/oracle-bin.sh)
set -euo pipefail
# shellcheck source=scripts/cache-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/cache-lib.sh" oracle-bin

# 1) explicit binary: must be an executable file.
emit_explicit NICGUARD_ORACLE

SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")/../tests/oracle" && pwd)"
[[ -f "$SRC/go.mod" && -f "$SRC/go.sum" ]] || die "no go.mod/go.sum in $SRC"
KEY="$(cd "$SRC" && { cat go.mod go.sum; printf '%s\0' *.go | LC_ALL=C sort -z | xargs -0 cat; } \
  | sha256sum | cut -c1-16)"
BIN_DIR="$(cache_root "${NICGUARD_ORACLE_CACHE:-}")/oracle-$KEY"
BIN="$BIN_DIR/oracle"

# 2) cache: fast path without the lock, then re-check under an exclusive flock.
reuse_or_lock "$BIN_DIR" "$BIN" "build the oracle from $SRC" \
  "the oracle is not built for these sources: run \`make oracle\`" test -x "$BIN"

go_build_env readonly
tmp="$BIN_DIR/.oracle.tmp.$$"
rm -f "$BIN_DIR"/.oracle.tmp.*               # leftovers of interrupted builds (we hold the lock)
trap 'rm -f "$tmp"' EXIT
trap 'exit 130' INT TERM HUP                 # make signals run the EXIT trap too

SECONDS=0
log "building the oracle from $SRC (cold ~2 CPU-minutes; modules from $(go env GOPROXY))..."
(cd "$SRC" && go build -p "$PAR" -trimpath -ldflags "-s -w" -o "$tmp" .)
answer="$(printf '{"id":0,"op":"versions"}\n' | "$tmp")" || die "oracle built but does not answer"
[[ "$answer" == *'"github.com/kubeflow/trainer/v2":"v2.3.0"'* ]] || die "oracle built but answers: $answer"
mv -f "$tmp" "$BIN"
log "oracle -> $BIN ($(du -h "$BIN" | cut -f1)) built in ${SECONDS}s"
emit "$BIN"
