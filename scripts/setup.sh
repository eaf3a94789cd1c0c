#!/usr/bin/env bash
# Installs every build and test dependency of dljob from Debian packages, only what is missing.
#
#   scripts/setup.sh            build, test and run dependencies (what the README's commands need)
#   scripts/setup.sh --bench    also what the benchmarks compare against (PyTorch, hyperfine, rsync)
#   scripts/setup.sh --fuzz     also Clang with libFuzzer (tests/fuzz/run.sh)
#   scripts/setup.sh --list     print the package list and exit
#
# Idempotent: when everything is installed it does nothing (no apt-get update). Runs apt-get as
# root, through sudo otherwise. Nothing is downloaded except Debian packages.
set -euo pipefail

build_packages=(
    g++ cmake ninja-build pkg-config git python3 ca-certificates
    libyaml-cpp-dev libcurl4-openssl-dev nlohmann-json3-dev libfmt-dev libcli11-dev
    libsqlite3-dev libboost-dev libboost-filesystem-dev libarchive-dev libxxhash-dev libzstd-dev
    libkainjow-mustache-dev libopenblas-dev zlib1g-dev libpng-dev libjpeg62-turbo-dev nettle-dev
    liblmdb-dev libprotobuf-dev protobuf-compiler
    # Optional in the build (DLJOB_LEVELDB=AUTO, DLJOB_HDF5=AUTO): Caffe's older LevelDB
    # datasets, and its HDF5Data files.
    libleveldb-dev libhdf5-dev
)
test_packages=(
    libgtest-dev clang-format clang-tidy-22 shellcheck tmux munge slurmctld slurmd slurm-client slurm-wlm-torque lmod
    zstd dataset-fashion-mnist gnuplot-nox
    # dltrain's MPI plugins and the data-parallel tests (called as mpirun.openmpi and
    # mpiexec.mpich: slurm-wlm-torque owns the plain names).
    openmpi-bin libopenmpi-dev mpich libmpich-dev
    # dltrain's Gloo plugin: data-parallel ranks that meet without MPI (tests/engine/parallel/test_gloo.cpp).
    libgloo-dev
    # The NumPy references of dltrain's Caffe transforms and caffemodel files written with
    # Caffe's Python protobuf (tests/engine/crop_reference.py, caffemodel_parity.py).
    python3-numpy python3-protobuf
    # Caffe's LMDBs written as convert_imageset does (tests/integration/data_pack_train.sh).
    python3-lmdb
    # The fuzz targets' image seeds (tests/fuzz/seeds.py), replayed by ctest fuzz.replay.
    python3-pil
    # LevelDBs of Datums for the siamese net, HDF5 files for Caffe's HDF5Data
    # (tests/engine/bvlc_train.py, tests/engine/hdf5_files.py).
    python3-plyvel python3-h5py
    # The release (scripts/make-release.sh, tests/release/): its Debian 11 roots, and the
    # certificates of its HTTPS check.
    debootstrap openssl
)
bench_packages=(python3-torch python3-numpy hyperfine rsync time)
fuzz_packages=(clang libclang-rt-14-dev)

packages=("${build_packages[@]}" "${test_packages[@]}")
case "${1:-}" in
    --bench) packages+=("${bench_packages[@]}") ;;
    --fuzz) packages+=("${fuzz_packages[@]}") ;;
    --list) printf '%s\n' "${build_packages[@]}" "${test_packages[@]}" "${bench_packages[@]}" \
        "${fuzz_packages[@]}"; exit 0 ;;
    "") ;;
    *) echo "usage: scripts/setup.sh [--bench|--fuzz|--list]" >&2; exit 2 ;;
esac

if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-query >/dev/null 2>&1; then
    cat >&2 <<MSG
scripts/setup.sh: this system has no apt-get, so dependencies cannot be installed automatically.
Install these (Debian package names; your distribution's may differ), then rerun:
  ${packages[*]}
On a cluster, the equivalent modules (gcc, cmake, boost, openblas, ...) usually provide them.
MSG
    exit 1
fi

missing=()
for p in "${packages[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
    echo "setup: all ${#packages[@]} packages present"
    exit 0
fi

sudo=()
if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null 2>&1 || {
        echo "setup: missing packages (${missing[*]}) and not root; no sudo to install them" >&2
        exit 1
    }
    sudo=(sudo)
fi
echo "setup: installing ${missing[*]}"
apt_opts=(-o DPkg::Lock::Timeout=300 -y -q --no-install-recommends)
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get -o DPkg::Lock::Timeout=300 update -q >/dev/null
"${sudo[@]}" apt-get install "${apt_opts[@]}" "${missing[@]}" >/dev/null
echo "setup: done"
