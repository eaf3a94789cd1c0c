#!/bin/bash
# Staging benchmark (docs/benchmarks.md, "Staging"): the same data moved to /tmp and /dev/shm by
# cp -r, rsync -a, tar -xf, dd (raw sequential copy of the pack's bytes) and dljob stage-data,
# interleaved in rounds so background load hits every method alike. Prints a Markdown table of
# medians. Usage: [FAST_REPEAT=5] bench/staging/run.sh [BUILD_DIR] [ROUNDS]
set -euo pipefail
BUILD=${1:-build}
ROUNDS=${2:-3}
DLJOB=$(realpath "$BUILD/src/dljob")
WORK=${WORK:-/tmp/dljob-bench-staging}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$WORK"
cd "$WORK"

if [ ! -d fmnist ]; then
    python3 "$HERE/expand_fmnist.py" fmnist.tmp && mv fmnist.tmp fmnist
    rm -f fmnist/train.txt fmnist/test.txt
fi
if [ ! -d large ]; then
    mkdir -p large.tmp
    for i in 0 1 2 3; do head -c $((256 << 20)) /dev/urandom > large.tmp/part$i.bin; done
    mv large.tmp large
fi
for set in fmnist large; do
    [ -d $set.dlpack ] || "$DLJOB" pack $set -o $set.dlpack > /dev/null
done

# method name -> command (DEST is the target directory, removed before each run, untimed)
run_method() {
    local method=$1 set=$2 dest=$3
    case $method in
        "cp -r") cp -r $set "$dest/x" ;;
        "rsync -a") rsync -a $set/ "$dest/x/" ;;
        "tar -xf") mkdir "$dest/x" && tar -xf $set.dlpack/data.tar -C "$dest/x" ;;
        "dd bs=8M (raw copy of the pack)") dd if=$set.dlpack/data.tar of="$dest/x.tar" bs=8M status=none ;;
        "dd bs=256K (raw copy of the pack)") dd if=$set.dlpack/data.tar of="$dest/x.tar" bs=256K status=none ;;
        "dljob stage-data") "$DLJOB" stage-data $set.dlpack --to "$dest" > /dev/null 2>&1 ;;
        "dljob stage-data --extract") "$DLJOB" stage-data $set.dlpack --to "$dest" --extract > /dev/null 2>&1 ;;
        "dljob stage-data (cached)") "$DLJOB" stage-data $set.dlpack --to "$dest" --extract > /dev/null 2>&1 ;;
    esac
}

# dd at two block sizes: the large one users pick, and the cache-sized one that is faster
# from the page cache; the staging target is measured against whichever is faster.
METHODS=("cp -r" "rsync -a" "tar -xf" "dd bs=8M (raw copy of the pack)" "dd bs=256K (raw copy of the pack)" "dljob stage-data" "dljob stage-data --extract" "dljob stage-data (cached)")
# The copies of the whole pack take tens of milliseconds, where this VM's noise (a new tmpfs
# page costs more the first time the guest touches it) is as large as the differences: they run
# FAST_REPEAT times per round, interleaved, and every run is a sample of the median.
QUICK=("dd bs=8M (raw copy of the pack)" "dd bs=256K (raw copy of the pack)" "dljob stage-data")
SLOW=("cp -r" "rsync -a" "tar -xf" "dljob stage-data --extract")
FAST_REPEAT=${FAST_REPEAT:-5}
declare -A times tree_removed

