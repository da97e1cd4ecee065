// libFuzzer target: .npy parsing (header literal, dtype, shape, data).
#include "fuzz_common.hpp"
#include "io/npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return chunkinv::fuzz::run([&] { chunkinv::parse_npy(chunkinv::fuzz::bytes_of(data, size), "fuzz.npy"); });
}
