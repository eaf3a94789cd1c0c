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
