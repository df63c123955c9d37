# `cmake --install`: the public headers, the libraries, the ferry binary with
# the DOCA programs' names beside it, a CMake package (find_package(ferry),
# targets ferry::core, ferry::worker, ..., in components) and a pkg-config file.
include(CMakePackageConfigHelpers)

# The package's components, each an export set of its own
# (lib/cmake/ferry/ferry-<component>-targets.cmake), so that
# find_package(ferry COMPONENTS xfer) loads xfer and what it needs and looks for
# no other component's dependencies. One line a component, in dependency order
# (a component needs only components above it):
#   ferry_component(NAME  TARGETS target:exported_name...  NEEDS components...  PACKAGES packages...)
# NEEDS: the components whose targets its targets link; PACKAGES: what
# ferryConfig.cmake must find for its targets' link interface (a static
# library's private dependencies included: they appear there as LINK_ONLY).
# ferry_check_components() below proves both lists against the targets.
set(FERRY_COMPONENTS "")
function(ferry_component name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "TARGETS;NEEDS;PACKAGES")
  foreach(need IN LISTS arg_NEEDS)
    if(NOT need IN_LIST FERRY_COMPONENTS)
      message(FATAL_ERROR "ferry component ${name} needs ${need}, which is not declared above it")
    endif()
  endforeach()
  set(targets "")
  foreach(pair IN LISTS arg_TARGETS)
    string(REPLACE ":" ";" parts "${pair}")
    list(GET parts 0 target)
    list(GET parts 1 exported)
    set_target_properties(${target} PROPERTIES EXPORT_NAME ${exported})
    set_property(GLOBAL PROPERTY FERRY_COMPONENT_OF_${target} ${name})
    list(APPEND targets ${target})
  endforeach()
  # Every component this one reaches (its NEEDS, and theirs).
  set(reach ${arg_NEEDS})
  foreach(need IN LISTS arg_NEEDS)
    list(APPEND reach ${FERRY_COMPONENT_${need}_REACH})
  endforeach()
  list(REMOVE_DUPLICATES reach)
  set(FERRY_COMPONENT_${name}_TARGETS ${targets} PARENT_SCOPE)
  set(FERRY_COMPONENT_${name}_NEEDS ${arg_NEEDS} PARENT_SCOPE)
  set(FERRY_COMPONENT_${name}_REACH ${reach} PARENT_SCOPE)
  set(FERRY_COMPONENT_${name}_PACKAGES ${arg_PACKAGES} PARENT_SCOPE)
  set(FERRY_COMPONENTS ${FERRY_COMPONENTS} ${name} PARENT_SCOPE)
endfunction()

# CUDA builds: the targets that link the CUDA runtime or cuBLAS.
set(ferry_cuda_package "")
if(FERRY_HAVE_CUDA)
  set(ferry_cuda_package CUDAToolkit)
endif()
ferry_component(core TARGETS ferry_core:core PACKAGES Threads spdlog)
ferry_component(worker TARGETS ferry_worker:worker NEEDS core PACKAGES spdlog ${ferry_cuda_package})
ferry_component(offload TARGETS ferry_offload:offload NEEDS worker PACKAGES spdlog nlohmann_json)
ferry_component(infer
  TARGETS ferry_infer_text:infer_text ferry_infer_api:infer_api ferry_infer_model:infer_model ferry_infer:infer
  NEEDS core PACKAGES Threads spdlog nlohmann_json OpenSSL ${ferry_cuda_package})
ferry_component(http TARGETS ferry_http:http NEEDS offload infer PACKAGES spdlog)
ferry_component(xfer
  TARGETS ferry_xfer_types:xfer_types ferry_xfer_checksum:xfer_checksum ferry_xfer_gpu:xfer_gpu ferry_xfer:xfer
    ferry_xfer_store_base:xfer_store_base ferry_xfer_tier_dram:xfer_tier_dram ferry_xfer_tier_file:xfer_tier_file
    ferry_xfer_tier_redis:xfer_tier_redis ferry_xfer_store:xfer_store ferry_xfer_agent:xfer_agent
  NEEDS core PACKAGES spdlog nlohmann_json xxhash liburing OpenSSL ${ferry_cuda_package})
