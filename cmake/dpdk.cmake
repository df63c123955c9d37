# DPDK from Debian (libdpdk-dev 22.11), for ferry l2fwd (src/packet/).
#
# FERRY_DPDK_LINK picks how (docs/packet.md, "Building and linking"):
#   shared  the way Debian ships it: ferry links librte_*.so, and the EAL loads
#           every driver in Debian's PMD directory (pmds-23.0) at start, so every
#           NIC family Debian builds (mlx5, ice, i40e, ixgbe, virtio, vmxnet3,
#           af_xdp, tap, ...) can open a port. The default where the .so files are.
#   static  only the libraries the packet path uses, linked whole (their drivers
#           register themselves from constructors, which a plain static link would
#           drop): the EAL, mbufs and mempools, ethdev, and the virtual PMDs
#           Ferry's tests and benchmarks drive (pcap, af_packet, null, ring,
#           memif). For the GPU machine's carried binary, which has no DPDK
#           packages (scripts/device/carry-build.sh). A static EAL loads no
#           plugins: a PMD .so would bring a second EAL with it. libpcap stays a
#           shared library (its static form pulls in dbus and systemd); the GPU
#           machine's Ubuntu has it.
#
# Defines FERRY_HAVE_DPDK, FERRY_DPDK_LINK_CHOSEN (shared or static) and the
# interface target ferry_dpdk, which carries FERRY_DPDK_SHARED=0|1 and
# FERRY_DPDK_PMD_DIR for the messages that say where drivers come from.
set(FERRY_HAVE_DPDK OFF)
set(FERRY_DPDK_LINK "" CACHE STRING "How ferry l2fwd links DPDK: shared (every PMD Debian ships), static (virtual PMDs only), or empty: shared where the .so files are")
set_property(CACHE FERRY_DPDK_LINK PROPERTY STRINGS "" shared static)
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

# Debian's librte_eal has this directory built in (RTE_EAL_PMD_PATH) and loads
# every driver in it when the EAL is a shared library.
file(GLOB _ferry_dpdk_pmd_dirs LIST_DIRECTORIES true "${DPDK_LIBDIR}/dpdk/pmds-*")
set(_ferry_dpdk_pmd_dir "")
if(_ferry_dpdk_pmd_dirs)
  list(GET _ferry_dpdk_pmd_dirs 0 _ferry_dpdk_pmd_dir)
endif()

set(_ferry_dpdk_link "${FERRY_DPDK_LINK}")
if(_ferry_dpdk_link STREQUAL "")
  if(EXISTS "${DPDK_LIBDIR}/librte_eal.so" AND _ferry_dpdk_pmd_dir)
    set(_ferry_dpdk_link shared)
  else()
    set(_ferry_dpdk_link static)
  endif()
elseif(NOT _ferry_dpdk_link MATCHES "^(shared|static)$")
  message(FATAL_ERROR "FERRY_DPDK_LINK=${FERRY_DPDK_LINK}: give shared, static, or leave it empty")
endif()

add_library(ferry_dpdk INTERFACE)
target_include_directories(ferry_dpdk SYSTEM INTERFACE ${DPDK_INCLUDE_DIRS})
# DPDK's own flags (-include rte_config.h, -march=corei7: what Debian built it
# for), and its experimental API: external-buffer mbuf pools and DMA mapping.
target_compile_options(ferry_dpdk INTERFACE ${DPDK_CFLAGS_OTHER})
target_compile_definitions(ferry_dpdk INTERFACE ALLOW_EXPERIMENTAL_API "FERRY_DPDK_PMD_DIR=\"${_ferry_dpdk_pmd_dir}\"")

if(_ferry_dpdk_link STREQUAL "shared")
  # The libraries the packet path calls; the PMDs come from the PMD directory
  # at run time, each with the libraries it needs.
  set(_ferry_dpdk_libs)
  foreach(c eal mempool mbuf ethdev)
    set(so "${DPDK_LIBDIR}/librte_${c}.so")
    if(NOT EXISTS "${so}")
      message(FATAL_ERROR "ferry: FERRY_DPDK_LINK=shared, and ${so} is missing (libdpdk-dev)")
    endif()
    list(APPEND _ferry_dpdk_libs "${so}")
  endforeach()
  if(NOT _ferry_dpdk_pmd_dir)
    message(WARNING "ferry: no ${DPDK_LIBDIR}/dpdk/pmds-* directory: the shared EAL will find no drivers")
  endif()
  target_compile_definitions(ferry_dpdk INTERFACE FERRY_DPDK_SHARED=1)
  target_link_libraries(ferry_dpdk INTERFACE ${_ferry_dpdk_libs} Threads::Threads)
else()
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
  target_compile_definitions(ferry_dpdk INTERFACE FERRY_DPDK_SHARED=0)
  target_link_libraries(ferry_dpdk INTERFACE
    "$<LINK_LIBRARY:WHOLE_ARCHIVE,${_ferry_dpdk_archives}>"
    ${_ferry_dpdk_system} ${_ferry_pcap} ${CMAKE_DL_LIBS} Threads::Threads m)
endif()
message(STATUS "ferry: DPDK linked ${_ferry_dpdk_link}")
set(FERRY_DPDK_LINK_CHOSEN "${_ferry_dpdk_link}")
set(FERRY_HAVE_DPDK ON)
