#!/usr/bin/env bash
# spark_shims.sh: issue 37's Spark family end to end, with no Spark or YARN: tests/shims/spark
# has a spark-submit and a yarn that keep a fake ResourceManager in $DLJOB_SHIM_YARN_STATE and
# run the real driver (share/dljob/spark/dljob_spark_driver.py) with a fake pyspark whose tasks
# are local processes. A 2-rank LeNet submitted to a small copy of the mapr profile completes,
# its ranks met through dltrain's Gloo plugin, and its weights match 1 rank of the combined
# batch; a second job is cancelled while its ranks train, and they are gone; a failing rank
# fails the job with its exit status; the release tarball shipped with --archives is what the
# ranks run; and on a standalone master (client mode, the driver run here by dljob's local
# runner) a job completes and another is cancelled. What only a real
# cluster can show (executors on other nodes, YARN's containers and signals, Spark's own
# scheduling) is not tested here: docs/schedulers.md, Spark.
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"
: "${DLTRAIN:?DLTRAIN must name the dltrain binary}"
root=$(cd "$HERE/../.." && pwd)
data=/usr/share/datasets/fashion-mnist
[ -r "$data/train-images-idx3-ubyte.gz" ] || { echo "SKIP: no $data (scripts/setup.sh installs it)"; exit 77; }
[ -e "$(dirname "$DLTRAIN")/libdltrain-gloo.so" ] || { echo "SKIP: no Gloo plugin next to $DLTRAIN"; exit 77; }
mkdir "$WORK/yarn"
export DLJOB_SHIM_YARN_STATE=$WORK/yarn DLJOB_SHIM_YARN_ACCEPTED_SECONDS=0.3
export PATH="$root/tests/shims/spark:$PATH"
site=(--site test-spark --site-file "$HERE/sites/test-spark.yaml")

# LeNet for 5 steps, as the Gloo engine test trains it: 2 ranks x 32 against 1 rank x 64.
lenet() { # BATCH FILE
  sed -e "s/batch_size: 64/batch_size: $1/" -e 's/batch_size: 100/batch_size: 50/' \
    -e 's/max_iter: 10000/max_iter: 5/' -e 's/test_interval: 500/test_interval: 100000/' \
    -e 's/test_iter: 100/test_iter: 1/' -e 's/display: 100/display: 1/' \
    "$root/recipes/networks/lenet.yaml" >"$2"
}
lenet 32 "$WORK/lenet-2x32.yaml"
lenet 64 "$WORK/lenet-1x64.yaml"
args=("${site[@]}" --set resources.gpus=0 --set resources.ranks=2 --set resources.memory=1G
  --set resources.walltime=00:10:00 --set train.threads=1 --set data.stage_to=none
  --set "train.config=$WORK/lenet-2x32.yaml")
"$DLJOB" render "$root/recipes/fashion-mnist.yaml" "${args[@]}" >"$WORK/rendered.sh"
check "the rendered script parses" 0 "$(bash -n "$WORK/rendered.sh" >/dev/null 2>&1; echo $?)"
check "it is submitted with spark-submit, 2 executors" 1 \
  "$(grep -c '^#   spark-submit --master yarn --deploy-mode cluster .*--num-executors 2 ' "$WORK/rendered.sh")"

# The single-rank reference, trained meanwhile.
"$DLTRAIN" train --device cpu --threads 1 --deadline none --config "$WORK/lenet-1x64.yaml" \
  --run-dir "$WORK/ref" --data-dir "$data" >"$WORK/ref.log" 2>&1 &
reference=$!

# Spark 1.5.2's PySpark (the profile's): no barrier mode, the ranks meet in a directory.
out=$(DLJOB_SHIM_SPARK_VERSION=1.5.2 "$DLJOB" submit "$root/recipes/fashion-mnist.yaml" "${args[@]}")
job=$(sed -n 's/^submitted job \([0-9]*\) .*/\1/p' <<<"$out")
app=$(grep -o 'application_[0-9]*_[0-9]*' <<<"$out" || true)
run_dir=$(sed -n 's/^run dir: //p' <<<"$out")
check "submitted as a YARN application" 1 "$([ -n "$job" ] && [ -n "$app" ] && [ -d "$run_dir" ] && echo 1 || echo 0)"
check "the job completes" COMPLETED "$(wait_state "$job" COMPLETED)"
check "exit code 0" 0 "$(cat "$run_dir/exit_code" 2>/dev/null)"
check "yarn lists it FINISHED, SUCCEEDED" "FINISHED SUCCEEDED" \
  "$(yarn application -list -appStates ALL 2>/dev/null | awk -F'\t' -v id="$app" '{gsub(/ /, "")} $1 == id {print $6, $7}')"
check "dljob logs shows the training's end" 1 "$("$DLJOB" logs "$job" | grep -c '^dltrain: completed at iteration 5 of 5')"
check "the ranks met through Gloo, in a directory" 1 \
  "$(grep -c '2 ranks x batch 32 = 64 (gloo (.*file rendezvous' "$run_dir/job.log")"
