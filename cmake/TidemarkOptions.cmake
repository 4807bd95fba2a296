# Warnings, sanitizers and feature detection shared by every target.
add_library(tidemark_warnings INTERFACE)
target_compile_options(tidemark_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-missing-field-initializers>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${TIDEMARK_WERROR}>>:-Werror>)

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
  if(TIDEMARK_NVCC)
    set(TIDEMARK_HAVE_CUDA ON)
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
