# `cmake --install build --prefix P` lays dljob out the way a cluster's software stack (or a user's
# ~/.local) expects: P/bin/{dljob,dltrain} side by side, dltrain's CUDA plugin in P/lib/dljob,
# and the read-only data dljob looks for relative to its own binary in P/share/dljob (site_catalog.cpp, render_service.cpp). A module
# file or a Spack package only has to add P/bin to PATH.
include(GNUInstallDirs)

install(TARGETS dljob dltrain RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# Literally lib/dljob, not CMAKE_INSTALL_LIBDIR (lib/x86_64-linux-gnu under /usr): dltrain looks
# for its CUDA plugin at ../lib/dljob from its own folder (engine/src/backends/cuda_loader.hpp).
if(TARGET dltrain_cuda)
    install(TARGETS dltrain_cuda LIBRARY DESTINATION lib/dljob)
endif()
# The MPI plugins go beside it: dltrain also looks in ../lib/dljob (engine/src/parallel/communicator.cpp).
if(DL_ENGINE_MPI_PLUGINS)
    install(TARGETS ${DL_ENGINE_MPI_PLUGINS} LIBRARY DESTINATION lib/dljob)
endif()
if(DL_ENGINE_GLOO_PLUGIN)
    install(TARGETS ${DL_ENGINE_GLOO_PLUGIN} LIBRARY DESTINATION lib/dljob)
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/site-profiles ${PROJECT_SOURCE_DIR}/templates
                  ${PROJECT_SOURCE_DIR}/recipes
        DESTINATION ${CMAKE_INSTALL_DATADIR}/dljob)
# The Spark family's driver, which spark-submit runs (src/dljob/schedulers/spark.cpp).
install(PROGRAMS ${PROJECT_SOURCE_DIR}/src/dljob/schedulers/spark_driver.py
        DESTINATION ${CMAKE_INSTALL_DATADIR}/dljob/spark RENAME dljob_spark_driver.py)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR})
