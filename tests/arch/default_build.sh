#!/usr/bin/env bash
# The build a user gets without naming a build type must be the optimised one (the README's
# commands, the installed binaries and the benchmarks all take it). Two checks:
#  1. a fresh configure with no CMAKE_BUILD_TYPE compiles the engine with -O3 (not -O0/-O1/-O2);
#  2. the dltrain of the build under test, configured the way scripts/run-tests.sh does it,
#     names an optimised build in --version.
#
#   tests/arch/default_build.sh SOURCE_DIR DLTRAIN
set -euo pipefail
src=${1:?usage: default_build.sh SOURCE_DIR DLTRAIN}
dltrain=${2:?usage: default_build.sh SOURCE_DIR DLTRAIN}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

fail() { echo "default_build: $*" >&2; exit 1; }

cmake -S "$src" -B "$scratch" -G Ninja -DDLJOB_BUILD_TESTS=OFF -DDLJOB_CUDA=OFF >"$scratch.log" 2>&1 ||
    { cat "$scratch.log" >&2; rm -f "$scratch.log"; fail "configure failed"; }
rm -f "$scratch.log"
type=$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$scratch/CMakeCache.txt")
[[ "$type" == "Release" ]] || fail "default CMAKE_BUILD_TYPE is '$type', expected Release"
# The command that compiles the engine's hot loop, as ninja would run it.
cmd=$(python3 - "$scratch/compile_commands.json" <<'PY'
import json, sys
for entry in json.load(open(sys.argv[1])):
    if entry["file"].endswith("engine/src/cpu/cpu_backend.cpp"):
        print(entry["command"])
        break
PY
)
[[ -n "$cmd" ]] || fail "no compile command for engine/src/cpu/cpu_backend.cpp"
# The last -O flag wins with GCC and Clang.
last_opt=$(grep -oE '(^| )-O[0-9sgz]?( |$)' <<<"$cmd" | tr -d ' ' | tail -n1)
[[ "$last_opt" == "-O3" ]] || fail "the default build compiles the engine with '${last_opt:-no -O}', expected -O3: $cmd"
echo "default configure: CMAKE_BUILD_TYPE=$type, engine compiled with $last_opt"

version=$("$dltrain" --version)
echo "build under test: $version"
grep -qE '\(git [^,]+, Release .*-O3' <<<"$version" ||
    fail "dltrain --version does not name an optimised Release build: $version"
