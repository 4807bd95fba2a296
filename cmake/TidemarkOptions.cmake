# Warnings, sanitizers and feature detection shared by every target.
add_library(tidemark_warnings INTERFACE)
target_compile_options(tidemark_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-missing-field-initializers>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${TIDEMARK_WERROR}>>:-Werror>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Wno-missing-field-initializers>
  $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${TIDEMARK_WERROR}>>:-Werror=all-warnings>)

if(TIDEMARK_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()

# CUDA: AUTO means "when nvcc is found". The CUDA backend registers itself with tensorlib's
# device registry; the core never includes CUDA headers.
set(TIDEMARK_HAVE_CUDA OFF)
if(NOT TIDEMARK_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  find_program(TIDEMARK_NVCC nvcc HINTS /usr/local/cuda/bin)
  if(TIDEMARK_NVCC AND TIDEMARK_SANITIZE AND TIDEMARK_CUDA STREQUAL "AUTO")
    # Note [CUDA and sanitizers]: the sanitizer build is the build without CUDA (docs/cuda.md).
    message(STATUS "Tidemark: CUDA backend off in the sanitizer build (TIDEMARK_CUDA=ON forces it)")
  elseif(TIDEMARK_NVCC)
    set(TIDEMARK_HAVE_CUDA ON)
    # The op kernels (tensorlib/cuda/*.cu): SASS for compute capability 9.0 and PTX that the
    # driver compiles for newer GPUs.
    set(CMAKE_CUDA_COMPILER ${TIDEMARK_NVCC})
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90-real 90-virtual)
    endif()
    set(CMAKE_CUDA_HOST_COMPILER ${CMAKE_CXX_COMPILER})
    enable_language(CUDA)
    # CMake 3.25 does not know nvcc's C++20 flag (the CUDA sources inherit C++20 from the
    # targets they link); nvcc 12 and later accept -std=c++20.
    if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
  elseif(TIDEMARK_CUDA STREQUAL "ON")
    message(FATAL_ERROR "TIDEMARK_CUDA=ON but nvcc was not found")
  endif()
endif()

set(TIDEMARK_HAVE_GUI OFF)
if(NOT TIDEMARK_GUI STREQUAL "OFF")
  find_package(Qt6 QUIET COMPONENTS Widgets)
  if(Qt6_FOUND)
    set(TIDEMARK_HAVE_GUI ON)
  elseif(TIDEMARK_GUI STREQUAL "ON")
    message(FATAL_ERROR "TIDEMARK_GUI=ON but Qt 6 Widgets was not found")
  endif()
endif()
message(STATUS "Tidemark: CUDA toolchain ${TIDEMARK_HAVE_CUDA}, GUI ${TIDEMARK_HAVE_GUI}, sanitizers ${TIDEMARK_SANITIZE}")
