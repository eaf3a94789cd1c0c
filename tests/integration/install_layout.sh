#!/usr/bin/env bash
# `cmake --install` into a fresh prefix gives a dljob that works from there alone: it finds the
# site profiles, templates and recipes under PREFIX/share/dljob and renders jobs that call
# PREFIX/bin/dltrain, never the source or build tree (what a site's module file relies on).
set -euo pipefail
build_dir=${1:?usage: install_layout.sh BUILD_DIR SOURCE_DIR}
source_dir=${2:?usage: install_layout.sh BUILD_DIR SOURCE_DIR}
prefix=$(mktemp -d "${TMPDIR:-/tmp}/dljob-install.XXXXXX")
trap 'rm -rf "$prefix"' EXIT
failures=0
check() { # DESCRIPTION COMMAND...
  local what=$1
  shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; failures=$((failures + 1)); fi
}

cmake --install "$build_dir" --prefix "$prefix" >/dev/null
check "dljob and dltrain installed side by side" test -x "$prefix/bin/dljob" -a -x "$prefix/bin/dltrain"
for dir in site-profiles templates recipes; do
  check "share/dljob/$dir installed" test -d "$prefix/share/dljob/$dir"
done

# Run with the environment overrides cleared so only the binary's location decides.
run() { env -u DLJOB_SITE_PROFILES_DIR -u DLJOB_TEMPLATES_DIR "$prefix/bin/dljob" "$@"; }
sites=$(run sites)
check "installed dljob lists the bundled sites" grep -q bigred2 <<<"$sites"
# resources.gpus=0: `local` is this machine, which may have no GPU for the recipe's one.
script=$(run render "$prefix/share/dljob/recipes/fashion-mnist.yaml" --site local --set resources.gpus=0)
check "rendered job calls the installed dltrain" grep -qF "$prefix/bin/dltrain" <<<"$script"
check "rendered job never points into the source tree" bash -c '! grep -qF "$1" <<<"$2"' _ "$source_dir" "$script"
check "rendered job never points into the build tree" bash -c '! grep -qF "$1" <<<"$2"' _ "$build_dir" "$script"
check "installed dltrain runs" bash -c '"$1" device-query >/dev/null' _ "$prefix/bin/dltrain"
if [ -f "$build_dir/engine/libdltrain-cuda.so" ]; then
  check "CUDA plugin installed in lib/dljob" test -f "$prefix/lib/dljob/libdltrain-cuda.so"
  query=$(env -u DLTRAIN_CUDA_PLUGIN "$prefix/bin/dltrain" device-query)
  check "installed dltrain loads its installed CUDA plugin" grep -q "^CUDA runtime: [0-9]" <<<"$query"
fi
for plugin in "$build_dir"/engine/libdltrain-mpi-*.so; do
  [ -e "$plugin" ] || continue
  check "MPI plugin $(basename "$plugin") installed in lib/dljob" test -f "$prefix/lib/dljob/$(basename "$plugin")"
done

if [ "$failures" -gt 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all checks passed"