ferry_component(route TARGETS ferry_route:route NEEDS core PACKAGES Threads MPI spdlog)

# The package that provides an imported target a Ferry library links, as
# ferryConfig.cmake names it; empty for a plain library name (dl, m).
function(ferry_package_of item out)
  set(package "")
  if(item MATCHES "^(Threads|spdlog|nlohmann_json|MPI|OpenSSL)::")
    set(package ${CMAKE_MATCH_1})
  elseif(item MATCHES "^CUDA::")
    set(package CUDAToolkit)
  elseif(item STREQUAL "PkgConfig::XXHASH")
    set(package xxhash)
  elseif(item STREQUAL "PkgConfig::LIBURING")
    set(package liburing)
  elseif(item MATCHES "::")
    message(FATAL_ERROR "ferry's package does not know which package provides ${item}: "
      "add it to ferry_package_of (cmake/install.cmake) and to ferryConfig.cmake.in's _ferry_find_package")
  endif()
  set(${out} ${package} PARENT_SCOPE)
endfunction()

# Proves the table above against the targets: every library an exported target
# links (all of them: the libraries are static, so even private ones reach the
# consumer's link line) is in its own component, in one it NEEDS (or theirs),
# or provided by one of its PACKAGES.
function(ferry_check_components)
  foreach(component IN LISTS FERRY_COMPONENTS)
    foreach(target IN LISTS FERRY_COMPONENT_${component}_TARGETS)
      get_target_property(links ${target} LINK_LIBRARIES)
      get_target_property(interface ${target} INTERFACE_LINK_LIBRARIES)
      foreach(item IN LISTS links interface)
        string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" item "${item}")
        if(item STREQUAL "" OR item MATCHES "-NOTFOUND$")
          continue()
        endif()
        if(TARGET ${item} AND item MATCHES "^ferry_")
          get_property(owner GLOBAL PROPERTY FERRY_COMPONENT_OF_${item})
          if(NOT owner)
            message(FATAL_ERROR "${target} (component ${component}) links ${item}, which is in no component")
          endif()
          if(NOT owner STREQUAL component AND NOT owner IN_LIST FERRY_COMPONENT_${component}_REACH)
            message(FATAL_ERROR "${target} links ${item} of component ${owner}: add ${owner} to ${component}'s NEEDS")
          endif()
          continue()
        endif()
        ferry_package_of("${item}" package)
        if(package AND NOT package IN_LIST FERRY_COMPONENT_${component}_PACKAGES)
          message(FATAL_ERROR "${target} links ${item}: add ${package} to component ${component}'s PACKAGES")
        endif()
      endforeach()
    endforeach()
  endforeach()
endfunction()
ferry_check_components()

# ferryConfig.cmake's copy of the table.
set(FERRY_COMPONENT_TABLE "set(_ferry_components ${FERRY_COMPONENTS})")
foreach(component IN LISTS FERRY_COMPONENTS)
  string(APPEND FERRY_COMPONENT_TABLE "\nset(_ferry_${component}_needs ${FERRY_COMPONENT_${component}_NEEDS})"
    "\nset(_ferry_${component}_packages ${FERRY_COMPONENT_${component}_PACKAGES})")
  install(TARGETS ${FERRY_COMPONENT_${component}_TARGETS} EXPORT ferry-${component}-targets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(EXPORT ferry-${component}-targets NAMESPACE ferry:: FILE ferry-${component}-targets.cmake
    DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ferry)
endforeach()
install(DIRECTORY include/ferry DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS ferry RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# Scripts written for the DOCA sample run unchanged: its programs' names are
# links to ferry, which takes the role from the name it was called by.
foreach(role server orchestrator client)
  install(CODE "file(CREATE_LINK ferry
    \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/doca_dpu_gpu_remote_offload_${role}\" SYMBOLIC)")
endforeach()

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
