# Cross build for arm64 (NVIDIA Grace, AWS Graviton) with Debian's toolchain: `make build-arm64`, or
# cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64-linux-gnu.cmake.
# `scripts/install-deps.sh arm64` installs what it uses: crossbuild-essential-arm64, the :arm64 -dev
# packages beside the amd64 ones (Debian's multiarch, /usr/lib/aarch64-linux-gnu), qemu-user-static,
# and yaml-cpp's static library unpacked under GPUD_ARM64_ROOT (its -dev package is not Multi-Arch).
# The programs the build runs (protoc, grpc_cpp_plugin, node, npm, git) are the host's; the tests run
# under qemu-aarch64-static (CMAKE_CROSSCOMPILING_EMULATOR), so `ctest` works on an amd64 machine.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(GPUD_CROSS_TRIPLET aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${GPUD_CROSS_TRIPLET}-gcc)
set(CMAKE_CXX_COMPILER ${GPUD_CROSS_TRIPLET}-g++)
set(CMAKE_STRIP ${GPUD_CROSS_TRIPLET}-strip CACHE FILEPATH "")

if(DEFINED ENV{GPUD_ARM64_ROOT})
  set(GPUD_ARM64_ROOT $ENV{GPUD_ARM64_ROOT})
else()
  set(GPUD_ARM64_ROOT /opt/gpud-cross/arm64)
endif()
# Libraries, headers and CMake packages come from the arm64 side only: Debian's multiarch directories
# (/usr/lib/aarch64-linux-gnu, searched under "/" because CMake takes the library architecture
# from the compiler), the cross toolchain's own root, and the unpacked packages.
set(CMAKE_FIND_ROOT_PATH / /usr/${GPUD_CROSS_TRIPLET} ${GPUD_ARM64_ROOT})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# pkgconf's cross wrapper reads only the arm64 .pc files; the unpacked yaml-cpp's is added in front.
find_program(PKG_CONFIG_EXECUTABLE NAMES ${GPUD_CROSS_TRIPLET}-pkg-config)
set(ENV{PKG_CONFIG_PATH} ${GPUD_ARM64_ROOT}/usr/lib/${GPUD_CROSS_TRIPLET}/pkgconfig)

# CTest (and gtest_discover_tests) run the arm64 programs through Debian's qemu-user-static; its
# arm64 loader and libraries are the multiarch ones (libc6:arm64), so no -L is needed.
find_program(GPUD_QEMU_AARCH64 qemu-aarch64-static)
if(GPUD_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${GPUD_QEMU_AARCH64})
endif()
