#!/usr/bin/env bash
# Builds the relocatable release: one tarball that a user without root unpacks anywhere on a
# Linux with glibc 2.31 or later (SLES 15 SP3+, Rocky/Alma 9, Ubuntu 20.04+, Debian 11+) and
# runs after `module use .../modulefiles; module load dljob`. docs/install.md says why it is
# built this way; its last line of output is the tarball's path.
#
#   scripts/make-release.sh [--cache DIR] [--dist DIR] [--cuda-architectures LIST|none]
#                           [--optimize LEVEL]
#
#   --cache DIR   where the Debian 11 build root and its build folder are kept between runs
#                 (default build/release-cache): a second run rebuilds only what changed
#   --dist DIR    where the tarball goes (default dist/)
#   --cuda-architectures LIST   the CUDA plugin's GPU architectures (default: the build's own,
#                 75;80;86;89;90 with CUDA 13); none builds no CUDA plugin
#   --optimize LEVEL   the compilers' -O level (default 3, a release's); the release test builds
#                 at 1, for CI's time: what it checks (layout, libraries, RPATHs, the glibc
#                 floor, running in a bare root) does not depend on the optimiser
#
# Needs root (debootstrap, chroot, mount) and the Debian mirror; the CUDA plugin is built when
# the CUDA Toolkit with cuDNN is installed in /usr/local/cuda, which is lent to the build root
# read-only. DLJOB_DEBIAN_MIRROR overrides the mirror.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/release/chroot-lib.sh
source "$root/scripts/release/chroot-lib.sh"

cache=$root/build/release-cache
dist=$root/dist
cuda_archs=""
optimize=3
while (($#)); do
    case "$1" in
        --cache) cache=${2:?--cache needs a folder}; shift 2 ;;
        --dist) dist=${2:?--dist needs a folder}; shift 2 ;;
        --cuda-architectures) cuda_archs=${2:?--cuda-architectures needs a list or none}; shift 2 ;;
        --optimize)
            optimize=${2:?--optimize needs a level}
            [[ "$optimize" =~ ^[0-3s]$ ]] || { echo "make-release: --optimize: expected 0-3 or s" >&2; exit 2; }
            shift 2 ;;
        *) echo "usage: scripts/make-release.sh [--cache DIR] [--dist DIR] [--cuda-architectures LIST|none] [--optimize LEVEL]" >&2; exit 2 ;;
    esac
done
[[ $(id -u) -eq 0 ]] || release_die "run as root: the build root is made with debootstrap and chroot"
mkdir -p "$cache" "$dist"
cache=$(cd "$cache" && pwd)
dist=$(cd "$dist" && pwd)

