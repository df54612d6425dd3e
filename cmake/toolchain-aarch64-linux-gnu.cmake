# Cross-building the CPU kernels for 64-bit ARM (Debian's gcc-aarch64-linux-gnu); the tests run
# under qemu-aarch64 (qemu-user). Use with -DSPITE_KERNELS_ONLY=ON: the layers above the kernels
# need libraries this toolchain has no ARM builds of.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
# Header-only packages (Catch2, nlohmann_json) come from the build machine.
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
# The ARMv8.2 dot-product instructions (SDOT) the NEON kernels use.
set(CMAKE_C_FLAGS_INIT "-march=armv8.2-a+dotprod")
set(CMAKE_CXX_FLAGS_INIT "-march=armv8.2-a+dotprod")
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/aarch64-linux-gnu)
