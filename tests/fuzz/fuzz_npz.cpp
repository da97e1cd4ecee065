// libFuzzer target: .npz parsing (ZIP directory, ZIP64, inflate, CRC, and
// the .npy members).
#include "fuzz_common.hpp"
#include "io/zip.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return chunkinv::fuzz::run([&] { chunkinv::parse_npz(chunkinv::fuzz::bytes_of(data, size), "fuzz.npz"); });
}
