# `cmake --install`: the public headers, the libraries, the ferry binary with
# the DOCA programs' names beside it, a CMake package (find_package(ferry),
# targets ferry::core, ferry::worker, ...) and a pkg-config file.
include(CMakePackageConfigHelpers)

set(FERRY_EXPORTED
  ferry_core:core
  ferry_worker:worker
  ferry_offload:offload
  ferry_http:http
  ferry_xfer_types:xfer_types
  ferry_xfer_gpu:xfer_gpu
  ferry_xfer:xfer
  ferry_xfer_checksum:xfer_checksum
  ferry_xfer_store_base:xfer_store_base
  ferry_xfer_tier_dram:xfer_tier_dram
  ferry_xfer_tier_file:xfer_tier_file
  ferry_xfer_tier_redis:xfer_tier_redis
  ferry_xfer_store:xfer_store
  ferry_xfer_agent:xfer_agent
  ferry_route:route
  ferry_infer_text:infer_text
  ferry_infer_api:infer_api
  ferry_infer_model:infer_model
  ferry_infer:infer)
set(FERRY_EXPORTED_TARGETS "")
foreach(pair IN LISTS FERRY_EXPORTED)
  string(REPLACE ":" ";" parts "${pair}")
  list(GET parts 0 target)
  list(GET parts 1 name)
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name})
  list(APPEND FERRY_EXPORTED_TARGETS ${target})
endforeach()

install(TARGETS ${FERRY_EXPORTED_TARGETS} EXPORT ferryTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/ferry DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS ferry RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# Scripts written for the DOCA sample run unchanged: its programs' names are
# links to ferry, which takes the role from the name it was called by.
foreach(role server orchestrator client)
  install(CODE "file(CREATE_LINK ferry
    \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/doca_dpu_gpu_remote_offload_${role}\" SYMBOLIC)")
endforeach()

install(EXPORT ferryTargets NAMESPACE ferry:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ferry)
configure_package_config_file(cmake/ferryConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/ferryConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ferry)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/ferryConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/ferryConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/ferryConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ferry)

set(FERRY_PC_CFLAGS "")
set(FERRY_PC_LIBS "")
if(FERRY_HAVE_CUDA)
  set(FERRY_PC_CFLAGS " -DFERRY_HAVE_CUDA=1")
  set(FERRY_PC_LIBS " -lcudart_static -ldl -lrt")
endif()
configure_file(cmake/ferry.pc.in ${CMAKE_CURRENT_BINARY_DIR}/ferry.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/ferry.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
