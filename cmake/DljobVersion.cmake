# The git revision is read at build time, not configure time, so `dljob --version` names the
# commit that was actually built. The header is rewritten only when the revision changes.
# The build type and optimisation flags go into --version and dltrain's start line, so a slow
# figure can be traced to the build that produced it.
# A build from a copy of the tree without .git (the release's build root) names the revision
# through DLJOB_GIT_REVISION instead.
set(DLJOB_GIT_REVISION "" CACHE STRING "The revision --version names when the tree has no .git")
string(TOUPPER "${CMAKE_BUILD_TYPE}" _dljob_build_type_upper)
string(STRIP "${CMAKE_CXX_FLAGS} ${CMAKE_CXX_FLAGS_${_dljob_build_type_upper}}" DLJOB_EFFECTIVE_CXX_FLAGS)
# Prefix maps name the build's own folders (the release maps them away) and say nothing of speed.
string(REGEX REPLACE "-f(file|debug|macro)-prefix-map=[^ ]*" "" DLJOB_EFFECTIVE_CXX_FLAGS
       "${DLJOB_EFFECTIVE_CXX_FLAGS}")
string(REGEX REPLACE "  +" " " DLJOB_EFFECTIVE_CXX_FLAGS "${DLJOB_EFFECTIVE_CXX_FLAGS}")
string(STRIP "${DLJOB_EFFECTIVE_CXX_FLAGS}" DLJOB_EFFECTIVE_CXX_FLAGS)
set(DLJOB_VERSION_HEADER "${CMAKE_BINARY_DIR}/generated/dljob_build_info.hpp")
add_custom_target(dljob_build_info
    COMMAND ${CMAKE_COMMAND}
        -DSOURCE_DIR=${CMAKE_SOURCE_DIR}
        -DOUTPUT=${DLJOB_VERSION_HEADER}
        -DVERSION=${PROJECT_VERSION}
        -DREVISION_OVERRIDE=${DLJOB_GIT_REVISION}
        -DBUILD_TYPE=${CMAKE_BUILD_TYPE}
        "-DCXX_FLAGS=${DLJOB_EFFECTIVE_CXX_FLAGS}"
        -P ${CMAKE_SOURCE_DIR}/cmake/write_build_info.cmake
    BYPRODUCTS ${DLJOB_VERSION_HEADER}
    COMMENT "Reading the git revision"
    VERBATIM)
add_library(dljob_build_info_headers INTERFACE)
target_include_directories(dljob_build_info_headers INTERFACE "${CMAKE_BINARY_DIR}/generated")
add_dependencies(dljob_build_info_headers dljob_build_info)
