#!/usr/bin/env bash
# Real data end to end, no network: Fashion-MNIST from Debian's dataset-fashion-mnist through
# `dljob fetch-data`, `dljob pack`, `dljob stage-data`, then dltrain reading the staged pack in
# place (IDX members), a pack of an image list (PGM members with labels) and packs of Caffe
# LMDBs (the same run as from the LMDBs). Also: fetch-data
# of a missing URL from a loopback server leaves nothing behind.
#   DLJOB=.../dljob DLTRAIN=.../dltrain data_pack_train.sh
set -euo pipefail
: "${DLJOB:?DLJOB must name the dljob binary}" "${DLTRAIN:?DLTRAIN must name the dltrain binary}"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
if [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
    echo "SKIP: dataset-fashion-mnist is not installed (scripts/setup.sh installs it)"
    exit 0
fi
WORK=$(mktemp -d "${TMPDIR:-/tmp}/dljob-data-itest.XXXXXX")
trap 'rm -rf "$WORK" 2>/dev/null || true' EXIT
failures=0
check() { # DESCRIPTION EXPECTED ACTUAL
    if [ "$2" = "$3" ]; then echo "ok: $1"; else echo "FAIL: $1: expected '$2', got '$3'"; failures=$((failures + 1)); fi
}

# 1. fetch-data from the Debian package: verified copies, the directory on stdout.
out=$("$DLJOB" fetch-data fashion-mnist --to "$WORK/fm" 2>"$WORK/fetch.err")
check "fetch-data prints the directory" "$WORK/fm" "$out"
check "four verified files" 4 "$(grep -c 'verified' "$WORK/fetch.err")"
again=$("$DLJOB" fetch-data fashion-mnist --to "$WORK/fm" 2>&1 >/dev/null | grep -c '^present')
check "a second fetch finds them present" 4 "$again"

# 2. pack and stage.
"$DLJOB" pack "$WORK/fm" -o "$WORK/fm.dlpack" >/dev/null
mkdir -p "$WORK/node"
staged=$("$DLJOB" stage-data "$WORK/fm.dlpack" --to "$WORK/node" 2>/dev/null)
check "staged pack holds data.tar" yes "$([ -f "$staged/data.tar" ] && echo yes || echo no)"

# 3. dltrain reads the staged pack through its index: LeNet's data layers, a short run.
sed -e 's/max_iter: .*/max_iter: 30/' -e 's/test_interval: .*/test_interval: 30/' \
    -e 's/test_iter: .*/test_iter: 2/' -e 's/snapshot: .*/snapshot: 30/' \
    "$SRC/recipes/networks/lenet.yaml" >"$WORK/lenet.yaml"
"$DLTRAIN" train --config "$WORK/lenet.yaml" --run-dir "$WORK/run-pack" --data-dir "$staged" \
    --threads 2 >"$WORK/train.log" 2>&1 || { cat "$WORK/train.log"; exit 1; }
final=$(grep -c '"type":"final"' "$WORK/run-pack/metrics.jsonl" || true)
check "dltrain trained from the pack (final line in metrics.jsonl)" 1 "$final"

# 3b. The same data as seekable zstd in several shards (each IDX .gz is ~30 KB to 26 MB, so
# 4M shards put the big members alone): staged and read in place, the run is the same run.
"$DLJOB" pack "$WORK/fm" -o "$WORK/fm-zst.dlpack" --compress zstd:3 --shard-size 4M >/dev/null
zstaged=$("$DLJOB" stage-data "$WORK/fm-zst.dlpack" --to "$WORK/node" 2>/dev/null)
check "staged compressed pack holds chunks.tsv" yes \
    "$([ -f "$zstaged/chunks.tsv" ] && echo yes || echo no)"
check "the compressed pack has more than one shard" yes \
    "$([ -f "$zstaged/data-00001.tar.zst" ] && echo yes || echo no)"
"$DLTRAIN" train --config "$WORK/lenet.yaml" --run-dir "$WORK/run-zst" --data-dir "$zstaged" \
    --threads 2 >"$WORK/train-zst.log" 2>&1 || { cat "$WORK/train-zst.log"; exit 1; }
# Losses and accuracies, not timings: the same bytes in, the same numbers out.
numbers() { grep -o '"\(loss\|accuracy\|iter\)":[^,}]*' "$1" | tr '\n' ' '; }
check "the runs logged losses" yes "$([ -n "$(numbers "$WORK/run-zst/metrics.jsonl")" ] && echo yes)"
check "training from the compressed sharded pack gives the plain pack's numbers" \
    "$(numbers "$WORK/run-pack/metrics.jsonl")" "$(numbers "$WORK/run-zst/metrics.jsonl")"

# 4. An image list of PGM files (Caffe's train.txt), packed with labels, read as images.
python3 - "$WORK/images" <<'PY'
import gzip, os, sys
out = sys.argv[1]
src = "/usr/share/datasets/fashion-mnist"
for split, prefix, count in (("train", "train", 300), ("test", "t10k", 100)):
    images = gzip.open(f"{src}/{prefix}-images-idx3-ubyte.gz").read()[16:]
    labels = gzip.open(f"{src}/{prefix}-labels-idx1-ubyte.gz").read()[8:]
    os.makedirs(f"{out}/{split}", exist_ok=True)
    with open(f"{out}/{split}.txt", "w") as listing:
        for i in range(count):
            with open(f"{out}/{split}/{i:05d}.pgm", "wb") as f:
                f.write(b"P5 28 28 255\n" + images[i * 784:(i + 1) * 784])
            listing.write(f"{split}/{i:05d}.pgm {labels[i]}\n")
PY
"$DLJOB" pack "$WORK/images/train.txt" -o "$WORK/train.dlpack" >/dev/null
"$DLJOB" pack "$WORK/images/test.txt" -o "$WORK/test.dlpack" >/dev/null
sed -e 's/source: train-images-idx3-ubyte.gz/source: train.dlpack/' \
    -e 's/label_source: train-labels-idx1-ubyte.gz/label_source: train.dlpack/' \
    -e 's/source: t10k-images-idx3-ubyte.gz/source: test.dlpack/' \
    -e 's/label_source: t10k-labels-idx1-ubyte.gz/label_source: test.dlpack/' \
    "$WORK/lenet.yaml" >"$WORK/lenet-images.yaml"
"$DLTRAIN" train --config "$WORK/lenet-images.yaml" --run-dir "$WORK/run-images" \
    --data-dir "$WORK" --threads 2 >"$WORK/train-images.log" 2>&1 || { cat "$WORK/train-images.log"; exit 1; }
final=$(grep -c '"type":"final"' "$WORK/run-images/metrics.jsonl" || true)
check "dltrain trained from a pack of labelled PGM images" 1 "$final"

# 4b. Caffe's LMDBs of Datums (as convert_imageset writes them, here with python3-lmdb) packed
# by dljob pack: dltrain gives the same run from the packs as from the LMDBs themselves, so the
# packs hold the very images and labels, in the same order.
# Debian's python3-lmdb is importable from /usr/bin/python3 (not from a python3 earlier on PATH).
if /usr/bin/python3 -c 'import lmdb' 2>/dev/null; then
    /usr/bin/python3 - "$WORK/caffe" <<'PY'
import gzip, os, sys
import lmdb
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
src = "/usr/share/datasets/fashion-mnist"
def varint(v):
    b = bytearray()
    while v >= 0x80:
        b.append((v & 0x7F) | 0x80)
        v >>= 7
    b.append(v)
    return bytes(b)
def datum(pixels, label):  # caffe_pb2.Datum: channels 1, height 2, width 3, data 4, label 5
    return (b"\x08" + varint(1) + b"\x10" + varint(28) + b"\x18" + varint(28) + b"\x22" +
            varint(len(pixels)) + pixels + b"\x28" + varint(label))
for split, prefix, count in (("train", "train", 300), ("test", "t10k", 100)):
    images = gzip.open(f"{src}/{prefix}-images-idx3-ubyte.gz").read()[16:]
    labels = gzip.open(f"{src}/{prefix}-labels-idx1-ubyte.gz").read()[8:]
    env = lmdb.open(f"{out}/{split}_lmdb", map_size=1 << 26)
    with env.begin(write=True) as txn:
        for i in range(count):
            txn.put(b"%08d_%05d.png" % (i, i), datum(images[i * 784:(i + 1) * 784], labels[i]))
    env.close()
PY
    "$DLJOB" pack "$WORK/caffe/train_lmdb" -o "$WORK/caffe/train.dlpack" >/dev/null
    "$DLJOB" pack "$WORK/caffe/test_lmdb" -o "$WORK/caffe/test.dlpack" >/dev/null
    for kind in lmdb dlpack; do
        sed -e "s/source: train-images-idx3-ubyte.gz/source: train.$kind/" \
            -e "s/label_source: train-labels-idx1-ubyte.gz/label_source: train.$kind/" \
            -e "s/source: t10k-images-idx3-ubyte.gz/source: test.$kind/" \
            -e "s/label_source: t10k-labels-idx1-ubyte.gz/label_source: test.$kind/" \
            -e "s/train\.lmdb/train_lmdb/; s/test\.lmdb/test_lmdb/" \
            "$WORK/lenet.yaml" >"$WORK/caffe/lenet-$kind.yaml"
        "$DLTRAIN" train --config "$WORK/caffe/lenet-$kind.yaml" --run-dir "$WORK/caffe/run-$kind" \
            --threads 2 --deadline none >"$WORK/caffe/train-$kind.log" 2>&1 ||
            { cat "$WORK/caffe/train-$kind.log"; exit 1; }
    done
    check "dltrain trained from the packed LMDB" yes \
        "$([ -n "$(numbers "$WORK/caffe/run-dlpack/metrics.jsonl")" ] && echo yes)"
    check "the packed LMDB trains as the LMDB does" \
        "$(numbers "$WORK/caffe/run-lmdb/metrics.jsonl")" \
        "$(numbers "$WORK/caffe/run-dlpack/metrics.jsonl")"
else
    echo "SKIP 4b: python3-lmdb is not installed (scripts/setup.sh installs it)"
fi

# 5. A 404 from a loopback server: exit 7, the URL named, nothing written.
mkdir -p "$WORK/www"
coproc SERVER { exec python3 "$SRC/tests/support/http_server.py" "$WORK/www"; }
read -r _ port <&"${SERVER[0]}"
set +e
msg=$("$DLJOB" fetch-data "http://127.0.0.1:$port/files/nope.tar" --to "$WORK/dl" 2>&1)
rc=$?
set -e
kill "$SERVER_PID" 2>/dev/null || true
check "404 exits 7 (not found)" 7 "$rc"
check "404 names the URL" yes "$(grep -q "not found (HTTP 404): http://127.0.0.1:$port/files/nope.tar" <<<"$msg" && echo yes)"
check "404 leaves nothing" "" "$(ls -A "$WORK/dl")"

[ "$failures" -eq 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "all data checks passed"
