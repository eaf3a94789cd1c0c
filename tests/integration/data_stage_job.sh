#!/usr/bin/env bash
# A recipe whose data is a pack and asks for node-local staging, submitted to the local site
# (a copy of site-profiles/local.yaml with a node-local tier): the job's compute side stages the
# pack with `dljob stage-data`, links $DLJOB_DATA_DIR to it, dltrain trains from it in place,
# and at the end the link and the staged copy are gone (the job was its only user); with
# data.keep_staged the copy stays on the node. A tree that is not a pack is copied with cp -R
# and, like a pack, removed at the end unless kept.
#   DLJOB=.../dljob data_stage_job.sh   (dltrain is found next to dljob's build tree)
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/integration/lib.sh
. "$HERE/lib.sh"
SRC=$(cd "$HERE/../.." && pwd)
if [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
    echo "SKIP: dataset-fashion-mnist is not installed (scripts/setup.sh installs it)"
    exit 0
fi

"$DLJOB" fetch-data fashion-mnist --to "$WORK/fm" >/dev/null 2>&1
"$DLJOB" pack "$WORK/fm" -o "$WORK/fm.dlpack" >/dev/null
mkdir -p "$WORK/node"
sed -e 's/^name: local$/name: itest-data/' "$SRC/site-profiles/local.yaml" >"$WORK/site.yaml"
printf '  node-local: {path: %s, per_node: true, network: false}\n' "$WORK/node" >>"$WORK/site.yaml"
sed -e 's/max_iter: .*/max_iter: 20/' -e 's/test_interval: .*/test_interval: 20/' \
    -e 's/test_iter: .*/test_iter: 2/' -e 's/snapshot: .*/snapshot: 20/' \
    "$SRC/recipes/networks/lenet.yaml" >"$WORK/lenet.yaml"
write_recipe() { # NAME EXTRA-DATA-LINE [SOURCE]
  cat >"$WORK/$1.yaml" <<YAML
name: itest-$1
resources:
  walltime: "00:10:00"
data:
  source: ${3:-$WORK/fm.dlpack}
  stage_to: node-local
$2
train:
  config: lenet.yaml
  threads: 2
checkpoint:
  resume: false
YAML
}
write_recipe stage ""
write_recipe keep "  keep_staged: true"
write_recipe tree "" "$WORK/fm"
write_recipe tree-keep "  keep_staged: true" "$WORK/fm"
# The cache entry is named by a key over the whole manifest (stage_cache_key): the one there is.
entry_of() { find "$WORK/node/dljob-cache-$(id -u)" -mindepth 1 -maxdepth 1 -type d 2>/dev/null; }
copies() { find "$WORK/node" -mindepth 1 -maxdepth 1 -name 'dljob-*' ! -name 'dljob-cache-*' -type d | wc -l; }

run_job() { # RECIPE -> the run directory; checks it completed
  local job state run_dir
  job=$("$DLJOB" submit "$WORK/$1.yaml" --site itest-data --site-file "$WORK/site.yaml" |
    sed -n 's/^submitted job \([0-9]*\) .*/\1/p')
  state=$(wait_state "$job" COMPLETED)
  run_dir=$(field "$job" run_dir)
  check "$1: the job completed" COMPLETED "$state" >&2
  [ "$state" = COMPLETED ] || cat "$run_dir/job.log" >&2
  echo "$run_dir"
}

run_dir=$(run_job stage)
check "dltrain finished (metrics.jsonl)" 1 "$(grep -c '"type":"final"' "$run_dir/metrics.jsonl" 2>/dev/null || true)"
check "staged through stage-data into the per-node cache" 1 "$(grep -c '^staged ' "$run_dir/job.log")"
check "dltrain read the staged copy through the link" yes \
    "$(grep -rqs "$WORK/node/dljob-" "$run_dir"/*.yaml && echo yes || echo no)"
check "the data link is removed after training" "" "$(find "$WORK/node" -maxdepth 1 -name 'dljob-*' -type l)"
check "the staged copy is removed by its last user" "" "$(entry_of)"
check "and the job log says so" 1 "$(grep -c '^removed the staged copy' "$run_dir/job.log")"

run_dir=$(run_job keep)
entry=$(entry_of)
check "keep_staged: the staged copy stays" yes "$([ -f "$entry/pack.complete" ] && echo yes || echo no)"
check "keep_staged: marked as kept" yes "$([ -f "$entry/keep" ] && echo yes || echo no)"
check "keep_staged: no job is left registered as its user" 0 "$(find "$entry/users" -type f 2>/dev/null | wc -l)"

run_dir=$(run_job tree)
check "a tree is copied with cp -R" yes \
    "$(grep -rqs "$WORK/node/dljob-" "$run_dir"/*.yaml && echo yes || echo no)"
check "the copied tree is removed at the end of the job" 0 "$(copies)"
run_dir=$(run_job tree-keep)
check "keep_staged: the copied tree stays" 1 "$(copies)"
finish
