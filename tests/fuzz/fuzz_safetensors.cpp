// libFuzzer target: .safetensors parsing (header length, JSON header,
// offsets, data).
#include "fuzz_common.hpp"
#include "io/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return chunkinv::fuzz::run([&] { chunkinv::parse_safetensors(chunkinv::fuzz::bytes_of(data, size), "fuzz.safetensors"); });
}
