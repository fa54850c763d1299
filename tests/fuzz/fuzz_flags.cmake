# Included by the top-level CMakeLists.txt when RGPU_FUZZ is ON or AUTO, before any target: decides
# the fuzzing engine and instruments every library the fuzz targets link.
#   libfuzzer: clang's -fsanitize=fuzzer, with address and undefined-behaviour sanitizers;
#   driver:    tests/fuzz/driver.cc, our own seeded mutation loop calling the same targets (with the
#              sanitizers when the compiler has them).
include(CheckCXXSourceCompiles)
set(_fuzz_src "#include <cstddef>\n#include <cstdint>\nextern \"C\" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }\n")
set(CMAKE_REQUIRED_FLAGS "-fsanitize=fuzzer,address,undefined")
check_cxx_source_compiles("${_fuzz_src}" RGPU_HAVE_LIBFUZZER)
set(CMAKE_REQUIRED_FLAGS "-fsanitize=address,undefined")
check_cxx_source_compiles("int main() { return 0; }" RGPU_HAVE_SANITIZERS)
unset(CMAKE_REQUIRED_FLAGS)

set(RGPU_FUZZ_SANITIZE "")
if(RGPU_HAVE_LIBFUZZER)
  set(RGPU_FUZZ_ENGINE libfuzzer)
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined)
  set(RGPU_FUZZ_SANITIZE address,undefined)
elseif(RGPU_HAVE_SANITIZERS)
  set(RGPU_FUZZ_ENGINE driver)
  add_compile_options(-fsanitize=address,undefined)
  set(RGPU_FUZZ_SANITIZE address,undefined)
else()
  set(RGPU_FUZZ_ENGINE driver)
endif()
if(RGPU_FUZZ_SANITIZE)
  add_compile_options(-fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${RGPU_FUZZ_SANITIZE})
endif()
# Warnings stay on; other developers' code must not stop a fuzz build on a compiler's new warning.
set(RGPU_WARNINGS -Wall -Wextra)
message(STATUS "rgpu fuzzing: engine ${RGPU_FUZZ_ENGINE}, sanitizers '${RGPU_FUZZ_SANITIZE}'")
