#!/usr/bin/env bash
# plot_chain.sh: `dljob plot` of a real continued chain. LeNet on Fashion-MNIST through the
# local site with a walltime that makes dltrain checkpoint and exit 75 every few seconds (as
# continuation_train.sh does), so several attempts append to one metrics.jsonl; plot draws them
# as one curve with a point per trained iteration, and against time the attempts follow each
# other instead of each starting again at 0.
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"
root=$(cd "$HERE/../.." && pwd)
data=/usr/share/datasets/fashion-mnist
[ -r "$data/train-images-idx3-ubyte.gz" ] || { echo "SKIP: no $data (scripts/setup.sh installs it)"; exit 77; }
command -v gnuplot >/dev/null || { echo "SKIP: no gnuplot (scripts/setup.sh installs gnuplot-nox)"; exit 77; }
# One thread and enough iterations that even a fast BLAS (about 75 iterations a second on one
# core) needs two ten-second attempts or more; with two threads 400 iterations fitted in one.
iters=1200
# On the CPU: the recipe's GPU is one `local` has only where this machine does.
"$DLJOB" submit "$root/recipes/fashion-mnist.yaml" --site local --set resources.gpus=0 \
  --set train.max_iter=$iters --set train.threads=1 --set resources.walltime=00:01:10 --set checkpoint.signal_margin=60 \
  --wait >"$WORK/submit.out" 2>&1 || true
"$DLJOB" status --all --json >"$WORK/all.json"
read -r attempts first last run_dir < <(python3 -c '
import json, sys
jobs = sorted((json.loads(l) for l in open(sys.argv[1]) if l.strip()), key=lambda j: j["attempt"])
print(len(jobs), jobs[0]["id"], jobs[-1]["id"], jobs[-1]["run_dir"])' "$WORK/all.json")
check "the chain took more than one job" 1 "$([ "$attempts" -gt 1 ] && echo 1 || echo 0)"

check "plot draws the chain as one curve" "wrote $WORK/iter.svg (1 curve)" \
  "$("$DLJOB" plot "$first" -o "$WORK/iter.svg" 2>&1)"
check "against time too" "wrote $WORK/time.svg (1 curve)" \
  "$("$DLJOB" plot "$last" --x time -o "$WORK/time.svg" 2>&1)"
# The first plot item is the training loss: one vertex per distinct trained iteration. Its x
# must be an affine map of each point's iteration, and of its time by the documented rule
# (docs/cli.md: each process's points offset by the summed wall_s of the ones before), computed
# here independently; a chain whose time restarted at each attempt fails that.
read -r expected iter_points iter_fits time_points time_fits < <(python3 - \
  "$run_dir/metrics.jsonl" "$WORK/iter.svg" "$WORK/time.svg" <<'PY'
import json, re, sys
points, offset, length, last = {}, 0.0, 0.0, None
for line in open(sys.argv[1]):
    m = json.loads(line)
    if m["type"] == "start":
        offset, length = offset + length, 0.0
        points = {i: v for i, v in points.items() if i < m["iter"]}
    elif m["type"] == "train":
        length = max(length, m["elapsed_s"])
        points[m["iter"]] = offset + m["elapsed_s"]
    elif m["type"] == "final":
        length = max(length, m["wall_s"])
iters = sorted(points)
out = [len(iters)]
for svg, data in ((sys.argv[2], iters), (sys.argv[3], [points[i] for i in iters])):
    text = open(svg).read()
    item = text[text.index('<g id="gnuplot_plot_1a"'):text.index('<g id="gnuplot_plot_2a"')]
    xs = [float(x) for x in re.findall(r"[ML](-?[0-9.]+),-?[0-9.]+", item)]
    fits = len(xs) == len(data) and len(xs) >= 3
    if fits:
        scale = (xs[-1] - xs[0]) / (data[-1] - data[0])
        fits = scale > 0 and all(abs(xs[0] + scale * (d - data[0]) - x) < 0.1 for d, x in zip(data, xs))
    out += [len(xs), int(fits)]
print(*out)
PY
)
check "the iteration plot has a point per trained iteration" "$expected" "$iter_points"
check "where their iterations put them" 1 "$iter_fits"
check "the time plot has the same points" "$expected" "$time_points"
check "where their time across the attempts puts them" 1 "$time_fits"
check "the text summary names every attempt" 1 \
  "$("$DLJOB" plot "$last" --format text | grep -cE "^job $first\\+([0-9]+\\+)*$last ")"
echo "$attempts attempts, $expected training-loss points"
finish
