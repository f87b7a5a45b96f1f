#!/usr/bin/env bash
# python-pgo-bin.sh - print ONE line on stdout: the path of a python3.13 built as the image's is.
# The image runs the official python:3.13-slim build: PGO + LTO, a shared libpython. pyenv builds
# neither, and nicguard's request path is mostly interpreter time, so `make bench-py313-pgo` runs
# the benchmarks on this build too. Built once (~20 min on 2 cores) from the CPython source that
# Debian ships (checksum pinned) with the configure flags of docker-library/python.
# Precedence: NICGUARD_PYTHON_PGO (an explicit executable, printed as-is) > versioned cache.
# Env: NICGUARD_PYTHON_PGO_CACHE (cache root). Progress -> stderr. Usage: PY=$(scripts/python-pgo-bin.sh)
set -euo pipefail
# shellcheck source=scripts/cache-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/cache-lib.sh" python-pgo-bin

VERSION=3.13.5
URL="http://deb.debian.org/debian/pool/main/p/python3.13/python3.13_${VERSION}.orig.tar.xz"
SHA256=93e583f243454e6e9e4588ca2c2662206ad961659863277afcdb96801647d640
PREFIX="$(cache_root "${NICGUARD_PYTHON_PGO_CACHE:-}")/python-$VERSION-pgo-lto"
BIN="$PREFIX/bin/python3.13"
# shellcheck disable=SC2317  # called through reuse_or_lock
built() { [[ -x "$BIN" && -f "$PREFIX/.built" ]]; }

emit_explicit NICGUARD_PYTHON_PGO
reuse_or_lock "$PREFIX" "$BIN" "" "" built

WORK="$PREFIX.build"
trap 'rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM HUP                 # make signals run the EXIT trap too
rm -rf "$WORK" "${PREFIX:?}"/*; mkdir -p "$WORK"; cd "$WORK"
SECONDS=0
log "downloading CPython $VERSION"
curl -fsSL --retry 3 -o src.tar.xz "$URL"
echo "$SHA256  src.tar.xz" | sha256sum -c --quiet - || die "checksum mismatch for $URL"
tar -xJf src.tar.xz
cd "Python-$VERSION"
log "configuring and building with PGO + LTO (~20 min on 2 cores; the training runs the test suite)"
./configure --prefix="$PREFIX" --enable-loadable-sqlite-extensions --enable-optimizations \
  --enable-option-checking=fatal --enable-shared --with-lto --with-ensurepip=install \
  LDFLAGS="-Wl,-rpath=$PREFIX/lib" >configure.log 2>&1 || { tail -30 configure.log; die "configure failed"; }
# The training runs part of CPython's test suite and fails the build when one test fails
# (test_generators does here, as root): a failed test only thins the profile, so it may fail.
make -j "$(nproc)" PROFILE_TASK='-m test --pgo --timeout=1200 || true' >make.log 2>&1 ||
  { grep -E '^0:.* failed|^make' make.log | tail -20; tail -20 make.log; die "make failed"; }
make install >install.log 2>&1 || { tail -30 install.log; die "make install failed"; }
"$BIN" -c 'import ssl, sqlite3, ctypes, lzma, bz2, zlib' || die "built, but a standard module is missing"
touch "$PREFIX/.built"
log "$("$BIN" -VV | head -1) -> $BIN built in ${SECONDS}s"
emit "$BIN"
