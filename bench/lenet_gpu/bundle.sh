#!/bin/sh
# Packs what a GPU machine without this project's build dependencies needs to run the GPU tests
# and the GPU benchmark (bench/lenet_gpu/on_gpu.sh runs them there), into build-gpu-bundle/
# (ignored by git; carry that one folder):
#   bundle.tar.gz   BUILD/engine/dltrain (+ .bin), BUILD/src/dljob (+ .bin), BUILD/tests/dl_engine_tests,
#                   and the shared libraries they need except glibc, libstdc++ and CUDA's own
#                   (cuBLAS, cuDNN: the GPU machine has them, its driver must match the toolkit)
#   fashion-mnist/  the benchmark's data (Debian's dataset-fashion-mnist); on_gpu.sh cifar makes its
#                   CIFAR-shaped batches from it there (184 MB written, none of it carried)
#
#   bench/lenet_gpu/bundle.sh [--build DIR]    (default DIR: build-gpu, configured and built
#                                               here with CUDA for sm_90 unless it exists)
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$root/build-gpu
while [ $# -gt 0 ]; do
    case $1 in
    --build) build=$(cd "$2" && pwd); shift 2 ;;
    *) echo "usage: $0 [--build DIR]" >&2; exit 2 ;;
    esac
done
# The default configuration (Release, as README command 1 builds) plus what a GPU build needs:
# the CUDA plugin required, and only the GPU generation the lent machines have (sm_90), which
# keeps nvcc's time here to one architecture.
if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S "$root" -B "$build" -G Ninja -DDLJOB_CUDA=ON \
        -DDLJOB_CUDA_ARCHITECTURES="${DLJOB_CUDA_ARCHITECTURES:-90}" -DDLJOB_WARNINGS_AS_ERRORS=ON
fi
# A test build that found nvcc (DLJOB_CUDA=AUTO) has the plugin too, for sm_90 among others.
grep -Eq '^DLJOB_CUDA:STRING=(ON|AUTO)' "$build/CMakeCache.txt" &&
    grep -Eq '^CMAKE_CUDA_ARCHITECTURES:STRING=.*90' "$build/CMakeCache.txt" ||
    { echo "$build is not a CUDA build for sm_90 (-DDLJOB_CUDA=ON)" >&2; exit 2; }
# The Gloo plugin where the build has it (libgloo-dev): dp mode's ranks that meet without MPI.
gloo_target=$(ninja -C "$build" -t targets all 2>/dev/null | grep -o '^dltrain_gloo:' | tr -d :) || true
ninja -C "$build" dltrain dltrain_cuda dl_engine_tests dljob $gloo_target

name=$(basename "$build")
out=$root/build-gpu-bundle
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/$name/engine" "$stage/$name/tests" "$stage/$name/lib"
cp "$build/engine/dltrain" "$stage/$name/engine/dltrain.bin"
# The CUDA backend is a plugin found next to the real binary (engine/src/backends/cuda_loader.hpp).
cp "$build/engine/libdltrain-cuda.so" "$stage/$name/engine/"
# The MPI plugins (docs/data-parallel.md) without their libraries: the ranks must use the GPU
# machine's own Open MPI (libmpi.so.40), the one its mpirun starts them with.
for plugin in "$build"/engine/libdltrain-mpi-*.so "$build"/engine/libdltrain-gloo.so; do
    if [ -f "$plugin" ]; then cp "$plugin" "$stage/$name/engine/"; fi
done
cp "$build/tests/dl_engine_tests" "$stage/$name/tests/"
# dljob itself, for on_gpu.sh job (submit through the local site on the GPU machine).
mkdir -p "$stage/$name/src"
strip -o "$stage/$name/src/dljob.bin" "$build/src/dljob"
# dltrain is run by the tests and the benchmark: a wrapper gives it its libraries without
# putting them in front of anyone else's (python's torch keeps its own).
cat > "$stage/$name/engine/dltrain" <<'SH'
#!/bin/sh
here=$(dirname "$(readlink -f "$0")")
LD_LIBRARY_PATH="$here/../lib:${DLJOB_GPU_LIBS:-}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    exec "$here/dltrain.bin" "$@"
SH
chmod +x "$stage/$name/engine/dltrain"
cat > "$stage/$name/src/dljob" <<'SH'
#!/bin/sh
here=$(dirname "$(readlink -f "$0")")
LD_LIBRARY_PATH="$here/../lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$here/dljob.bin" "$@"
SH
chmod +x "$stage/$name/src/dljob"
gloo_plugin=$(ls "$build"/engine/libdltrain-gloo.so 2>/dev/null || true)
# shellcheck disable=SC2086 # $gloo_plugin is empty or one path
ldd "$build/engine/dltrain" "$build/engine/libdltrain-cuda.so" "$build/tests/dl_engine_tests" "$build/src/dljob" $gloo_plugin | awk '$2 == "=>" {print $1, $3}' |
    grep -Ev '^(linux-vdso|libc\.|libm\.|libpthread|libdl\.|librt\.|ld-linux|libstdc\+\+|libgcc_s|libcublas|libcudnn|libcudart)' |
    sort -u | while read -r lib path; do cp -L "$path" "$stage/$name/lib/$lib"; done
mkdir -p "$out"
echo "$name" > "$out/BUILD_DIR"
tar -C "$stage" -czf "$out/bundle.tar.gz" "$name"
mkdir -p "$out/fashion-mnist"
cp /usr/share/datasets/fashion-mnist/*-ubyte.gz "$out/fashion-mnist/"
du -sh "$out" "$out"/*
echo "carry build-gpu-bundle; on the GPU machine: bench/lenet_gpu/on_gpu.sh tests|bench"
