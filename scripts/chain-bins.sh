#!/usr/bin/env bash
# chain-bins.sh - print ONE line on stdout: a directory holding the chain tier's controllers, built
# from the Go module proxy with `go install PKG@VERSION` (each module's own go.mod decides every
# dependency; no upstream source enters this repo), beside the manifests each module publishes:
#   trainer-controller-manager, jobset, kueue             the binaries
#   trainer/manifests, jobset/config, kueue/config          the modules' CRDs, webhooks and RBAC, as published
# Env: NICGUARD_TRAINER_VERSION (v2.3.0), NICGUARD_JOBSET_VERSION (v0.12.0), NICGUARD_KUEUE_VERSION
#   (v0.17.0), NICGUARD_CHAIN_CACHE (cache root), NICGUARD_GOTOOLCHAIN (auto), NICGUARD_NO_BUILD=1 (print
#   the cached directory or fail; never build: what the tests use). Cold: ~10-17 min per binary on 2 cores.
# Usage: CHAIN=$(scripts/chain-bins.sh [trainer] [jobset] [kueue])   (no argument: all three)
set -euo pipefail
# shellcheck source=scripts/cache-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/cache-lib.sh" chain-bins

TRAINER_VERSION="${NICGUARD_TRAINER_VERSION:-v2.3.0}"
JOBSET_VERSION="${NICGUARD_JOBSET_VERSION:-v0.12.0}"
KUEUE_VERSION="${NICGUARD_KUEUE_VERSION:-v0.17.0}"
# name | module | package | published directory copied beside the binary
COMPONENTS=(
  "trainer-controller-manager|github.com/kubeflow/trainer/v2@$TRAINER_VERSION|cmd/trainer-controller-manager|trainer:manifests"
  "jobset|sigs.k8s.io/jobset@$JOBSET_VERSION||jobset:config"
  "kueue|sigs.k8s.io/kueue@$KUEUE_VERSION|cmd/kueue|kueue:config"
)
# Arguments (default: all): the components to have, by the name before each module's directory.
if (($#)); then
  wanted=()
  for c in "${COMPONENTS[@]}"; do
    IFS='|' read -r _ _ _ copy <<<"$c"
    for arg in "$@"; do [[ "$arg" == "${copy%%:*}" ]] && wanted+=("$c"); done
  done
  ((${#wanted[@]} == $#)) || die "unknown component in: $* (known: trainer jobset kueue)"
  COMPONENTS=("${wanted[@]}")
fi
DIR="$(cache_root "${NICGUARD_CHAIN_CACHE:-}")/chain-trainer-$TRAINER_VERSION-jobset-$JOBSET_VERSION-kueue-$KUEUE_VERSION"

have_all() {
  local c name copy
  for c in "${COMPONENTS[@]}"; do
    IFS='|' read -r name _ _ copy <<<"$c"
    [[ -x "$DIR/$name" && -d "$DIR/${copy%%:*}/${copy#*:}" ]] || return 1
  done
}

reuse_or_lock "$DIR" "$DIR" "build Trainer, JobSet and Kueue" \
  "the chain controllers are not built: run \`make chain-bins\`" have_all

go_build_env readonly
export GOFLAGS="-buildvcs=false"              # `go install PKG@VERSION` takes no -mod
rm -rf "$DIR"/.gobin.*                        # leftovers of interrupted builds (we hold the lock)
trap 'rm -rf "$DIR"/.gobin.$$' EXIT
trap 'exit 130' INT TERM HUP                  # make signals run the EXIT trap too

for c in "${COMPONENTS[@]}"; do
  IFS='|' read -r name modver pkg copy <<<"$c"
  module="${modver%@*}" version="${modver#*@}"
  if [[ ! -d "$DIR/${copy%%:*}/${copy#*:}" ]]; then
    src="$(go mod download -json "$modver" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
    [[ -d "$src/${copy#*:}" ]] || die "could not download $modver from $(go env GOPROXY)"
    rm -rf "${DIR:?}/${copy%%:*}"; mkdir -p "$DIR/${copy%%:*}"
    cp -R "$src/${copy#*:}" "$DIR/${copy%%:*}/.${copy#*:}.tmp.$$"
    chmod -R u+w "$DIR/${copy%%:*}/.${copy#*:}.tmp.$$"   # the module cache is read-only
    mv "$DIR/${copy%%:*}/.${copy#*:}.tmp.$$" "$DIR/${copy%%:*}/${copy#*:}"
  fi
  [[ -x "$DIR/$name" ]] && continue
  SECONDS=0
  log "building $name from $module${pkg:+/$pkg}@$version (cold ~10-17 min on 2 cores)..."
  gobin="$DIR/.gobin.$$"; mkdir -p "$gobin"
  GOBIN="$gobin" go install -p "$PAR" -trimpath -ldflags "-s -w" "$module${pkg:+/$pkg}@$version"
  built="$gobin/$(basename "${pkg:-$module}")"
  [[ -x "$built" ]] || die "go install left no $(basename "$built") in $gobin"
  mv -f "$built" "$DIR/$name"
  log "$name -> $DIR/$name ($(du -h "$DIR/$name" | cut -f1)) built in ${SECONDS}s"
  printf '%s %s %ss\n' "$name" "$version" "$SECONDS" >>"$DIR/build-times.log"
done

have_all || die "controllers missing after build in $DIR"
emit "$DIR"
