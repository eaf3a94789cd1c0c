# shellcheck shell=bash
# Sourced by run.sh and replay.sh: the fuzz targets, and where each one's inputs come from.
#
# fuzz_targets: every target, dl_fuzz's then dljob_fuzz's. fuzz_binary TARGET DL DLJOB: which
# of the two binaries runs TARGET. gather_corpus OUT DL DLJOB: fills OUT/TARGET/corpus/ with the
# repository's files of that kind (the hostile corpus, Caffe's nets, the recipes, the site
# profiles, the recorded scheduler outputs), the seeds the harnesses write (a caffemodel, a
# checkpoint, packs) and seeds.py writes (images, IDX, CIFAR, metrics, assignments), and the
# inputs fuzzing once found (regressions/TARGET/); a corpus already there grows.

fuzz_targets=(prototxt net yaml solver caffemodel checkpoint mean idx cifar datum pack image
    imagelist recipe site overrides metrics dataset scheduler)

fuzz_binary() {
    case $1 in
        recipe | site | overrides | metrics | dataset | scheduler) echo "$3" ;;
        *) echo "$2" ;;
    esac
}

gather_corpus() {
    local out=$1 dl=$2 dljob=$3
    local root
    root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
    local hostile=$root/tests/engine/hostile
    seed() { # seed TARGET FILE...: copies the files that exist into TARGET's corpus
        local dir=$out/$1/corpus file
        shift
        mkdir -p "$dir"
        for file in "$@"; do
            [[ -f $file ]] && cp "$file" "$dir/$(basename "$(dirname "$file")")-$(basename "$file")"
        done
        return 0
    }
    mkdir -p "$out/seeds"
    DL_FUZZ_SEEDS=$out/seeds "$dl" >/dev/null
    DL_FUZZ_SEEDS=$out/seeds "$dljob" >/dev/null
    # Debian's python3 (python3-pil), not whatever python3 comes first on the PATH.
    /usr/bin/python3 "$root/tests/fuzz/seeds.py" "$out/seeds"
    local restore
    restore=$(shopt -p nullglob globstar || true)
    shopt -s nullglob globstar
    seed prototxt "$hostile"/*.prototxt "$root"/tests/engine/prototxt/*.prototxt \
        "$root"/tests/fixtures/bvlc-caffe/**/*.prototxt
    seed net "$out"/prototxt/corpus/*
    seed yaml "$hostile"/*.yaml "$root"/recipes/networks/*.yaml
    seed caffemodel "$hostile"/*.caffemodel "$out"/seeds/caffemodel/*
    seed checkpoint "$out"/seeds/checkpoint/*
    seed mean "$hostile"/*.binaryproto
    seed datum "$hostile"/*.datum
    seed recipe "$root"/recipes/*.yaml
    seed site "$root"/site-profiles/*.yaml
    local kind
    for kind in idx cifar image imagelist metrics dataset pack scheduler overrides solver; do
        seed "$kind" "$out/seeds/$kind"/*
    done
    for kind in "${fuzz_targets[@]}"; do
        seed "$kind" "$root/tests/fuzz/regressions/$kind"/*
    done
    eval "$restore"
}
