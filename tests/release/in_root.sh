#!/usr/bin/env bash
# Runs inside the bare Debian 11 root as an unprivileged user (tests/release/release_test.sh):
# what a cluster user does with the tarball, from unpacking it to a finished training.
#
#   in_root.sh TARBALL NAME HTTPS_PORT BLOB_SHA256
#
# needed.txt beside the tarball: "PLUGIN LIBRARY" for each DT_NEEDED of the plugins (the root
# has no readelf).
set -uo pipefail
tarball=$1 name=$2 port=$3 blob_sha=$4
needed=$(dirname "$tarball")/needed.txt
failures=0
check() { # DESCRIPTION COMMAND...
    local what=$1
    shift
    if "$@"; then echo "ok: [bare Debian 11, uid $(id -u)] $what"; else
        echo "FAIL: [bare Debian 11, uid $(id -u)] $what"
        failures=$((failures + 1))
    fi
}
contains() { grep -qF -- "$2" <<<"$1"; }

check "not root" test "$(id -u)" -ne 0
apps="$HOME/my apps"
mkdir -p "$apps"
tar -xzf "$tarball" -C "$apps" || { echo "FAIL: unpack"; exit 1; }
# Moved after unpacking, to a name with a space too: nothing may remember where it was built
# or first unpacked.
mv "$apps/$name" "$apps/dljob moved"
tree="$apps/dljob moved"
dljob="$tree/bin/dljob"
dltrain="$tree/bin/dltrain"

