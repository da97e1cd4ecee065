// What every fuzz target shares: a UsageError is the readers' only allowed
// answer to bad bytes; any other exception escapes and libFuzzer reports it
// as a crash, as it does a sanitizer report, an abort or a timeout.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/error.hpp"

// A lower limit than the default 4 GiB keeps every input within libFuzzer's
// memory limit (2 GiB); the code path is the same.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ::setenv("CHUNKINV_MAX_TENSOR_BYTES", "256M", 0);
  return 0;
}

namespace chunkinv::fuzz {

inline std::string_view bytes_of(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

template <typename Read>
int run(Read read) {
  try {
    read();
  } catch (const UsageError&) {
  }
  return 0;
}

}  // namespace chunkinv::fuzz
