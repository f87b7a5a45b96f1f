#!/usr/bin/env bash
# oracle-bin.sh - print ONE line on stdout: the path of the differential tests' Go oracle
# (tests/oracle: GKE's annotation parser and Trainer's patch merge, from the upstream modules pinned
# in its go.mod/go.sum). Precedence: NICGUARD_ORACLE (an explicit executable, printed as-is) > cache,
# built once per source version (key: hash of tests/oracle's go.mod, go.sum and *.go) from the Go
# module proxy with GOFLAGS=-mod=readonly. Progress -> stderr.
# Env: NICGUARD_ORACLE_CACHE (cache root), NICGUARD_GOTOOLCHAIN (auto: may fetch go.mod's toolchain),
#   NICGUARD_NO_BUILD=1 (print the cached oracle or fail; never build: what the tests use).
# Usage: ORACLE=$(scripts/oracle-bin.sh)
set -euo pipefail

exec 3>&1 1>&2            # stdout is reserved for the final path line; everything else -> stderr
log() { printf 'oracle-bin: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
emit() { printf '%s\n' "$1" >&3; exit 0; }

# 1) explicit binary: must be an executable file.
if [[ -n "${NICGUARD_ORACLE:-}" ]]; then
  [[ -f "$NICGUARD_ORACLE" && -x "$NICGUARD_ORACLE" ]] || die "NICGUARD_ORACLE is not an executable file: $NICGUARD_ORACLE"
  emit "$NICGUARD_ORACLE"
fi

SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")/../tests/oracle" && pwd)"
[[ -f "$SRC/go.mod" && -f "$SRC/go.sum" ]] || die "no go.mod/go.sum in $SRC"
KEY="$(cd "$SRC" && cat go.mod go.sum $(ls -- *.go | LC_ALL=C sort) | sha256sum | cut -c1-16)"
CACHE_ROOT="${NICGUARD_ORACLE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nicguard}"
BIN_DIR="$CACHE_ROOT/oracle-$KEY"
BIN="$BIN_DIR/oracle"

# 2) cache: fast path without the lock, then re-check under an exclusive flock.
if [[ -x "$BIN" ]]; then emit "$BIN"; fi
[[ "${NICGUARD_NO_BUILD:-}" != 1 ]] || die "the oracle is not built for these sources: run \`make oracle\`"
command -v go >/dev/null || die "go not found (needed once to build the oracle from $SRC)"
mkdir -p "$BIN_DIR"
exec 9>"$BIN_DIR/.lock"
if ! flock -n 9; then log "another build holds $BIN_DIR/.lock; waiting..."; flock 9; fi
if [[ -x "$BIN" ]]; then emit "$BIN"; fi

export GOTOOLCHAIN="${NICGUARD_GOTOOLCHAIN:-auto}" GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0
export GOWORK=off GO111MODULE=on
PAR="${NICGUARD_BUILD_PARALLELISM:-2}"
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
