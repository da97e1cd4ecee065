// libFuzzer target: the tensor-set loader (container, then names, shapes,
// dtypes and values of keys, g and beta). Bytes starting "PK" are read as
// an .npz, all others as a .safetensors file.
#include "fuzz_common.hpp"
#include "inputs/tensor_set.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view b = chunkinv::fuzz::bytes_of(data, size);
  return chunkinv::fuzz::run([&] {
    const chunkinv::TensorSet s = chunkinv::parse_tensor_set(b, b.starts_with("PK") ? "fuzz.npz" : "fuzz.safetensors");
    if (s.count > 0) s.sample(s.count - 1);  // the last sample lies within the loaded values
  });
}
