# cache-lib.sh - sourced (`. cache-lib.sh NAME`) by helm-bin.sh, oracle-bin.sh, k8s-bins.sh and
# python-pgo-bin.sh: how each finds or builds its tool once under ~/.cache/nicguard. Stdout is kept
# for the one line the script prints (the path), a build runs under a flock so concurrent runs wait
# for it instead of building twice, and log lines go to stderr prefixed with NAME.
# shellcheck shell=bash

exec 3>&1 1>&2            # stdout is reserved for the final path line; everything else -> stderr
CACHE_LIB_NAME="$1"
log() { printf '%s: %s\n' "$CACHE_LIB_NAME" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
emit() { printf '%s\n' "$1" >&3; exit 0; }

# cache_root OVERRIDE: OVERRIDE (a script's NICGUARD_*_CACHE) when set, else the shared cache root.
cache_root() { printf '%s\n' "${1:-${XDG_CACHE_HOME:-$HOME/.cache}/nicguard}"; }

# emit_explicit VAR: when the variable named VAR is set, print it if it is an executable file (else
# fail) and exit.
emit_explicit() {
  local path="${!1:-}"
  [[ -n "$path" ]] || return 0
  [[ -f "$path" && -x "$path" ]] || die "$1 is not an executable file: $path"
  emit "$path"
}

# reuse_or_lock DIR PRINTED GO_NEEDED NOT_BUILT CHECK...: print PRINTED and exit when the command
# CHECK succeeds (the tool is cached); else take DIR/.lock (fd 9, held until the script exits),
# waiting out another run's build, and check again: the caller builds only when this returns.
# Fails when go is missing (GO_NEEDED: what it is needed once for; empty: no Go build) and, unless
# NOT_BUILT is empty, with that message under NICGUARD_NO_BUILD=1 (what the tests set: they never
# build).
reuse_or_lock() {
  local dir="$1" printed="$2" go_needed="$3" not_built="$4"
  shift 4
  if "$@"; then emit "$printed"; fi
  [[ -z "$not_built" || "${NICGUARD_NO_BUILD:-}" != 1 ]] || die "$not_built"
  [[ -z "$go_needed" ]] || command -v go >/dev/null || die "go not found (needed once to $go_needed)"
  mkdir -p "$dir"
  exec 9>"$dir/.lock"
  if ! flock -n 9; then log "another build holds $dir/.lock; waiting..."; flock 9; fi
  if "$@"; then emit "$printed"; fi
}

# go_build_env MODE: the Go environment of every build (GOFLAGS -mod=MODE) and PAR, its -p.
go_build_env() {
  export GOTOOLCHAIN="${NICGUARD_GOTOOLCHAIN:-auto}" GOFLAGS="-mod=$1 -buildvcs=false" CGO_ENABLED=0
  export GOWORK=off GO111MODULE=on
  # shellcheck disable=SC2034  # read by the sourcing script
  PAR="${NICGUARD_BUILD_PARALLELISM:-2}"
}
