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
  // Likewise, a grid of at most 2000 configurations keeps every input of
  // the config and axis targets fast; the count is checked the same way.
  ::setenv("CHUNKINV_MAX_CONFIGURATIONS", "2000", 0);
  return 0;
}

namespace chunkinv::fuzz {

inline std::string_view bytes_of(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// True when a grid of `spec` names the `file` family, which reads the
// tensor file its `inputs` axis names: the config and axis targets do not
// expand those (fuzz_tensor_set covers the reading).
template <typename Spec>
bool reads_files(const Spec& spec) {
  for (const auto& g : spec.grids) {
    const auto f = g.find("family");
    if (f == g.end()) continue;
    if (f->is_string() && *f == "file") return true;
    if (f->is_array())
      for (const auto& x : *f)
        if (x.is_string() && x == "file") return true;
  }
  return false;
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
