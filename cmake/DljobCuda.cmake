# DLJOB_CUDA=AUTO builds the CUDA backend when both the CUDA Toolkit and cuDNN are found;
# ON requires them and fails loudly; OFF never looks. Sets DLJOB_CUDA_ENABLED.
#
# Default architectures are the GPUs clusters actually have, oldest first:
#   60 P100 and 70 V100 (only with CUDA < 13, which dropped Pascal and Volta),
#   75 T4, 80 A100, 86 A40/RTX A-series, 89 L4/L40, 90 H100/H200 (Hopper).
# Kepler (K20/K80, sm_35/37: Big Red II and Hélios) left CUDA in 12.0; such sites need an older
# toolkit and -DDLJOB_CUDA_ARCHITECTURES="35;37". Override with -DDLJOB_CUDA_ARCHITECTURES=... or
# CMake's own -DCMAKE_CUDA_ARCHITECTURES=... ("native" builds for the GPUs of the build machine
# only, and compiles fastest).
#
# cuDNN (8 or 9) is looked for next to the toolkit, then under CUDNN_ROOT (a CMake or environment
# variable, as sites' cudnn modules set it) or CUDNN_HOME; -DCUDNN_INCLUDE_DIR / -DCUDNN_LIBRARY
# name the files directly.
set(DLJOB_CUDA_ENABLED OFF)
set(DLJOB_CUDA_ARCHITECTURES "" CACHE STRING
    "GPU architectures of the CUDA backend (empty: 75;80;86;89;90, plus 60;70 before CUDA 13)")
string(TOUPPER "${DLJOB_CUDA}" _dljob_cuda)
if(NOT _dljob_cuda MATCHES "^(AUTO|ON|OFF)$")
    message(FATAL_ERROR "DLJOB_CUDA='${DLJOB_CUDA}': expected AUTO, ON or OFF")
endif()

if(NOT _dljob_cuda STREQUAL "OFF")
    # Debian-style images put the toolkit in /usr/local/cuda without adding it to PATH.
    if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
        set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
    endif()
    # enable_language(CUDA) fills CMAKE_CUDA_ARCHITECTURES with the compiler's own default, so
    # remember whether the user chose one before it runs.
    set(_dljob_user_archs OFF)
    if(DEFINED CMAKE_CUDA_ARCHITECTURES)
        set(_dljob_user_archs ON)
    endif()
    include(CheckLanguage)
    check_language(CUDA)
    set(_dljob_cuda_missing "")
    if(NOT CMAKE_CUDA_COMPILER)
        set(_dljob_cuda_missing "nvcc (the CUDA Toolkit)")
    else()
        find_package(CUDAToolkit QUIET)
        set(_cudnn_hints ${CUDNN_ROOT} $ENV{CUDNN_ROOT} $ENV{CUDNN_HOME})
        find_path(CUDNN_INCLUDE_DIR cudnn.h
                  HINTS ${CUDAToolkit_INCLUDE_DIRS} ${_cudnn_hints} PATH_SUFFIXES include)
        find_library(CUDNN_LIBRARY cudnn
                     HINTS ${CUDAToolkit_LIBRARY_DIR} ${_cudnn_hints} PATH_SUFFIXES lib64 lib)
        set(DLJOB_CUDNN_VERSION "")
        foreach(_header cudnn_version.h cudnn.h)
            if(CUDNN_INCLUDE_DIR AND EXISTS "${CUDNN_INCLUDE_DIR}/${_header}"
               AND DLJOB_CUDNN_VERSION STREQUAL "")
                file(STRINGS "${CUDNN_INCLUDE_DIR}/${_header}" _cudnn_defines
                     REGEX "^#define CUDNN_(MAJOR|MINOR) +[0-9]+")
                if(_cudnn_defines)
                    string(REGEX REPLACE ".*CUDNN_MAJOR +([0-9]+).*" "\\1" _major "${_cudnn_defines}")
                    string(REGEX REPLACE ".*CUDNN_MINOR +([0-9]+).*" "\\1" _minor "${_cudnn_defines}")
                    set(DLJOB_CUDNN_VERSION "${_major}.${_minor}")
                endif()
            endif()
        endforeach()
        if(NOT CUDAToolkit_FOUND)
            set(_dljob_cuda_missing "the CUDA Toolkit libraries")
        elseif(NOT EXISTS "${CUDNN_INCLUDE_DIR}/cudnn.h" OR NOT EXISTS "${CUDNN_LIBRARY}")
            set(_dljob_cuda_missing "cuDNN (cudnn.h and libcudnn; set CUDNN_ROOT)")
        elseif(DLJOB_CUDNN_VERSION VERSION_LESS 8)
            set(_dljob_cuda_missing
                "cuDNN 8 or newer (found '${DLJOB_CUDNN_VERSION}' in ${CUDNN_INCLUDE_DIR})")
        endif()
    endif()

    if(_dljob_cuda_missing STREQUAL "")
        enable_language(CUDA)
        if(DLJOB_CUDA_ARCHITECTURES)
            set(CMAKE_CUDA_ARCHITECTURES ${DLJOB_CUDA_ARCHITECTURES} CACHE STRING
                "GPU architectures" FORCE)
        elseif(NOT DEFINED CACHE{DLJOB_CUDA_ARCHITECTURES_SET})
            if(CMAKE_CUDA_COMPILER_VERSION VERSION_LESS 13)
                set(_archs 60 70 75 80 86 89 90)
            else()
                set(_archs 75 80 86 89 90)
            endif()
            if(NOT _dljob_user_archs)
                set(CMAKE_CUDA_ARCHITECTURES ${_archs} CACHE STRING "GPU architectures" FORCE)
            endif()
            set(DLJOB_CUDA_ARCHITECTURES_SET ON CACHE INTERNAL "")
        endif()
        # CMake 3.25 knows no C++20 flag for nvcc; .cu files use C++17 (engine headers must allow it).
        set(CMAKE_CUDA_STANDARD 17)
        set(CMAKE_CUDA_STANDARD_REQUIRED ON)
        add_library(dljob::cudnn INTERFACE IMPORTED)
        target_include_directories(dljob::cudnn INTERFACE ${CUDNN_INCLUDE_DIR})
        target_link_libraries(dljob::cudnn INTERFACE ${CUDNN_LIBRARY})
        set(DLJOB_CUDA_ENABLED ON)
        message(STATUS "CUDA backend: nvcc ${CMAKE_CUDA_COMPILER_VERSION}, cuDNN "
                       "${DLJOB_CUDNN_VERSION} (${CUDNN_LIBRARY}), architectures "
                       "${CMAKE_CUDA_ARCHITECTURES}")
    elseif(_dljob_cuda STREQUAL "ON")
        message(FATAL_ERROR "DLJOB_CUDA=ON but ${_dljob_cuda_missing} was not found. "
                            "Load the site's cuda/cudnn modules, set CUDACXX or CUDNN paths, "
                            "or configure with -DDLJOB_CUDA=OFF.")
    else()
        message(STATUS "CUDA backend off: ${_dljob_cuda_missing} not found")
    endif()
endif()
