#!/usr/bin/env bash
# A recipe whose data is a pack and asks for node-local staging, submitted to the local site
# (a copy of site-profiles/local.yaml with a node-local tier): the job's compute side stages the
# pack with `dljob stage-data`, links $DLJOB_DATA_DIR to it, dltrain trains from it in place,
# and the link is gone afterwards while the per-node cache stays.
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
cat >"$WORK/recipe.yaml" <<YAML
name: itest-stage
resources:
  walltime: "00:10:00"
data:
  source: $WORK/fm.dlpack
  stage_to: node-local
train:
  config: lenet.yaml
  threads: 2
checkpoint:
  resume: false
YAML

job=$("$DLJOB" submit "$WORK/recipe.yaml" --site itest-data --site-file "$WORK/site.yaml" |
    sed -n 's/^submitted job \([0-9]*\) .*/\1/p')
check "submitted" yes "$([ -n "$job" ] && echo yes || echo no)"
state=$(wait_state "$job" COMPLETED)
run_dir=$(field "$job" run_dir)
check "the job completed" COMPLETED "$state"
[ "$state" = COMPLETED ] || cat "$run_dir/job.log"
check "dltrain finished (metrics.jsonl)" 1 "$(grep -c '"type":"final"' "$run_dir/metrics.jsonl" 2>/dev/null || true)"
hash=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['content_hash'].split(':')[-1])" "$WORK/fm.dlpack/manifest.json")
check "staged through stage-data into the per-node cache" yes \
    "$([ -f "$WORK/node/dljob-cache-$(id -u)/$hash/pack.complete" ] && echo yes || echo no)"
check "the data link is removed after training" "" "$(find "$WORK/node" -maxdepth 1 -name 'dljob-*' -type l)"
check "dltrain read the staged copy through the link" yes \
    "$(grep -rqs "$WORK/node/dljob-" "$run_dir"/*.yaml && echo yes || echo no)"
finish