# ext4 without a journal (this VM's /tmp) does not reuse an inode for 60 s after it is freed
# (recently_deleted in fs/ext4/ialloc.c): within that minute every file or directory created
# scans past the inodes just freed, about 1 ms each after a 70,000-file tree is removed here.
# dd creates one file, a first stage-data eight (cache, lock, entry, partial directory, three
# files, marker), so copies measured in that minute compared file creation more than copying
# (run 7 in docs/benchmarks.md). Whole-pack copies now start a minute after the last many-file
# tree on their target was removed; tmpfs keeps no such window.
clear_dest() { # clear_dest TARGET: empty the target's scratch directory
    local dest="$1/dljob-bench-dest" many=0
    if [ -d "$dest" ] && [ "$(find "$dest" | head -1000 | wc -l)" -ge 1000 ]; then
        many=1
    fi
    rm -rf "$dest"
    if [ $many = 1 ]; then tree_removed[$1]=$(date +%s); fi
    mkdir -p "$dest"
}
settle() { # settle TARGET: wait out the minute after the last many-file removal on TARGET
    [ "$(stat -f -c %T "$1")" = tmpfs ] && return
    local since=$(($(date +%s) - ${tree_removed[$1]:-0}))
    if [ $since -lt 61 ]; then
        echo "waiting $((61 - since)) s: a many-file tree was removed from $1 $since s ago" >&2
        sleep $((61 - since))
    fi
}
measure() {
    local method=$1 set=$2 target=$3 round=$4
    local dest="$target/dljob-bench-dest"
    clear_dest "$target"
    if [ "$method" = "dljob stage-data (cached)" ]; then
        run_method "dljob stage-data --extract" "$set" "$dest"
    fi
    sync
    local start end
    start=$(date +%s.%N)
    run_method "$method" "$set" "$dest"
    end=$(date +%s.%N)
    local seconds
    seconds=$(echo "$end - $start" | bc)
    times["$target|$set|$method"]+="$seconds "
    echo "round $round $target $set $method: $seconds s" >&2
}
# Each round and repeat starts the list at another method: what ran just before matters here
# (a method that follows one that freed 1 GiB pays for the guest's pages coming back).
rotated() { # rotated OFFSET ITEM... -> the items starting at OFFSET mod count
    local offset=$1; shift
    local items=("$@") i
    for ((i = 0; i < ${#items[@]}; i++)); do
        echo "${items[$(((i + offset) % ${#items[@]}))]}"
    done
}
for round in $(seq 1 "$ROUNDS"); do
    for target in /tmp /dev/shm; do
        for set in fmnist large; do
            clear_dest "$target"
            settle "$target"
            for rep in $(seq 1 "$FAST_REPEAT"); do
                while IFS= read -r method; do
                    measure "$method" $set $target "$round"
                done < <(rotated $((round + rep)) "${QUICK[@]}")
            done
            while IFS= read -r method; do
                measure "$method" $set $target "$round"
            done < <(rotated $((round - 1)) "${SLOW[@]}")
            # The cached stage needs a staged tree first, whose removal opens the minute above:
            # it comes last.
            for rep in $(seq 1 "$FAST_REPEAT"); do
                measure "dljob stage-data (cached)" $set $target "$round"
            done
        done
    done
done
rm -rf /tmp/dljob-bench-dest /dev/shm/dljob-bench-dest

# Peak memory (max RSS, GNU time) of pack and stage-data on the small-file set and on the
# large-file set: streaming means it does not grow with the data (70,000 files vs 1 GiB).
echo "| step | data | max RSS MiB |" >&2
for set in fmnist large; do
    rm -rf rss.dlpack
    pack_kb=$(/usr/bin/time -f %M "$DLJOB" pack $set -o rss.dlpack 2>&1 >/dev/null | tail -1)
    rm -rf rss.dlpack /tmp/dljob-bench-dest; mkdir -p /tmp/dljob-bench-dest
    stage_kb=$(/usr/bin/time -f %M "$DLJOB" stage-data $set.dlpack --to /tmp/dljob-bench-dest 2>&1 >/dev/null | tail -1)
    rm -rf /tmp/dljob-bench-dest; mkdir -p /tmp/dljob-bench-dest
    extract_kb=$(/usr/bin/time -f %M "$DLJOB" stage-data $set.dlpack --to /tmp/dljob-bench-dest --extract 2>&1 >/dev/null | tail -1)
    rm -rf /tmp/dljob-bench-dest
    echo "| pack | $set | $((pack_kb / 1024)) |" >&2
    echo "| stage-data | $set | $((stage_kb / 1024)) |" >&2
    echo "| stage-data --extract | $set | $((extract_kb / 1024)) |" >&2
done

files_fmnist=$(find fmnist -type f | wc -l); bytes_fmnist=$(du -sb --apparent-size fmnist | cut -f1)
files_large=$(find large -type f | wc -l); bytes_large=$(du -sb --apparent-size large | cut -f1)
echo "| target | data | method | median s | files/s | payload MB/s |"
echo "|---|---|---|---:|---:|---:|"
for target in /tmp /dev/shm; do
    for set in fmnist large; do
        files_var=files_$set; bytes_var=bytes_$set
        for method in "${METHODS[@]}"; do
            median=$(echo ${times["$target|$set|$method"]} | tr ' ' '\n' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
            python3 -c "import sys; m=float('$median'); print(f'| $target | $set | \`$method\` | {m:.3f} | {${!files_var}/m:,.0f} | {${!bytes_var}/m/1e6:,.0f} |')"
        done
    done
done

median_of() { echo ${times["$1"]} | tr ' ' '\n' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo
echo "| target | data | stage-data rate / fastest dd rate | --extract files/s / tar -xf files/s |"
echo "|---|---|---:|---:|"
for target in /tmp /dev/shm; do
    for set in fmnist large; do
        dd8=$(median_of "$target|$set|dd bs=8M (raw copy of the pack)")
        dd256=$(median_of "$target|$set|dd bs=256K (raw copy of the pack)")
        stage=$(median_of "$target|$set|dljob stage-data")
        extract=$(median_of "$target|$set|dljob stage-data --extract")
        tarx=$(median_of "$target|$set|tar -xf")
        python3 -c "print(f'| $target | $set | {min($dd8, $dd256) / $stage:.0%} | {$tarx / $extract:.2f}x |')"
    done
done
