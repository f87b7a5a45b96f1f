#!/usr/bin/env bash
# chain-bins.sh - print ONE line on stdout: a directory holding the chain tier's controllers, built
# from the Go module proxy in throw-away wrapper modules that require only the controller's module
# (its own go.mod decides every dependency; no upstream source enters this repo; not `go install
# PKG@VERSION`, which also asks the proxy for the version list), beside the manifests it publishes:
#   bin/trainer-controller-manager, bin/jobset, bin/kueue   the binaries
#   trainer/manifests, jobset/config, kueue/config          the modules' CRDs, webhooks and RBAC, as published
# Env: NICGUARD_TRAINER_VERSION (v2.3.0), NICGUARD_JOBSET_VERSION (v0.12.0), NICGUARD_KUEUE_VERSION
#   (v0.17.0), NICGUARD_CHAIN_CACHE (cache root), NICGUARD_GOTOOLCHAIN (auto), NICGUARD_NO_BUILD=1 (print
#   the cached directory or fail; never build). Cold, on 2 busy cores: Trainer and JobSet ~6 min each,
#   Kueue ~15 min.
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
    [[ -f "$DIR/bin/$name" && -x "$DIR/bin/$name" && -d "$DIR/${copy%%:*}/${copy#*:}" ]] || return 1
  done
}

reuse_or_lock "$DIR" "$DIR" "build Trainer, JobSet and Kueue" \
  "the chain controllers are not built: run \`make chain-bins\`" have_all

go_build_env mod
rm -rf "$DIR"/.build.*                        # leftovers of interrupted builds (we hold the lock)
trap 'rm -rf "$DIR"/.build.$$' EXIT
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
  [[ -f "$DIR/bin/$name" && -x "$DIR/bin/$name" ]] && continue
  SECONDS=0
  log "building $name from $module${pkg:+/$pkg}@$version (cold: minutes)..."
  work="$DIR/.build.$$"; rm -rf "$work"; mkdir -p "$work/$name"
  (cd "$work/$name" && go mod init "nicguard.local/chain-bins-$name" 2>/dev/null \
    && go mod edit -require="$modver" \
    && go build -p "$PAR" -trimpath -ldflags "-s -w" -o "$work/bin" "$module${pkg:+/$pkg}")
  [[ -x "$work/bin" ]] || die "go build left no binary for $name in $work"
  mkdir -p "$DIR/bin"; mv -f "$work/bin" "$DIR/bin/$name"; rm -rf "$work"
  log "$name -> $DIR/bin/$name ($(du -h "$DIR/bin/$name" | cut -f1)) built in ${SECONDS}s"
  printf '%s %s %ss\n' "$name" "$version" "$SECONDS" >>"$DIR/build-times.log"
done

have_all || die "controllers missing after build in $DIR"
emit "$DIR"
