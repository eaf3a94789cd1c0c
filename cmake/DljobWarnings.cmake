# One INTERFACE target carries the warning flags; every project target links it PRIVATE
# (ccache's standard_warnings), so third-party headers are not judged by our rules.
add_library(dljob_warnings INTERFACE)
target_compile_options(dljob_warnings INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
        -Woverloaded-virtual -Wcast-align -Wimplicit-fallthrough>)
if(DLJOB_WARNINGS_AS_ERRORS)
    # Errors only where someone asked for them (CI): a newer compiler on a user's cluster
    # must not turn a new warning into a failed build.
    target_compile_options(dljob_warnings INTERFACE
        $<$<COMPILE_LANGUAGE:CXX>:-Werror>
        $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings>)
endif()
