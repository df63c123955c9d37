# The route's benchmark applications: MPI programs that tests/route runs in CI
# (every app in every mode) and route_bench.py times. Included from
# tests/route and bench/route, whichever comes first, because the sanitizer
# builds configure tests without benchmarks and still must run the apps.
if(TARGET route_common)
  return()
endif()

add_library(route_common STATIC ${CMAKE_CURRENT_LIST_DIR}/common.cpp)
target_link_libraries(route_common PUBLIC ferry_route CLI11::CLI11 PRIVATE nlohmann_json::nlohmann_json)

set(FERRY_ROUTE_APPS histogram index_gather transpose qs_mini randperm)
foreach(app ${FERRY_ROUTE_APPS})
  add_executable(route_${app} ${CMAKE_CURRENT_LIST_DIR}/${app}.cpp)
  target_link_libraries(route_${app} PRIVATE route_common ferry_route_sanitizer_support)
  # One place for every app, whichever directory defined it: build/bench/route.
  set_target_properties(route_${app} PROPERTIES OUTPUT_NAME ${app}
    RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench/route)
endforeach()