check "rank 1's output is its own file" 1 "$([ -f "$run_dir/rank.1.log" ] && echo 1 || echo 0)"
check "metrics.jsonl is rank 0's alone: 2 ranks, global batch 64" "1 2 64" \
  "$(python3 -c 'import json,sys; s=[r for r in map(json.loads, open(sys.argv[1])) if r["type"]=="start"]; print(len(s), s[0]["ranks"], s[0]["global_batch_size"])' "$run_dir/metrics.jsonl")"
wait "$reference" || { echo "FAIL: the 1-rank reference did not train"; cat "$WORK/ref.log"; exit 1; }
# Every weight within 1e-5 of the largest (docs/data-parallel.md), read from the checkpoints
# (docs/engine.md, "Checkpoint format").
check "2 ranks x 32 match 1 rank x 64" ok "$(python3 - "$run_dir/checkpoints/iter_00000005.ckpt" \
  "$WORK/ref/checkpoints/iter_00000005.ckpt" <<'EOF'
import struct, sys
def weights(path):
    b = open(path, "rb").read()
    assert b[:8] == b"DLCKPT01", path
    # magic, version, iteration, train cursor; then version 1's test cursor, or the count of
    # test nets and each one's cursor (and from version 3 its state's text) (docs/engine.md,
    # "Checkpoint format")
    version = struct.unpack_from("<I", b, 8)[0]
    at = 8 + 4 + 4 + 8
    if version == 1:
        at += 8
    else:
        nets = struct.unpack_from("<I", b, at)[0]
        at += 4
        for _ in range(nets):
            at += 8
            if version >= 3:
                at += 4 + struct.unpack_from("<I", b, at)[0]
    at += 4 + struct.unpack_from("<I", b, at)[0]  # the RNG state
    values = []
    params = struct.unpack_from("<I", b, at)[0]
    at += 4
    for _ in range(params):
        at += 4 + struct.unpack_from("<I", b, at)[0]  # the name
        rank = struct.unpack_from("<I", b, at)[0]
        dims = struct.unpack_from("<%di" % rank, b, at + 4)
        at += 4 + 4 * rank
        count = 1
        for d in dims:
            count *= d
        values += struct.unpack_from("<%df" % count, b, at)
        at += 4 * count
    return values
two, one = weights(sys.argv[1]), weights(sys.argv[2])
largest = max(abs(v) for v in one)
worst = max(abs(a - b) for a, b in zip(two, one))
print("ok" if len(two) == len(one) and worst <= 1e-5 * largest else
      "%d/%d weights, largest difference %g against %g" % (len(two), len(one), worst, largest))
EOF
)"

# Spark 3's PySpark: barrier mode, rank 0's address through allGather. Cancelled while training.
out=$("$DLJOB" submit "$root/recipes/fashion-mnist.yaml" "${args[@]}" --set train.max_iter=1000000)
job=$(sed -n 's/^submitted job \([0-9]*\) .*/\1/p' <<<"$out")
app=$(grep -o 'application_[0-9]*_[0-9]*' <<<"$out" || true)
run_dir=$(sed -n 's/^run dir: //p' <<<"$out")
check "the second job runs" RUNNING "$(wait_state "$job" RUNNING)"
for ((i = 0; i < 300; i++)); do
  grep -q '"type":"train"' "$run_dir/metrics.jsonl" 2>/dev/null && break
  sleep 0.1
done
check "the ranks met through rank 0's TCP store" 1 "$(grep -c 'tcp rendezvous' "$run_dir/job.log")"
check "both ranks train" 2 "$(pgrep -c -f "dltrain train .*--run-dir $run_dir" || true)"
"$DLJOB" cancel "$job" >/dev/null
check "cancelled" CANCELLED "$(wait_state "$job" CANCELLED)"
check "yarn lists it KILLED" KILLED \
  "$(yarn application -list -appStates KILLED 2>/dev/null | awk -F'\t' -v id="$app" '{gsub(/ /, "")} $1 == id {print $6}')"
check "its ranks are gone" 0 "$(pgrep -c -f "$run_dir" || true)"
check "yarn -kill of an ended application" "Application $app has already finished " \
  "$(yarn application -kill "$app" 2>/dev/null)"
check "yarn -kill of an unknown one: exit 255" "Application with id 'application_1_0001' doesn't exist in RM. 255" \
  "$(yarn application -kill application_1_0001 2>/dev/null | tr '\n' ' '; echo "${PIPESTATUS[0]}")"

# A rank that fails: the data is not there. FAILED, with YARN's "User application exited".
mkdir "$WORK/no-data"
out=$("$DLJOB" submit "$root/recipes/fashion-mnist.yaml" "${args[@]}" --set "data.source=$WORK/no-data")
job=$(sed -n 's/^submitted job \([0-9]*\) .*/\1/p' <<<"$out")
app=$(grep -o 'application_[0-9]*_[0-9]*' <<<"$out" || true)
run_dir=$(sed -n 's/^run dir: //p' <<<"$out")
check "a failing rank fails the job" FAILED "$(wait_state "$job" FAILED)"
rc=$(cat "$run_dir/exit_code" 2>/dev/null)
check "its exit code is the rank's (not 0, not 75)" 1 "$([ -n "$rc" ] && [ "$rc" != 0 ] && [ "$rc" != 75 ] && echo 1 || echo 0)"
check "yarn lists it FINISHED, FAILED, with the driver's status" "FINISHED FAILED" \
  "$(yarn application -list -appStates ALL 2>/dev/null | awk -F'\t' -v id="$app" '{gsub(/ /, "")} $1 == id {print $6, $7}')"