version=$(sed -n 's/^project(dljob VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
[[ -n "$version" ]] || release_die "no version in CMakeLists.txt's project()"
name=dljob-$version-linux-x86_64
build_root=$cache/build-root
trap release_unmount_all EXIT

# Debian 11's packages for everything the build finds (cmake/DljobDependencies.cmake), the
# MPI headers for the plugins (the MPI libraries themselves stay the site's), and Gloo for the
# plugin of ranks without MPI (Debian 11's libgloo-dev, 0.0~git20200918: libgloo.so.0 is bundled).
# libhdf5-dev for Caffe's HDF5Data (its serial libhdf5 1.10 and libsz/libaec are bundled).
build_packages=(
    g++ cmake ninja-build pkg-config binutils patchelf file
    libyaml-cpp-dev libcurl4-openssl-dev nlohmann-json3-dev libfmt-dev libsqlite3-dev
    libboost-dev libboost-filesystem-dev libarchive-dev libxxhash-dev libzstd-dev
    libkainjow-mustache-dev libopenblas-dev zlib1g-dev libpng-dev libjpeg62-turbo-dev nettle-dev
    liblmdb-dev libprotobuf-dev protobuf-compiler libleveldb-dev libopenmpi-dev libmpich-dev
    libgloo-dev libhdf5-dev
)
release_root "$build_root" "${build_packages[@]}"
# CLI11 is header-only and not in Debian 11: the Debian 12 package's headers are used as they
# are (the package has no dependencies and no compiled code).
if ! chroot "$build_root" dpkg-query -W libcli11-dev >/dev/null 2>&1; then
    mkdir -p "$cache/debs"
    (cd "$cache/debs" && apt-get download -q libcli11-dev >/dev/null) ||
        release_die "cannot download libcli11-dev from this machine's Debian mirror"
    cp "$cache"/debs/libcli11-dev_*.deb "$build_root/tmp/"
    chroot "$build_root" sh -c 'dpkg -i /tmp/libcli11-dev_*.deb' >/dev/null
fi

# The source: what git tracks plus new files it does not ignore, never build folders. Files
# keep their times, so a kept build folder rebuilds only what changed.
rm -rf --one-file-system "$build_root/src"
mkdir -p "$build_root/src"
if git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
    revision=$(git -C "$root" describe --always --dirty --abbrev=12)
    git -C "$root" ls-files -co --exclude-standard -z |
        (cd "$root" && tar --null -T - -cf - 2>/dev/null) | tar -xf - -C "$build_root/src"
else
    revision=unknown
    (cd "$root" && tar --exclude='./build*' --exclude=./dist -cf - .) | tar -xf - -C "$build_root/src"
fi

release_mount "$build_root"
cuda_option=(-DDLJOB_CUDA=OFF)
if [[ "$cuda_archs" != none && -x /usr/local/cuda/bin/nvcc ]]; then
    cuda_dir=$(readlink -f /usr/local/cuda)
    release_bind_ro "$cuda_dir" "$build_root" "$cuda_dir"
    ln -sfn "$cuda_dir" "$build_root/usr/local/cuda"
    cuda_option=(-DDLJOB_CUDA=AUTO)
    [[ -n "$cuda_archs" ]] && cuda_option+=("-DDLJOB_CUDA_ARCHITECTURES=$cuda_archs")
elif [[ "$cuda_archs" != none ]]; then
    echo "make-release: no CUDA Toolkit in /usr/local/cuda: the release has no CUDA plugin" >&2
fi

# Inside the root the source is /src and the build /work/build; -ffile-prefix-map keeps even
# those out of the binaries (assertion texts, __FILE__). Each target's sources are compiled in
# batches (CMAKE_UNITY_BUILD): the release is built from scratch, where that halves the CPU time.
prefix_map="-ffile-prefix-map=/src/= -ffile-prefix-map=/work/build/="
chroot "$build_root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C \
    cmake -S /src -B /work/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DDLJOB_BUILD_TESTS=OFF \
    -DCMAKE_UNITY_BUILD=ON "-DCMAKE_CXX_FLAGS_RELEASE=-O$optimize -DNDEBUG" \
    "-DDLJOB_GIT_REVISION=$revision" "-DCMAKE_CXX_FLAGS=$prefix_map" \
    "-DCMAKE_CUDA_FLAGS=-Xcompiler=-ffile-prefix-map=/src/=,-ffile-prefix-map=/work/build/=" \
    "${cuda_option[@]}" >"$cache/configure.log" 2>&1 || {
    tail -30 "$cache/configure.log" >&2
    release_die "configure failed in the build root (log: $cache/configure.log)"
}
grep -E '^-- (dljob|CUDA backend|dltrain MPI)' "$cache/configure.log" | sed 's/^-- /make-release: /'
chroot "$build_root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C \
    ninja -C /work/build >"$cache/build.log" 2>&1 || {
    grep -E 'error|FAILED' -A3 "$cache/build.log" | head -60 >&2
    release_die "build failed in the build root (log: $cache/build.log)"
}
rm -rf --one-file-system "$build_root/work/stage"
chroot "$build_root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C \
    cmake --install /work/build --prefix "/work/stage/$name" --strip >/dev/null
chroot "$build_root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C \
    bash /src/scripts/release/bundle.sh "/work/stage/$name" "$version" /src

# Reproducible order and owners; the times are the commit's.
epoch=$(git -C "$root" log -1 --format=%ct 2>/dev/null || date +%s)
tarball=$dist/$name.tar.gz
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" \
    -C "$build_root/work/stage" -cf - "$name" | gzip -n >"$tarball.part"
mv "$tarball.part" "$tarball"
echo "make-release: $(du -h "$tarball" | cut -f1) compressed, $(du -sh "$build_root/work/stage/$name" | cut -f1) unpacked"
echo "$tarball"
