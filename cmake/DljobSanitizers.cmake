# -DDLJOB_SANITIZE=address,undefined (or thread) instruments every target, tests included.
if(DLJOB_SANITIZE)
    if(NOT DLJOB_SANITIZE MATCHES "^(address|undefined|thread|address,undefined|undefined,address)$")
        message(FATAL_ERROR "DLJOB_SANITIZE='${DLJOB_SANITIZE}': expected address, undefined, "
                            "address,undefined or thread")
    endif()
    add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${DLJOB_SANITIZE}>
                        $<$<COMPILE_LANGUAGE:CXX>:-fno-omit-frame-pointer>)
    add_link_options(-fsanitize=${DLJOB_SANITIZE})
endif()

# -DDLJOB_FUZZ=ON (Clang only): every target gets libFuzzer's coverage hooks and
# tests/fuzz builds the fuzz targets (tests/fuzz/run.sh sets this up with the sanitizers).
option(DLJOB_FUZZ "Build the libFuzzer targets of tests/fuzz (Clang)" OFF)
if(DLJOB_FUZZ)
    if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
        message(FATAL_ERROR "DLJOB_FUZZ needs Clang (libFuzzer); CMAKE_CXX_COMPILER is "
                            "${CMAKE_CXX_COMPILER_ID}")
    endif()
    add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link>)
endif()
