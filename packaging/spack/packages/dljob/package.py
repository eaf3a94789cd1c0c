# Spack recipe for dljob 0.1.0 (Spack 1.0's package layout: spack_repo.builtin.build_systems).
#
# Use it from a Spack package repository of your own (`spack repo create`, then `spack repo add`):
# copy packaging/spack/packages/dljob into that repository's packages/ folder, then
#   spack install dljob +cuda cuda_arch=80,90      (or ~cuda; +mpi is the default)
# No release tarball is published yet (the url below is a placeholder), so build from a checkout
# with `spack develop --path <checkout> dljob@0.1.0` in an environment, or point url at a
# `git archive --prefix=dljob-0.1.0/ -o dljob-0.1.0.tar.gz HEAD` tarball and add its sha256
# (`spack checksum dljob`, or `sha256sum`) to version() below.
#
# The dependencies are what the build looks for (cmake/DljobDependencies.cmake,
# cmake/DljobCuda.cmake, engine/CMakeLists.txt); tests/packaging/check_recipes.py keeps the two in
# step (ctest -L release). Spack itself has not run this file: it was checked with Python's
# ast/py_compile and that script only.
import os

from spack_repo.builtin.build_systems.cmake import CMakePackage, generator
from spack_repo.builtin.build_systems.cuda import CudaPackage

from spack.package import *


class Dljob(CMakePackage, CudaPackage):
    """dljob submits, tracks and stages deep-learning training jobs on HPC schedulers (Slurm,
    PBS/Torque, Moab, SHARCNET sqsub, or none) from one recipe and per-cluster site profiles;
    dltrain is its Caffe-style training engine, on CPUs and (as a plugin) CUDA/cuDNN GPUs, with
    MPI/NCCL data parallelism."""

    # PLACEHOLDER: the project has no public home or release tarball yet; replace both.
    homepage = "https://example.invalid/dljob"
    url = "https://example.invalid/dljob/dljob-0.1.0.tar.gz"

    # No license() directive: the repository has no LICENSE file and its README names no licence
    # (checked for 0.1.0). Add one when the project declares it.

    # No sha256 yet (see the top of this file): Spack will not fetch it unverified (short of
    # --no-checksum), and `spack develop` builds do not fetch at all.
    version("0.1.0")

    generator("ninja")

    variant("mpi", default=True, description="Build dltrain's MPI plugins (data-parallel training)")

    # CMakeLists.txt's cmake_minimum_required.
    depends_on("cmake@3.25:", type="build")
    depends_on("cxx", type="build")
    # pkg_check_modules (zstd, lmdb, nettle, and Open MPI's ompi-c or MPICH's mpich).
    depends_on("pkgconfig", type="build")

    depends_on("yaml-cpp")
    # Headers at build time; dljob opens libcurl.so.4 with dlopen at its first fetch
    # (src/dljob/adapters/http_curl.cpp), and finds it through the RPATH Spack gives link deps.
    depends_on("curl")
    depends_on("nlohmann-json@3.10:", type="build")  # header-only
    depends_on("fmt@9:")
    depends_on("cli11@2.1:", type="build")  # header-only
    depends_on("sqlite")
    # Boost.Process v1 (header-only, links Boost.Filesystem). 1.88 made Process v2 what
    # <boost/process.hpp> means, which the code does not use.
    depends_on("boost@1.74:1.87 +filesystem")
    depends_on("libarchive")
    depends_on("zlib-api")
    depends_on("libpng")
    depends_on("jpeg")
    depends_on("zstd")
    depends_on("lmdb")  # Spack's lmdb writes the lmdb.pc pkg_check_modules reads
    depends_on("leveldb")
    # Caffe's HDF5Data files (optional in the build, DLJOB_HDF5=AUTO: found by pkg-config's
    # hdf5.pc, which HDF5's own install writes).
    depends_on("hdf5")
    # Caffe's prototxt (engine/proto/caffe.proto, compiled by protoc). Up to 21.x (3.21): from 22
    # protobuf needs Abseil, which CMake's FindProtobuf module (what the build uses) does not put on
    # the link line. dljob has been built against Debian's 3.21 (Debian 12), not 22 or later.
    depends_on("protobuf@3.12:21")
    depends_on("nettle")
    # OpenBLAS itself, not the blas virtual: the build looks for libopenblas and cblas.h.
    depends_on("openblas")
    depends_on("xxhash")

    # kainjow-mustache (header-only): Spack has no package for it. The one header of upstream's
    # v4.1 tag (byte for byte what Debian's libkainjow-mustache-dev 4.1 ships) is fetched beside
    # the source as <source>/dljob-third-party/kainjow/mustache.hpp, and cmake_args points the
    # build's find_path (MUSTACHE_INCLUDE_DIR) at it.
    resource(
        name="kainjow-mustache",
        url="https://raw.githubusercontent.com/kainjow/Mustache/v4.1/mustache.hpp",
        sha256="6a07bd8c31be6bb3eae6df98b12f89df8931604bd890e8bba59298a68b89ff29",
        expand=False,
        destination="dljob-third-party",
        placement="kainjow",
    )

    # +cuda: CudaPackage adds the cuda dependency and cuda_arch. cuDNN 8 or newer (DljobCuda.cmake).
    depends_on("cudnn@8:", when="+cuda")
    # NCCL is opened with dlopen by the CUDA plugin (libnccl.so.2, engine/src/cuda/
    # nccl_communicator.cu); as a link dependency its lib folder is in the plugin's RPATH.
    depends_on("nccl", when="+cuda")

    # +mpi: one plugin per MPI flavour found (engine/CMakeLists.txt): pkg-config's ompi-c (Open
    # MPI) or mpich, else CMake's FindMPI.
    depends_on("mpi", when="+mpi")

    # `spack install --test=root`: the unit and engine suites (see check()).
    depends_on("googletest@1.11:", type="test")
    depends_on("python@3:", type="test")

    def cmake_args(self):
        spec = self.spec
        args = [
            self.define("DLJOB_CUDA", "ON" if spec.satisfies("+cuda") else "OFF"),
            self.define("DLJOB_MPI", "AUTO" if spec.satisfies("+mpi") else "OFF"),
            self.define("DLJOB_LEVELDB", "ON"),
            self.define("DLJOB_BUILD_TESTS", self.run_tests),
        ]
        mustache = join_path(self.stage.source_path, "dljob-third-party")
        if os.path.isfile(join_path(mustache, "kainjow", "mustache.hpp")):
            args.append(self.define("MUSTACHE_INCLUDE_DIR", mustache))
        # else a `spack develop` build, which stages no resources (spack/spack#29540): the build
        # then looks for kainjow/mustache.hpp on its own search path (a system's
        # libkainjow-mustache-dev), or put the header in the checkout as
        # dljob-third-party/kainjow/mustache.hpp.
        if spec.satisfies("+cuda"):
            args.append(self.define("CMAKE_CUDA_COMPILER", spec["cuda"].prefix.bin.nvcc))
            args.append(self.define("CUDNN_ROOT", spec["cudnn"].prefix))
            archs = [a for a in spec.variants["cuda_arch"].value if a != "none"]
            # Empty: the build's own list (75..90, plus 60 and 70 before CUDA 13).
            args.append(self.define("DLJOB_CUDA_ARCHITECTURES", ";".join(archs)))
        return args

    def check(self):
        # Only the suites that need nothing beyond the build: the integration, lint, gpu and
        # arch labels need Slurm, clang-format/clang-tidy, a GPU or the source checkout.
        with working_dir(self.build_directory):
            ctest("--output-on-failure", "-L", "^(unit|engine)$")
