#!/usr/bin/env bash
# k8s-bins.sh - print ONE line on stdout: a directory holding `kube-apiserver` and `etcd` for e2e tests.
# Precedence: NICGUARD_KUBE_APISERVER/NICGUARD_ETCD (explicit files, symlinked into <cache root>/explicit/)
#   > KUBEBUILDER_ASSETS (dir with both binaries, printed as-is) > versioned cache, built once from the
#   Go module proxy (throw-away wrapper modules; no upstream source enters this repo). Progress -> stderr.
# Env: NICGUARD_K8S_VERSION (v1.37.2), NICGUARD_ETCD_VERSION (v3.6.16), NICGUARD_K8S_CACHE (cache root),
#   NICGUARD_GOTOOLCHAIN (auto: may fetch a newer Go via the proxy). Usage: BIN=$(scripts/k8s-bins.sh)
set -euo pipefail
# shellcheck source=scripts/cache-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/cache-lib.sh" k8s-bins
have_bins() { [[ -x "$1/kube-apiserver" && -x "$1/kube-controller-manager" && -x "$1/etcd" ]]; }

K8S_VERSION="${NICGUARD_K8S_VERSION:-v1.37.2}"
ETCD_VERSION="${NICGUARD_ETCD_VERSION:-v3.6.16}"
[[ "$K8S_VERSION" =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || die "NICGUARD_K8S_VERSION must look like v1.37.2"
K8S_MINOR="${BASH_REMATCH[1]}"
STAGING_VERSION="v0.${BASH_REMATCH[1]}.${BASH_REMATCH[2]}"   # k8s.io/api etc. are published as v0.<minor>.<patch>
CACHE_ROOT="$(cache_root "${NICGUARD_K8S_CACHE:-}")"
BIN_DIR="$CACHE_ROOT/k8s-$K8S_VERSION-etcd-$ETCD_VERSION"

# 1) explicit binaries: both must be set & executable; symlink them into one dir so callers get a dir.
if [[ -n "${NICGUARD_KUBE_APISERVER:-}${NICGUARD_ETCD:-}" ]]; then
  [[ -n "${NICGUARD_KUBE_APISERVER:-}" && -n "${NICGUARD_ETCD:-}" ]] \
    || die "set both NICGUARD_KUBE_APISERVER and NICGUARD_ETCD (or neither)"
  for f in "$NICGUARD_KUBE_APISERVER" "$NICGUARD_ETCD"; do
    [[ -f "$f" && -x "$f" ]] || die "not an executable file: $f"
  done
  dir="$CACHE_ROOT/explicit"
  mkdir -p "$dir"
  for pair in "kube-apiserver=$NICGUARD_KUBE_APISERVER" "etcd=$NICGUARD_ETCD"; do
    name="${pair%%=*}"; target="$(realpath "${pair#*=}")"
    ln -sfn "$target" "$dir/.$name.$$" && mv -fT "$dir/.$name.$$" "$dir/$name"   # atomic replace
  done
  log "using explicit binaries via $dir"
  emit "$dir"
fi

# 2) envtest-style asset dir (e.g. from setup-envtest); ignored with a warning if incomplete.
if [[ -n "${KUBEBUILDER_ASSETS:-}" ]]; then
  if have_bins "$KUBEBUILDER_ASSETS"; then
    log "using KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS"
    emit "$KUBEBUILDER_ASSETS"
  fi
  log "WARNING: KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS lacks executable kube-apiserver/etcd; using cache"
fi

# 3) versioned cache: fast path without the lock, then re-check under an exclusive flock.
reuse_or_lock "$BIN_DIR" "$BIN_DIR" "build $K8S_VERSION / etcd $ETCD_VERSION" "" have_bins "$BIN_DIR"

go_build_env mod
WORK="$BIN_DIR/build"       # wrapper modules live here (only go.mod/go.sum), removed after success
rm -f "$BIN_DIR"/.*.tmp.*                    # leftovers of interrupted builds (we hold the lock)
trap 'rm -f "$BIN_DIR"/.*.tmp.$$' EXIT
trap 'exit 130' INT TERM HUP                 # make signals run the EXIT trap too

new_wrapper() {  # $1 = subdir; prints nothing; cds into a fresh wrapper module
  rm -rf "${WORK:?}/$1"; mkdir -p "$WORK/$1"; cd "$WORK/$1"
  go mod init "nicguard.local/k8s-bins-$1" 2>/dev/null
}

install_bin() {  # $1 = name, $2 = temp file: sanity-check, then atomically move into place
  "$2" --version >/dev/null 2>&1 || die "$1 built but '$1 --version' fails"
  mv -f "$2" "$BIN_DIR/$1"
  log "$1 -> $BIN_DIR/$1 ($(du -h "$BIN_DIR/$1" | cut -f1))"
}

if [[ ! -x "$BIN_DIR/kube-apiserver" || ! -x "$BIN_DIR/kube-controller-manager" ]]; then
  log "building kube-apiserver and kube-controller-manager $K8S_VERSION (cold ~8 min on 2 cores, 3-4 GB caches)..."
  new_wrapper kube
  gomod="$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')"
  [[ -f "$gomod" ]] || die "could not download k8s.io/kubernetes@$K8S_VERSION from $(go env GOPROXY)"
  # Every staging module is required as v0.0.0 (+ replace => ./staging/...); redirect to published tags.
  mapfile -t staging < <(awk '
    /^require[[:space:]]*\(/ {inreq=1; next}  inreq && /^\)/ {inreq=0; next}
    /^require[[:space:]]+k8s\.io\// {print $2 " " $3; next}  inreq {print $1 " " $2}' "$gomod" \
    | awk '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" {print $1}' | sort -u)
  (( ${#staging[@]} > 10 )) || die "found only ${#staging[@]} k8s.io/* v0.0.0 requirements in $gomod"
  log "replacing ${#staging[@]} staging modules with $STAGING_VERSION"
  edits=(); for m in "${staging[@]}"; do edits+=("-replace=$m=$m@$STAGING_VERSION"); done
  go mod edit "${edits[@]}"
  ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION"
  ldflags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$K8S_MINOR"
  ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
  # The controller manager runs the namespace controller for the namespace-deletion scenario.
  for component in kube-apiserver kube-controller-manager; do
    [[ -x "$BIN_DIR/$component" ]] && continue
    SECONDS=0
    go get "k8s.io/kubernetes/cmd/$component@$K8S_VERSION"
    tmp="$BIN_DIR/.$component.tmp.$$"
    go build -p "$PAR" -trimpath -ldflags "$ldflags" -o "$tmp" "k8s.io/kubernetes/cmd/$component"
    install_bin "$component" "$tmp"
    log "$component built in ${SECONDS}s"
  done
fi

if [[ ! -x "$BIN_DIR/etcd" ]]; then
  SECONDS=0
  log "building etcd $ETCD_VERSION (separate wrapper module)..."
  new_wrapper etcd
  go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
  tmp="$BIN_DIR/.etcd.tmp.$$"
  go build -p "$PAR" -trimpath -ldflags "-s -w" -o "$tmp" go.etcd.io/etcd/server/v3
  install_bin etcd "$tmp"
  log "etcd built in ${SECONDS}s"
fi

rm -rf "$WORK"
have_bins "$BIN_DIR" || die "binaries missing after build in $BIN_DIR"
emit "$BIN_DIR"