# Every library of every ELF file resolves, inside the tree unless it is glibc's own or the
# site's (MPI and CUDA libraries come from the site's modules).
glibc='^(linux-vdso\.so\.1|ld-linux-x86-64\.so\.2|/lib64/ld-linux-x86-64\.so\.2|libc\.so\.6|libm\.so\.6|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1|libresolv\.so\.2|libutil\.so\.1)$'
site='^(libmpi|libmpich|libopen-|libcuda|libcudnn|libcublas|libnccl|libnvidia)'
while IFS= read -r -d '' f; do
    head -c 4 "$f" | grep -q ELF || continue
    outside=""
    missing=""
    # "\tNAME => PATH (0x...)", "\tNAME => not found", "\t/lib64/ld-linux... (0x...)"; PATH may
    # hold spaces (the tree is under "my apps").
    while IFS= read -r line; do
        line=${line#$'\t'}
        if [[ "$line" == *" => "* ]]; then
            lib=${line%% => *}
            path=${line#* => }
            path=${path% (0x*}
        elif [[ "$line" == /* ]]; then
            path=${line% (0x*}
            lib=$(basename "$path")
        else
            continue # "statically linked"
        fi
        [[ "$lib" =~ $glibc ]] && continue
        if [[ "$path" == "not found" ]]; then
            [[ "$lib" =~ $site ]] || missing+=" $lib"
            continue
        fi
        # A plugin's site library brings its own dependencies (Open MPI's hwloc, libevent):
        # of a plugin only what it needs itself is held to the tree (needed.txt, from readelf).
        if [[ "$f" == "$tree"/lib/dljob/* ]] && ! grep -qxF -- "${f##*/} $lib" "$needed"; then
            continue
        fi
        case "$path" in
            "$tree"/*) ;;
            *) [[ "$lib" =~ $site ]] || outside+=" $lib=$path" ;;
        esac
    done < <(ldd "$f" 2>/dev/null)
    rel=${f#"$tree"/}
    check "ldd $rel: every library found" test -z "$missing"
    check "ldd $rel: every library from the tree, glibc's or the site's" test -z "$outside"
    [[ -z "$missing$outside" ]] || echo "  missing:$missing outside:$outside"
done < <(find "$tree/bin" "$tree/lib" -type f -print0)

version=$("$dljob" --version 2>&1)
check "dljob --version runs ($(head -1 <<<"$version"))" contains "$version" "dljob"
check "dltrain --version runs" "$dltrain" --version
sites=$("$dljob" sites 2>&1)
check "dljob sites lists the bundled profiles" contains "$sites" "bigred2"
recipe="$tree/share/dljob/recipes/fashion-mnist.yaml"
for site in $(awk '{print $1}' <<<"$sites"); do
    # local is this root's machine, which may have no GPU for the recipe's one; the Spark sites
    # (mapr, spark-standalone) have none: two CPU ranks, as the seed trained.
    cpu=()
    [ "$site" = local ] && cpu=(--set resources.gpus=0)
    case $site in mapr | spark-standalone) cpu=(--set resources.gpus=0 --set resources.ranks=2) ;; esac
    script=$("$dljob" render "$recipe" --site "$site" --account def-test "${cpu[@]}" 2>/dev/null)
    check "dljob render for site $site" contains "$script" "$tree/bin/dltrain"
done

export DLJOB_POLL_INTERVAL=0
out=$("$dljob" submit "$recipe" --site local --wait --set resources.gpus=0 \
    --set train.max_iter=60 --set train.threads=2 2>&1)
echo "$out" | tail -4 | sed 's/^/  | /'
job=$(sed -n 's/^submitted job \([0-9]*\) .*/\1/p' <<<"$out" | head -1)
check "dljob submit --site local --wait: job $job" test -n "$job"
status=$("$dljob" status "$job" --json 2>&1)
check "dljob status --json: the job COMPLETED" contains "$status" '"state":"COMPLETED"'
check "dljob status --json: with its training's metrics" contains "$status" '"iter":60'
check "dljob status --all --json lists it" contains "$("$dljob" status --all --json 2>&1)" "\"id\":$job,"

# Caffe's HDF5Data through the bundled libhdf5, from the data's folder as Caffe's tools run.
out=$(cd /tmp/dljob-release/hdf5 && "$dltrain" train --config net.prototxt --run-dir "$HOME/h5-run" \
    --solver base_lr=0.1 --max-iter 10 --deadline none --threads 1 2>&1)
check "dltrain trains an HDF5Data net (h5py's file) through the bundled libhdf5" \
    grep -q '"type":"final"' "$HOME/h5-run/metrics.jsonl"
[[ -f "$HOME/h5-run/metrics.jsonl" ]] || echo "$out" | tail -5 | sed 's/^/  | /'

# Two CPU ranks through the bundled Open MPI plugin and the root's own Open MPI.
if command -v mpirun.openmpi >/dev/null; then
    export OMPI_MCA_btl_vader_single_copy_mechanism=none MPIEXEC_TIMEOUT=180
    out=$("$dljob" submit "$recipe" --site local --wait --set resources.gpus=0 \
        --set resources.ranks=2 --set train.max_iter=20 --set train.threads=1 \
        --set data.stage_to=none 2>&1)
    job=$(sed -n 's/^submitted job \([0-9]*\) .*/\1/p' <<<"$out" | head -1)
    state=$("$dljob" status "$job" --json 2>&1)
    check "two ranks through the bundled Open MPI plugin: COMPLETED" contains "$state" '"state":"COMPLETED"'
    check "two ranks: the training saw 2 ranks" contains "$state" '"ranks":2'
    [[ "$state" == *COMPLETED* ]] || "$dljob" logs "$job" 2>&1 | tail -20 | sed 's/^/  | /'
else
    echo "FAIL: the root has no mpirun.openmpi"
    failures=$((failures + 1))
fi

# HTTPS through the bundled libcurl, whose own default is Debian's CA path (absent here).
url="https://127.0.0.1:$port/files/blob.bin"
fetch() { # DIR [VAR=VALUE...]
    local dir=$1
    shift
    env "$@" "$dljob" fetch-data "$url" --to "$HOME/$dir" --sha256 "$blob_sha" 2>&1
}
out=$(fetch f1)
check "https: verified with the CA where RHEL keeps it (/etc/pki/tls/certs)" \
    test "$(sha256sum "$HOME/f1/blob.bin" 2>/dev/null | cut -d' ' -f1)" = "$blob_sha"
[[ -f "$HOME/f1/blob.bin" ]] || echo "$out" | sed 's/^/  | /'
dir=$(dirname "$tarball")
out=$(fetch f2 SSL_CERT_FILE="$dir/site-ca.pem")
check "https: SSL_CERT_FILE names the CA" test -f "$HOME/f2/blob.bin"
out=$(fetch f3 SSL_CERT_FILE="$dir/other-ca.pem")
check "https: SSL_CERT_FILE is the one used (another CA fails)" test ! -e "$HOME/f3/blob.bin"
check "https: the failure names the CA file used" contains "$out" "other-ca.pem"
out=$(fetch f4 CURL_CA_BUNDLE="$dir/other-ca.pem")
check "https: CURL_CA_BUNDLE is honoured too" contains "$out" "other-ca.pem"
out=$(fetch f5 SSL_CERT_FILE=/nowhere/ca.pem)
check "https: a variable naming a missing file is an error that names it" contains "$out" "SSL_CERT_FILE=/nowhere/ca.pem"

if ((failures)); then
    echo "$failures check(s) failed in the bare root"
    exit 1
fi
