# DPDK from Debian (libdpdk-dev 22.11), for ferry l2fwd (src/packet/).
#
# Linked statically: the GPU machine has no DPDK packages, and Debian ships the
# .a files. Only the libraries the packet path uses are linked, whole (their
# drivers register themselves from constructors, which a plain static link
# would drop): the EAL, mbufs and mempools, ethdev, and the PMDs Ferry's tests
# and benchmarks drive (pcap, af_packet, null, ring, memif). libpcap stays a
# shared library (its static form pulls in dbus and systemd); the GPU machine's
# Ubuntu has it.
#
# Defines FERRY_HAVE_DPDK and the interface target ferry_dpdk.
set(FERRY_HAVE_DPDK OFF)
if(NOT FERRY_ENABLE_DPDK)
  return()
endif()
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(DPDK QUIET libdpdk)
endif()
if(NOT DPDK_FOUND)
  message(STATUS "ferry: DPDK not found (libdpdk-dev): ferry l2fwd is not built")
  return()
endif()
pkg_get_variable(DPDK_LIBDIR libdpdk libdir)

set(_ferry_dpdk_components
  eal kvargs telemetry ring mempool mempool_ring mbuf net meter ethdev pci bus_pci bus_vdev hash rcu
  net_pcap net_af_packet net_null net_ring net_memif)
set(_ferry_dpdk_archives)
foreach(c ${_ferry_dpdk_components})
  set(a "${DPDK_LIBDIR}/librte_${c}.a")
  if(NOT EXISTS "${a}")
    message(STATUS "ferry: ${a} is missing: ferry l2fwd is not built")
    return()
  endif()
  list(APPEND _ferry_dpdk_archives "${a}")
endforeach()
set(_ferry_dpdk_system)
foreach(lib numa bsd md)
  find_library(_ferry_${lib}_a NAMES lib${lib}.a)
  if(NOT _ferry_${lib}_a)
    message(STATUS "ferry: lib${lib}.a is missing: ferry l2fwd is not built")
    return()
  endif()
  list(APPEND _ferry_dpdk_system "${_ferry_${lib}_a}")
endforeach()
find_library(_ferry_pcap NAMES pcap)
if(NOT _ferry_pcap)
  message(STATUS "ferry: libpcap is missing: ferry l2fwd is not built")
  return()
endif()

add_library(ferry_dpdk INTERFACE)
target_include_directories(ferry_dpdk SYSTEM INTERFACE ${DPDK_INCLUDE_DIRS})
# DPDK's own flags (-include rte_config.h, -march=corei7: what Debian built it
# for), and its experimental API: external-buffer mbuf pools and DMA mapping.
target_compile_options(ferry_dpdk INTERFACE ${DPDK_CFLAGS_OTHER})
target_compile_definitions(ferry_dpdk INTERFACE ALLOW_EXPERIMENTAL_API)
target_link_libraries(ferry_dpdk INTERFACE
  "$<LINK_LIBRARY:WHOLE_ARCHIVE,${_ferry_dpdk_archives}>"
  ${_ferry_dpdk_system} ${_ferry_pcap} ${CMAKE_DL_LIBS} Threads::Threads m)
set(FERRY_HAVE_DPDK ON)
