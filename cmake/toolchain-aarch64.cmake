# Cross-build for arm64 with Debian's cross toolchain (gcc-aarch64-linux-gnu,
# libc6-dev-arm64-cross) against a sysroot of arm64 library packages
# unpacked by scripts/cross-arm64.sh (PP_ARM64_SYSROOT, default
# /opt/polyprof-cross/arm64). Tests run under qemu-user.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

if(NOT PP_ARM64_SYSROOT)
  set(PP_ARM64_SYSROOT "$ENV{PP_ARM64_SYSROOT}")
endif()
if(NOT PP_ARM64_SYSROOT)
  set(PP_ARM64_SYSROOT /opt/polyprof-cross/arm64)
endif()
set(_triplet_lib ${PP_ARM64_SYSROOT}/usr/lib/aarch64-linux-gnu)

# The libraries' headers and .so files come from the unpacked packages; the
# C library from the cross toolchain's own sysroot.
set(CMAKE_C_FLAGS_INIT "-isystem ${PP_ARM64_SYSROOT}/usr/include -isystem ${PP_ARM64_SYSROOT}/usr/include/aarch64-linux-gnu")
set(CMAKE_EXE_LINKER_FLAGS_INIT "-L${_triplet_lib} -Wl,-rpath-link,${_triplet_lib} -Wl,-rpath-link,${PP_ARM64_SYSROOT}/lib/aarch64-linux-gnu")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "${CMAKE_EXE_LINKER_FLAGS_INIT}")
set(CMAKE_MODULE_LINKER_FLAGS_INIT "${CMAKE_EXE_LINKER_FLAGS_INIT}")
set(CMAKE_FIND_ROOT_PATH ${PP_ARM64_SYSROOT} /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)

set(ENV{PKG_CONFIG_LIBDIR} "${_triplet_lib}/pkgconfig:${PP_ARM64_SYSROOT}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${PP_ARM64_SYSROOT}")

# ctest runs the test executables through qemu; the libraries' directory is
# searched after the toolchain's C library
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64-static;-L;/usr/aarch64-linux-gnu;-E;LD_LIBRARY_PATH=${_triplet_lib}:${PP_ARM64_SYSROOT}/lib/aarch64-linux-gnu)
