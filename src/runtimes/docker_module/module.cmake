# libgpud-docker.so: the docker Engine API client (libcurl over the daemon's unix socket), behind
# the C ABI of src/runtimes/docker.h. gpud dlopen()s it only when the docker socket exists, so
# libcurl and its dependencies are never mapped on a host without docker.
pkg_check_modules(CURL REQUIRED IMPORTED_TARGET libcurl)

add_library(gpud_docker_module SHARED ${CMAKE_CURRENT_LIST_DIR}/docker_client.cpp)
set_target_properties(gpud_docker_module PROPERTIES
  OUTPUT_NAME gpud-docker
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}
  CXX_VISIBILITY_PRESET hidden
  VISIBILITY_INLINES_HIDDEN ON)
target_include_directories(gpud_docker_module PRIVATE ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(gpud_docker_module PRIVATE PkgConfig::CURL)
# Only gpud_docker_client_v1 is exported: nothing of libstdc++ or of static archives leaks out
# (libstdc++'s headers give std template instances default visibility; clang's unoptimised builds
# keep them out of line, so the version script, not -fvisibility, decides).
target_link_options(gpud_docker_module PRIVATE -Wl,--exclude-libs,ALL
  "-Wl,--version-script=${CMAKE_CURRENT_LIST_DIR}/exports.map")
set_target_properties(gpud_docker_module PROPERTIES
  LINK_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/exports.map)
if(NOT GPUD_SANITIZED)
  # Every symbol resolved at link time (a sanitized module takes the sanitizers' runtime from the
  # executable that loads it, so there it cannot be).
  target_link_options(gpud_docker_module PRIVATE -Wl,--no-undefined)
  target_compile_options(gpud_docker_module PRIVATE -Os)
endif()
install(TARGETS gpud_docker_module LIBRARY DESTINATION lib/gpud COMPONENT gpud)

# Its tests are a binary of their own: the transport against a tiny fake HTTP server on a unix
# socket (garbled answers, timeouts, a daemon that hangs up), and, labelled external, the docker
# component against Debian's dockerd started on private paths (DockerDaemon.*; skipped, saying
# why, where dockerd cannot start). Both load the module as gpud does (it sits beside the binary).
include(GoogleTest)
file(GLOB GPUD_DOCKER_MODULE_TESTS CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/*_test.cpp)
add_executable(gpud_docker_module_tests ${GPUD_DOCKER_MODULE_TESTS})
target_link_libraries(gpud_docker_module_tests PRIVATE gpud_lib GTest::gtest GTest::gtest_main)
target_include_directories(gpud_docker_module_tests PRIVATE ${CMAKE_SOURCE_DIR})
# DockerDaemon.* also runs `gpud scan` against the real dockerd with the fake NVML.
target_compile_definitions(gpud_docker_module_tests PRIVATE GPUD_SOURCE_DIR="${CMAKE_SOURCE_DIR}"
  GPUD_DOCKER_MODULE="$<TARGET_FILE:gpud_docker_module>" GPUD_BINARY="$<TARGET_FILE:gpud>"
  GPUD_FAKE_NVML="$<TARGET_FILE:fake_nvml>")
add_dependencies(gpud_docker_module_tests gpud_docker_module gpud fake_nvml)
gtest_discover_tests(gpud_docker_module_tests DISCOVERY_TIMEOUT 60 TEST_FILTER "-DockerDaemon.*"
  PROPERTIES ENVIRONMENT "GPUD_SOURCE_DIR=${CMAKE_SOURCE_DIR}" TIMEOUT 60)
gtest_discover_tests(gpud_docker_module_tests DISCOVERY_TIMEOUT 60 TEST_FILTER "DockerDaemon.*"
  PROPERTIES ENVIRONMENT "GPUD_SOURCE_DIR=${CMAKE_SOURCE_DIR}" TIMEOUT 120 LABELS external)
