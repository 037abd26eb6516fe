# libgpud-cri.so: the CRI (runtime.v1) and kubelet pod-resources (v1) gRPC clients, compiled from
# our own .proto subsets with Debian's protoc and grpc_cpp_plugin. gpud never links it: runtimes/cri
# dlopen()s it (runtimes/module_loader) the first time a socket exists, so gRPC, protobuf and
# abseil are mapped only on hosts that run containerd or a kubelet. It exports one symbol,
# gpud_cri_client_v1 (the C table of src/runtimes/cri.h).
pkg_check_modules(GPUD_GRPC REQUIRED IMPORTED_TARGET grpc++ protobuf)
find_program(GPUD_PROTOC protoc REQUIRED)
find_program(GPUD_GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)

set(GPUD_CRI_DIR ${CMAKE_SOURCE_DIR}/src/runtimes/cri_module)
set(GPUD_CRI_GEN ${CMAKE_BINARY_DIR}/generated/cri_module)
file(MAKE_DIRECTORY ${GPUD_CRI_GEN})
set(GPUD_CRI_GEN_SOURCES)
foreach(proto cri podresources)
  set(out ${GPUD_CRI_GEN}/${proto}.pb.cc ${GPUD_CRI_GEN}/${proto}.pb.h
          ${GPUD_CRI_GEN}/${proto}.grpc.pb.cc ${GPUD_CRI_GEN}/${proto}.grpc.pb.h)
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${GPUD_PROTOC} -I ${GPUD_CRI_DIR} --cpp_out=${GPUD_CRI_GEN} --grpc_out=${GPUD_CRI_GEN}
            --plugin=protoc-gen-grpc=${GPUD_GRPC_CPP_PLUGIN} ${GPUD_CRI_DIR}/${proto}.proto
    DEPENDS ${GPUD_CRI_DIR}/${proto}.proto
    COMMENT "protoc: ${proto}.proto (C++ and gRPC)"
    VERBATIM)
  list(APPEND GPUD_CRI_GEN_SOURCES ${out})
endforeach()

# The generated code and the gRPC stubs, shared by the module and its tests' fake servers.
add_library(gpud_cri_proto STATIC ${GPUD_CRI_GEN_SOURCES})
set_target_properties(gpud_cri_proto PROPERTIES POSITION_INDEPENDENT_CODE ON
  CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
target_include_directories(gpud_cri_proto PUBLIC ${GPUD_CRI_GEN})
target_link_libraries(gpud_cri_proto PUBLIC PkgConfig::GPUD_GRPC)
# Generated code is not ours to warn about.
target_compile_options(gpud_cri_proto PRIVATE -w)

add_library(gpud_cri_module SHARED ${GPUD_CRI_DIR}/cri_client.cpp)
set_target_properties(gpud_cri_module PROPERTIES OUTPUT_NAME gpud-cri
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}
  CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
target_include_directories(gpud_cri_module PRIVATE ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(gpud_cri_module PRIVATE gpud_cri_proto nlohmann_json::nlohmann_json)
target_link_options(gpud_cri_module PRIVATE -Wl,--as-needed
  "-Wl,--version-script=${GPUD_CRI_DIR}/exports.map")
if(NOT GPUD_SANITIZED)
  # (A sanitized shared library leaves the sanitizer runtime's symbols to the executable.)
  target_link_options(gpud_cri_module PRIVATE -Wl,--no-undefined)
endif()
set_target_properties(gpud_cri_module PROPERTIES LINK_DEPENDS ${GPUD_CRI_DIR}/exports.map)
if(NOT GPUD_SANITIZED)
  target_compile_options(gpud_cri_module PRIVATE -Os)
endif()
# The daemon finds the module beside it: building gpud builds it.
add_dependencies(gpud gpud_cri_module)
install(TARGETS gpud_cri_module LIBRARY DESTINATION lib/gpud)

include(GoogleTest)
# Its tests (and the containerd component's tests against a real containerd): a binary of their
# own, since they link gRPC for their fake servers. The module is found beside the binary.
file(GLOB GPUD_CRI_TESTS CONFIGURE_DEPENDS ${GPUD_CRI_DIR}/*_test.cpp)
add_executable(gpud_cri_tests ${GPUD_CRI_TESTS})
set_target_properties(gpud_cri_tests PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
target_include_directories(gpud_cri_tests PRIVATE ${CMAKE_SOURCE_DIR})
target_compile_definitions(gpud_cri_tests PRIVATE GPUD_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
# Not the generated code: a process that loads the module cannot hold a second copy (protobuf's
# descriptor pool refuses a .proto registered twice), so the fake servers are a program of their own.
target_link_libraries(gpud_cri_tests PRIVATE gpud_lib GTest::gtest GTest::gtest_main)
add_executable(gpud_cri_fake_server ${GPUD_CRI_DIR}/fake_cri_server.cpp)
target_link_libraries(gpud_cri_fake_server PRIVATE gpud_cri_proto)
# GPUD_BINARY: `gpud cri-helper`, the daemon's way to make its CRI calls.
target_compile_definitions(gpud_cri_tests PRIVATE
  GPUD_CRI_FAKE_SERVER="$<TARGET_FILE:gpud_cri_fake_server>" GPUD_BINARY="$<TARGET_FILE:gpud>")
add_dependencies(gpud_cri_tests gpud gpud_cri_module gpud_cri_fake_server)
# The tests that start a real containerd are labelled external (the sanitizer pass leaves them out).
set(GPUD_CRI_EXTERNAL_TESTS "ContainerdDaemon*")
gtest_discover_tests(gpud_cri_tests DISCOVERY_TIMEOUT 60 TEST_FILTER "-${GPUD_CRI_EXTERNAL_TESTS}"
  PROPERTIES ENVIRONMENT "GPUD_MODULE_DIR=${CMAKE_BINARY_DIR}"
  TIMEOUT 60)
gtest_discover_tests(gpud_cri_tests DISCOVERY_TIMEOUT 60 TEST_FILTER "${GPUD_CRI_EXTERNAL_TESTS}"
  PROPERTIES ENVIRONMENT "GPUD_MODULE_DIR=${CMAKE_BINARY_DIR}"
  TIMEOUT 120 LABELS external)
