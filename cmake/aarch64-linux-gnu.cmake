# Cross-compiles hetbench-agent for arm64 (e.g. the Arm cores of an NVIDIA
# BlueField DPU) with Debian's cross toolchain (g++-aarch64-linux-gnu)
# against an arm64 sysroot of Debian packages (scripts/cross-build-arm64
# makes one). Host tools (protoc, grpc_cpp_plugin) come from the build
# machine; tests run under qemu-aarch64-static.
#
#   cmake -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DHETBENCH_SYSROOT=/path/to/sysroot ...
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

if(NOT HETBENCH_SYSROOT AND DEFINED ENV{HETBENCH_SYSROOT})
  set(HETBENCH_SYSROOT $ENV{HETBENCH_SYSROOT})
endif()
if(NOT HETBENCH_SYSROOT)
  message(FATAL_ERROR "set HETBENCH_SYSROOT to an arm64 sysroot (scripts/cross-build-arm64 makes one)")
endif()
# Try-compile projects need it too.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES HETBENCH_SYSROOT)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_SYSROOT ${HETBENCH_SYSROOT})
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

# Libraries found in the sysroot depend on others there (OpenBLAS lives in
# an alternatives directory the linker must be told about).
set(multiarch ${HETBENCH_SYSROOT}/usr/lib/aarch64-linux-gnu)
set(link_dirs "${multiarch}:${HETBENCH_SYSROOT}/usr/lib:${multiarch}/openblas-openmp")
set(CMAKE_EXE_LINKER_FLAGS_INIT "-Wl,-rpath-link,${link_dirs}")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "-Wl,-rpath-link,${link_dirs}")

set(CMAKE_FIND_ROOT_PATH ${HETBENCH_SYSROOT})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)  # protoc, grpc_cpp_plugin: the build machine's
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# Test discovery and `ctest` run arm64 binaries through user-mode QEMU.
set(CMAKE_CROSSCOMPILING_EMULATOR
    qemu-aarch64-static -L ${HETBENCH_SYSROOT}
    -E LD_LIBRARY_PATH=/usr/lib/aarch64-linux-gnu:/usr/lib:/usr/lib/aarch64-linux-gnu/openblas-openmp)
