# Every dependency comes from the system (Debian packages installed by scripts/setup.sh).
# Nothing is downloaded at configure or build time: login and compute nodes are often offline.
find_package(Threads REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(CURL REQUIRED) # headers; the library is opened at run time (adapters/http_curl.cpp)
find_package(nlohmann_json 3.9 REQUIRED)
find_package(fmt 7 REQUIRED)
find_package(CLI11 2.1 REQUIRED)
find_package(SQLite3 REQUIRED)
# Boost.Process (v1) is header-only but needs Boost.Filesystem at link time.
find_package(Boost 1.74 REQUIRED COMPONENTS filesystem)
find_package(LibArchive REQUIRED)
find_package(ZLIB REQUIRED)
# The engine decodes image members of packed datasets (engine/src/data/image_decode.cpp).
find_package(PNG REQUIRED)
find_package(JPEG REQUIRED)

# zstd: seekable compressed packs (`dljob pack --compress zstd`, the engine's pack reader).
# Debian's libzstd-dev ships a pkg-config file but no CMake package config.
find_package(PkgConfig REQUIRED)
pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET GLOBAL libzstd)
add_library(dljob::zstd ALIAS PkgConfig::ZSTD)
# LMDB: Caffe's databases of Datums, read by the engine (engine/src/data/lmdb_dataset.cpp) and
# packed by dljob pack (src/dljob/adapters/lmdb_database.cpp).
pkg_check_modules(LMDB REQUIRED IMPORTED_TARGET GLOBAL lmdb)
add_library(dljob::lmdb ALIAS PkgConfig::LMDB)
# LevelDB: Caffe's older databases (convert_imageset -backend leveldb), read by the engine
# (engine/src/data/leveldb_dataset.cpp) and packed by dljob pack
# (src/dljob/adapters/leveldb_database.cpp). Optional: LMDB replaced it in Caffe, and a build
# without it still names a LevelDB it meets and says how to read it. Found by hand: Debian's
# leveldbConfig.cmake links "snappy" by name, whose libsnappy.so only libsnappy-dev ships, and
# the shared libleveldb already carries that dependency.
string(TOUPPER "${DLJOB_LEVELDB}" _dljob_leveldb)
if(NOT _dljob_leveldb MATCHES "^(AUTO|ON|OFF)$")
    message(FATAL_ERROR "DLJOB_LEVELDB='${DLJOB_LEVELDB}': expected AUTO, ON or OFF")
endif()
set(DLJOB_LEVELDB_ENABLED OFF)
add_library(dljob::leveldb INTERFACE IMPORTED)
if(NOT _dljob_leveldb STREQUAL "OFF")
    find_path(LEVELDB_INCLUDE_DIR leveldb/db.h)
    find_library(LEVELDB_LIBRARY NAMES leveldb)
    if(LEVELDB_INCLUDE_DIR AND LEVELDB_LIBRARY)
        set(DLJOB_LEVELDB_ENABLED ON)
        target_include_directories(dljob::leveldb SYSTEM INTERFACE ${LEVELDB_INCLUDE_DIR})
        target_link_libraries(dljob::leveldb INTERFACE ${LEVELDB_LIBRARY})
    elseif(_dljob_leveldb STREQUAL "ON")
        message(FATAL_ERROR "DLJOB_LEVELDB=ON but LevelDB was not found: install libleveldb-dev "
                            "(scripts/setup.sh) or configure with -DDLJOB_LEVELDB=OFF")
    endif()
endif()
# The files that read LevelDB say DLJOB_HAVE_LEVELDB (1 or 0), set on them alone where their
# targets are made (dljob_leveldb_sources), so switching LevelDB on rebuilds only them.
if(DLJOB_LEVELDB_ENABLED)
    set(DLJOB_HAVE_LEVELDB 1)
else()
    set(DLJOB_HAVE_LEVELDB 0)
endif()
function(dljob_leveldb_sources)
    set_source_files_properties(${ARGN} PROPERTIES COMPILE_DEFINITIONS
                                                   DLJOB_HAVE_LEVELDB=${DLJOB_HAVE_LEVELDB})
