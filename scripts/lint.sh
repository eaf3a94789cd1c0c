#!/usr/bin/env bash
# Style checks, run by ctest (label: lint).
#
#   scripts/lint.sh format             clang-format --dry-run over our C++ and CUDA sources
#   scripts/lint.sh format --fix       rewrite them in place
#   scripts/lint.sh tidy BUILD_DIR     clang-tidy (.clang-tidy) over src/ and engine/ C++ files
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

sources() {
    git ls-files -co --exclude-standard -- 'src/*' 'engine/*' 'tests/*' 'bench/*' |
        grep -E '\.(cpp|hpp|cu|cuh|h)$' | while read -r f; do [[ -f "$f" ]] && echo "$f"; done
}

case "${1:-}" in
    format)
        if [[ "${2:-}" == "--fix" ]]; then
            sources | xargs -r clang-format -i
        else
            sources | xargs -r clang-format --dry-run --Werror
            echo "clang-format: $(sources | wc -l) files clean"
        fi
        ;;
    tidy)
        build_dir=${2:?usage: lint.sh tidy BUILD_DIR}
        # .cu files are compiled by nvcc and excluded; test code follows gtest's macros instead.
        mapfile -t files < <(sources | grep -E '^(src|engine)/.*\.cpp$')
        ((${#files[@]})) || exit 0
        # clang-tidy 22 (.clang-tidy says why that version); an older one runs slower, with
        # fewer checks.
        runner=$(command -v run-clang-tidy-22 || command -v run-clang-tidy)
        # In a unity build each batch of files is linted whole (scripts/tidy-units.py says why);
        # a batch includes .cpp files by design, which bugprone-suspicious-include would report.
        units_text=$("$root/scripts/tidy-units.py" "$build_dir" "${files[@]/#/$root/}")
        mapfile -t units <<<"$units_text"
        "$runner" -quiet -p "$build_dir" -extra-arg=-Wno-deprecated-declarations \
            -checks=-bugprone-suspicious-include -j "$(nproc)" "${units[@]}" >"$build_dir/clang-tidy.log" 2>&1 || {
            grep -E 'error:|warning:' -A3 "$build_dir/clang-tidy.log" | head -200
            echo "clang-tidy: failed (full log: $build_dir/clang-tidy.log)"
            exit 1
        }
        echo "clang-tidy: ${#files[@]} files clean"
        ;;
    *)
        echo "usage: scripts/lint.sh format [--fix] | tidy BUILD_DIR" >&2
        exit 2
        ;;
esac
