#!/usr/bin/env bash
# The release as a cluster user meets it (ctest label release): scripts/make-release.sh builds
# the tarball in Debian 11, and a bare Debian 11 minbase root (glibc 2.31, the level of SLES 15
# SP3) stands in for the login node. There, as an unprivileged user, the tarball is unpacked
# under a folder with a space, moved, and used: every library resolves inside the tree (or is
# glibc's, or the site's MPI/CUDA), dljob renders for every bundled site and trains LeNet
# through `local` to COMPLETED, two CPU ranks train through the bundled Open MPI plugin, and the
# bundled libcurl verifies an HTTPS server whose CA is only where RHEL keeps it. On this host:
# no ELF file needs a glibc above the floor, and Lmod loads both module files.
#
#   tests/release/release_test.sh CACHE_DIR
#
# CACHE_DIR keeps both Debian roots and the release's build folder, so a second run rebuilds
# only what changed. Needs root, debootstrap and the Debian mirror.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cache=${1:?usage: release_test.sh CACHE_DIR}
floor=2.31
# shellcheck source=scripts/release/chroot-lib.sh
source "$root/scripts/release/chroot-lib.sh"
[[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root (debootstrap, chroot)"; exit 77; }
command -v debootstrap >/dev/null || { echo "SKIP: no debootstrap (scripts/setup.sh installs it)"; exit 77; }
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/dljob-release-test.XXXXXX")
server_pid=""
bare_pid=""
cleanup() {
    [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null || true
    [[ -n "${bare_pid:-}" ]] && kill "$bare_pid" 2>/dev/null || true
    release_unmount_all
    rm -rf --one-file-system "$work"
}
trap cleanup EXIT
failures=0
check() { # DESCRIPTION COMMAND...
    local what=$1
    shift
    if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; failures=$((failures + 1)); fi
}

# Both roots start from one debootstrap; the bare root gets its packages while the release
# builds (apt's downloads and unpacking beside the compiler), not after it.
export DLJOB_RELEASE_MINBASE=$cache/minbase
bare=$cache/bare-root
release_minbase "$bare"
(release_root "$bare" openmpi-bin) >"$work/bare-root.log" 2>&1 &
bare_pid=$!

# 1. The release, as a maintainer makes it. CUDA for one architecture: the test checks that the
#    plugin is bundled and relocatable, and each further architecture costs minutes of nvcc.
#    At -O1: what this test checks does not depend on the optimiser, and -O3 is minutes of CI.
out=$("$root/scripts/make-release.sh" --cache "$cache/build" --dist "$cache/dist" \
    --optimize "${DLJOB_RELEASE_TEST_OPTIMIZE:-1}" \
    --cuda-architectures "${DLJOB_RELEASE_TEST_CUDA_ARCHS:-90}" 2>&1) || {
    echo "$out"
    echo "FAIL: make-release.sh"
    exit 1
}
echo "$out" | sed 's/^/  | /'
tarball=$(tail -1 <<<"$out")
check "make-release prints the tarball's path last" test -f "$tarball"
name=$(basename "$tarball" .tar.gz)
check "the tarball is named dljob-<version>-linux-x86_64.tar.gz" \
    bash -c '[[ "$1" =~ ^dljob-[0-9]+\.[0-9]+\.[0-9]+-linux-x86_64$ ]]' _ "$name"
check "one top folder" test "$(tar -tzf "$tarball" | cut -d/ -f1 | sort -u)" = "$name"

# 2. On this host: the tree's ELF files, their glibc floor, RPATHs and module files.
unpacked="$work/my apps"
mkdir -p "$unpacked"
tar -xzf "$tarball" -C "$unpacked"
tree="$unpacked/$name"
for f in bin/dljob bin/dltrain modulefiles/dljob share/dljob/site-profiles share/dljob/templates \
    share/dljob/recipes share/doc/dljob/install.md share/doc/dljob/third-party/README; do
    check "the tree has $f" test -e "$tree/$f"
done
check "libstdc++ is bundled (the host's does not matter)" test -f "$tree/lib/libstdc++.so.6"
check "libcurl is bundled" test -f "$tree/lib/libcurl.so.4"
check "libhdf5 is bundled (Caffe's HDF5Data)" test -f "$tree/lib/libhdf5_serial.so.103"
check "the Open MPI and MPICH plugins are in lib/dljob" \
    test -f "$tree/lib/dljob/libdltrain-mpi-openmpi.so" -a -f "$tree/lib/dljob/libdltrain-mpi-mpich.so"
check "the MPICH plugin's libmpi.so.12 twin is in lib/dljob" \
    bash -c 'readelf -d "$1" | grep -q "NEEDED.*\[libmpi\.so\.12\]"' _ "$tree/lib/dljob/libdltrain-mpi-mpi.so"
if [[ -x /usr/local/cuda/bin/nvcc ]]; then
    check "the CUDA plugin is in lib/dljob" test -f "$tree/lib/dljob/libdltrain-cuda.so"
fi
for lib in libc.so.6 libm.so.6 libpthread.so.0 libdl.so.2 librt.so.1 ld-linux-x86-64.so.2 \
    libmpi.so.40 libcudnn.so.9 libcuda.so.1; do
    check "$lib is not bundled" test ! -e "$tree/lib/$lib"
done
mapfile -t elves < <(find "$tree" -type f -exec sh -c 'head -c 4 "$1" | grep -q ELF && echo "$1"' _ {} \;)
check "the tree has ELF files to check" test "${#elves[@]}" -gt 10
highest=$(for f in "${elves[@]}"; do objdump -T "$f" | grep -oE 'GLIBC_[0-9]+(\.[0-9]+)+'; done |
    sed 's/GLIBC_//' | sort -uV | tail -1)
echo "  highest glibc symbol version over ${#elves[@]} ELF files: $highest"
check "no ELF file needs more than GLIBC_$floor" \
    test "$(printf '%s\n%s\n' "$floor" "$highest" | sort -V | tail -1)" = "$floor"
bad_paths=$(for f in "${elves[@]}"; do
    readelf -d "$f" | sed -n 's/.*(R\(UN\)\{0,1\}PATH).*\[\(.*\)\]/\2/p' | tr ':' '\n' |
        { grep -v '^\$ORIGIN' || true; } | sed "s|^|$(basename "$f"): |"
done)
check "every RPATH is \$ORIGIN-relative" test -z "$bad_paths"
check "no file names this build machine's source folder" \
    bash -c '! grep -rqaF -- "$1" "$2"' _ "$root" "$tree"

# Lmod, as on the test cluster: the .lua file from a path with a space, and nothing but PATH
# changes (Lmod's own bookkeeping variables aside).
lmod_init=$(dpkg -L lmod 2>/dev/null | grep '/init/bash$' | head -1 || true)
if [[ -n "$lmod_init" ]]; then
    env_after_load() { # MODULEPATH_DIR
        env -i HOME="$work" PATH=/usr/bin:/bin bash -c '
            source "$1" >/dev/null 2>&1
            module use "$2"
            env | sort >"$3/before"
            module load dljob || exit 1
            env | sort >"$3/after"
            command -v dljob' _ "$lmod_init" "$1" "$work"
    }
    changed() { comm -13 "$work/before" "$work/after" | cut -d= -f1 |
        grep -vE '^(__LMOD|_ModuleTable|_LMFILES_|LOADEDMODULES|LMOD_|MODULEPATH)' | sort -u | tr '\n' ' '; }
    found=$(env_after_load "$tree/modulefiles" || true)
    check "Lmod: module load dljob (.lua) puts the release's bin/ on PATH" test "$found" = "$tree/bin/dljob"
    check "Lmod: the .lua module file changes PATH and nothing else" test "$(changed)" = "PATH "
    # The Tcl file alone (Lmod prefers .lua when both are there), from a path without a space:
    # Lmod's Tcl reader splits such paths (docs/install.md).
    mkdir -p "$work/tcl/modulefiles/dljob"
    cp "$tree"/modulefiles/dljob/[0-9]*[0-9] "$work/tcl/modulefiles/dljob/"
    ln -s "$tree/bin" "$work/tcl/bin"
    found=$(env_after_load "$work/tcl/modulefiles" || true)
    check "Lmod: module load dljob (Tcl) puts the release's bin/ on PATH" test "$found" = "$work/tcl/bin/dljob"
    check "Lmod: the Tcl module file changes PATH and nothing else" test "$(changed)" = "PATH "
else
    echo "FAIL: Lmod is not installed (scripts/setup.sh installs it)"
    failures=$((failures + 1))
fi

# 3. The login node: a bare Debian 11 with Open MPI's launcher (for the two-rank case only).
wait "$bare_pid" || { cat "$work/bare-root.log"; echo "FAIL: the bare root"; exit 1; }
release_mount "$bare"
chroot "$bare" id dlu >/dev/null 2>&1 || chroot "$bare" useradd -m -u 1500 -s /bin/bash dlu
chroot "$bare" sh -c 'rm -rf /home/dlu/* /home/dlu/.[!.]* /tmp/dljob-release' 
mkdir -p "$bare/tmp/dljob-release"
cp "$tarball" "$bare/tmp/dljob-release/"
cp "$here/in_root.sh" "$bare/tmp/dljob-release/"
for plugin in "$tree"/lib/dljob/*.so; do
    readelf -d "$plugin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sed "s|^|$(basename "$plugin") |"
done >"$bare/tmp/dljob-release/needed.txt"
# The data a user would copy to the cluster; Debian's package on this host is the source.
mkdir -p "$bare/usr/share/datasets"
rm -rf "$bare/usr/share/datasets/fashion-mnist"
cp -r /usr/share/datasets/fashion-mnist "$bare/usr/share/datasets/"
# Caffe's HDF5Data as pycaffe users write it (h5py on this host): 40 rows of 4 features, labels
# 0/1 by the first feature's sign, and a net that reads them.
h5=$bare/tmp/dljob-release/hdf5
mkdir -p "$h5"
/usr/bin/python3 "$root/tests/engine/hdf5_files.py" "$h5/train.h5" "$(python3 -c '
import json, random
random.seed(1)
rows = [[random.uniform(-1, 1) for _ in range(4)] for _ in range(40)]
print(json.dumps({"data": {"dtype": "float32", "shape": [40, 4], "values": sum(rows, [])},
                  "label": {"dtype": "float32", "shape": [40], "values": [float(r[0] > 0) for r in rows]}}))')"
echo train.h5 >"$h5/train.txt"
cat >"$h5/net.prototxt" <<'NET'
name: "hdf5"
layer { name: "data" type: "HDF5Data" top: "data" top: "label"
        hdf5_data_param { source: "train.txt" batch_size: 8 } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
        inner_product_param { num_output: 2 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
NET

# An HTTPS server on loopback whose CA is only where RHEL keeps its bundle.
pki=$work/pki
mkdir -p "$pki" "$work/www"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=dljob test CA" \
    -keyout "$pki/ca.key" -out "$pki/ca.pem" >/dev/null 2>&1
openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout "$pki/server.key" \
    -out "$pki/server.csr" >/dev/null 2>&1
printf 'subjectAltName=IP:127.0.0.1\n' >"$pki/ext"
openssl x509 -req -in "$pki/server.csr" -CA "$pki/ca.pem" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 2 -extfile "$pki/ext" -out "$pki/server.pem" >/dev/null 2>&1
head -c 100000 /dev/urandom >"$work/www/blob.bin"
# The server lives while this script holds the FIFO's write end open (fd 4).
mkfifo "$work/keep"
python3 "$root/tests/support/http_server.py" "$work/www" --tls "$pki/server.pem" "$pki/server.key" \
    <"$work/keep" >"$work/port" &
server_pid=$!
exec 4>"$work/keep"
for _ in $(seq 100); do [[ -s "$work/port" ]] && break; sleep 0.1; done
port=$(sed -n 's/^PORT //p' "$work/port")
rm -rf "$bare/etc/pki" "$bare/etc/ssl/certs/ca-certificates.crt"
mkdir -p "$bare/etc/pki/tls/certs"
cp "$pki/ca.pem" "$bare/etc/pki/tls/certs/ca-bundle.crt"
cp "$pki/ca.pem" "$bare/tmp/dljob-release/site-ca.pem"
# A CA that signed nothing here: named by a variable, it must be the one used, and fail.
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=another CA" \
    -keyout "$pki/other.key" -out "$bare/tmp/dljob-release/other-ca.pem" >/dev/null 2>&1
chmod -R a+rX "$bare/tmp/dljob-release"
expected_sha=$(sha256sum "$work/www/blob.bin" | cut -d' ' -f1)

chroot --userspec=dlu:dlu "$bare" env -i HOME=/home/dlu USER=dlu LOGNAME=dlu LC_ALL=C.UTF-8 \
    PATH=/usr/local/bin:/usr/bin:/bin TMPDIR=/tmp \
    bash /tmp/dljob-release/in_root.sh "/tmp/dljob-release/$name.tar.gz" "$name" "$port" \
    "$expected_sha" || failures=$((failures + 1))

if ((failures)); then
    echo "$failures check(s) failed"
    exit 1
fi
echo "all release checks passed"