endfunction()
# HDF5: Caffe's HDF5Data files (engine/src/data/hdf5_dataset.cpp), through Debian's libhdf5
# (serial). Optional: a build without it (the release, whose Debian 11 root does not install
# it yet) refuses an HDF5Data source saying so.
set(DLJOB_HDF5 "AUTO" CACHE STRING "Read Caffe's HDF5Data files (libhdf5): AUTO, ON or OFF")
set_property(CACHE DLJOB_HDF5 PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${DLJOB_HDF5}" _dljob_hdf5)
if(NOT _dljob_hdf5 MATCHES "^(AUTO|ON|OFF)$")
    message(FATAL_ERROR "DLJOB_HDF5='${DLJOB_HDF5}': expected AUTO, ON or OFF")
endif()
set(DLJOB_HDF5_ENABLED OFF)
add_library(dljob::hdf5 INTERFACE IMPORTED)
if(NOT _dljob_hdf5 STREQUAL "OFF")
    # Debian names its serial build's module hdf5-serial; HDF5's own install (Spack's,
    # EasyBuild's) names it hdf5.
    pkg_search_module(HDF5 IMPORTED_TARGET GLOBAL hdf5-serial hdf5)
    if(HDF5_FOUND)
        set(DLJOB_HDF5_ENABLED ON)
        target_link_libraries(dljob::hdf5 INTERFACE PkgConfig::HDF5)
    elseif(_dljob_hdf5 STREQUAL "ON")
        message(FATAL_ERROR "DLJOB_HDF5=ON but libhdf5 was not found: install libhdf5-dev "
                            "(scripts/setup.sh) or configure with -DDLJOB_HDF5=OFF")
    endif()
endif()
if(DLJOB_HDF5_ENABLED)
    set(DLJOB_HAVE_HDF5 1)
else()
    set(DLJOB_HAVE_HDF5 0)
endif()
function(dljob_hdf5_sources)
    set_source_files_properties(${ARGN} PROPERTIES COMPILE_DEFINITIONS
                                                   DLJOB_HAVE_HDF5=${DLJOB_HAVE_HDF5})
endfunction()
# protobuf: Caffe's prototxt files, parsed against engine/proto/caffe.proto (CMake's own
# FindProtobuf: Debian ships no protobuf CMake config).
find_package(Protobuf REQUIRED)
# Nettle: MD5/SHA-256 of fetched datasets (adapters/hash_nettle.cpp); libarchive loads it anyway.
pkg_check_modules(NETTLE REQUIRED IMPORTED_TARGET GLOBAL nettle)
add_library(dljob::nettle ALIAS PkgConfig::NETTLE)

# OpenBLAS: the engine's CPU GEMM. Debian ships no CMake package config that names a target,
# so look for the library and header directly.
find_path(OPENBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas openblas-pthread)
find_library(OPENBLAS_LIBRARY NAMES openblas)
if(NOT OPENBLAS_INCLUDE_DIR OR NOT OPENBLAS_LIBRARY)
    message(FATAL_ERROR "OpenBLAS not found (cblas.h and libopenblas): run scripts/setup.sh "
                        "or install libopenblas-dev")
endif()
add_library(dljob::openblas INTERFACE IMPORTED)
target_include_directories(dljob::openblas INTERFACE ${OPENBLAS_INCLUDE_DIR})
target_link_libraries(dljob::openblas INTERFACE ${OPENBLAS_LIBRARY})

# xxHash (header + small library) and kainjow-mustache (header-only): no CMake configs in Debian.
find_path(XXHASH_INCLUDE_DIR xxhash.h)
find_library(XXHASH_LIBRARY NAMES xxhash)
if(NOT XXHASH_INCLUDE_DIR OR NOT XXHASH_LIBRARY)
    message(FATAL_ERROR "xxHash not found: run scripts/setup.sh or install libxxhash-dev")
endif()
add_library(dljob::xxhash INTERFACE IMPORTED)
target_include_directories(dljob::xxhash INTERFACE ${XXHASH_INCLUDE_DIR})
target_link_libraries(dljob::xxhash INTERFACE ${XXHASH_LIBRARY})

find_path(MUSTACHE_INCLUDE_DIR kainjow/mustache.hpp)
if(NOT MUSTACHE_INCLUDE_DIR)
    message(FATAL_ERROR "kainjow-mustache not found: run scripts/setup.sh "
                        "or install libkainjow-mustache-dev")
endif()
add_library(dljob::mustache INTERFACE IMPORTED)
target_include_directories(dljob::mustache SYSTEM INTERFACE ${MUSTACHE_INCLUDE_DIR})

if(DLJOB_BUILD_TESTS)
    find_package(GTest 1.11 REQUIRED)
endif()