check "yarn -status says the application exited with it" 1 \
  "$(yarn application -status "$app" 2>/dev/null | grep -c "User application exited with status $rc")"

# The release shipped with --archives: the ranks run the dltrain YARN unpacked beside them (a
# stand-in that marks each start, then runs the build's).
top=dljob-0.1.0-linux-x86_64
mkdir -p "$WORK/release/$top/bin"
printf '#!/bin/sh\necho "$PWD $0" >>"%s/shipped.marks"\nexec "%s" "$@"\n' "$WORK" "$DLTRAIN" \
  >"$WORK/release/$top/bin/dltrain"
chmod +x "$WORK/release/$top/bin/dltrain"
tar -czf "$WORK/$top.tar.gz" -C "$WORK/release" "$top"
sed "s|      spark_submit: spark-submit|&\n      archive: $WORK/$top.tar.gz|" "$HERE/sites/test-spark.yaml" >"$WORK/shipping.yaml"
out=$("$DLJOB" submit "$root/recipes/fashion-mnist.yaml" "${args[@]}" --site-file "$WORK/shipping.yaml")
job=$(sed -n 's/^submitted job \([0-9]*\) .*/\1/p' <<<"$out")
check "a job with the shipped release completes" COMPLETED "$(wait_state "$job" COMPLETED)"
check "both ranks ran the shipped dltrain, from the unpacked archive" 2 \
  "$(grep -c "/container/dljob-release/$top/bin/dltrain\$" "$WORK/shipped.marks" 2>/dev/null)"

# A standalone master: the driver runs here in client mode, under dljob's local runner.
# No train.threads: each rank takes its executor's one core (OMP_NUM_THREADS from the driver),
# not the machine's CPUs.
standalone=(--site test-spark-standalone --site-file "$HERE/sites/test-spark-standalone.yaml"
  --set resources.gpus=0 --set resources.ranks=2 --set resources.memory=1G
  --set resources.walltime=00:10:00 --set data.stage_to=none --set "train.config=$WORK/lenet-2x32.yaml")
"$DLJOB" render "$root/recipes/fashion-mnist.yaml" "${standalone[@]}" >"$WORK/standalone.sh"
check "the standalone script parses" 0 "$(bash -n "$WORK/standalone.sh" >/dev/null 2>&1; echo $?)"
check "it hands itself to spark-submit in client mode" 1 \
  "$(grep -c '^    exec spark-submit --master spark://localhost:7077 --deploy-mode client ' "$WORK/standalone.sh")"
out=$("$DLJOB" submit "$root/recipes/fashion-mnist.yaml" "${standalone[@]}")
job=$(sed -n 's/^submitted job \([0-9]*\) .*/\1/p' <<<"$out")
run_dir=$(sed -n 's/^run dir: //p' <<<"$out")
check "the standalone job completes" COMPLETED "$(wait_state "$job" COMPLETED)"
check "dljob logs shows its training's end" 1 "$("$DLJOB" logs "$job" | grep -c '^dltrain: completed at iteration 5 of 5')"
check "its driver met the standalone master" 1 "$(grep -c 'Connected to Spark cluster with app ID app-' "$run_dir/job.log")"
check "each rank trained with its executor's 1 core" 1 \
  "$(python3 -c 'import json,sys; print([r for r in map(json.loads, open(sys.argv[1])) if r["type"]=="start"][0]["threads"])' "$run_dir/metrics.jsonl")"
check "2 ranks through TCP" 1 "$(grep -c '2 ranks x batch 32 = 64 (gloo (.*tcp rendezvous' "$run_dir/job.log")"
out=$("$DLJOB" submit "$root/recipes/fashion-mnist.yaml" "${standalone[@]}" --set train.max_iter=1000000)
job=$(sed -n 's/^submitted job \([0-9]*\) .*/\1/p' <<<"$out")
run_dir=$(sed -n 's/^run dir: //p' <<<"$out")
for ((i = 0; i < 300; i++)); do
  grep -q '"type":"train"' "$run_dir/metrics.jsonl" 2>/dev/null && break
  sleep 0.1
done
check "the standalone job's ranks train" 2 "$(pgrep -c -f "dltrain train .*--run-dir $run_dir" || true)"
"$DLJOB" cancel "$job" >/dev/null
check "the standalone job is cancelled" CANCELLED "$(wait_state "$job" CANCELLED)"
for ((i = 0; i < 100; i++)); do
  [ "$(pgrep -c -f "$run_dir" || true)" = 0 ] && break
  sleep 0.1
done
check "its driver and ranks are gone" 0 "$(pgrep -c -f "$run_dir" || true)"
finish
