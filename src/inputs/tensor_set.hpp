// Tensor sets (the `file` family's inputs, docs/inputs.md): keys [N, C, d],
// g [N, C] and beta [N, C] in a directory of .npy files, one .npz or one
// .safetensors file (the containers are in src/io/).
//
// Every error is a UsageError of one line naming the file, the tensor and
// the culprit, e.g. "inputs dir/g.npy: entry [3, 7] = 0.25 is not < 0".
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "inputs/sample.hpp"
#include "io/tensor.hpp"

namespace chunkinv {

struct TensorSet {
  std::string source;  // the path as given
  uint64_t count = 0;  // N
  int chunk = 0;       // C
  int dim = 0;         // d
  DType keys_dtype = DType::kBF16;  // as found in the file (before rounding)
  std::vector<double> keys, g, beta;  // [N, C, d] (BF16 values), [N, C], [N, C]

  Sample sample(uint64_t index) const;  // throws UsageError if index >= count
};

// `path` is a directory holding keys.npy, g.npy and beta.npy, or one .npz or
// .safetensors file with tensors named keys, g and beta. Checks names,
// shapes (C in 2..64, d >= 1, N >= 1), dtypes, finiteness, g < 0 and beta
// in (0, 1). Keys not stored as BF16 are rounded to BF16 (nearest even).
TensorSet load_tensor_set(const std::string& path);

// The same from the bytes of one .npz or .safetensors file, the container
// chosen by the ending of `name` (which also names it in error messages).
TensorSet parse_tensor_set(std::string_view bytes, const std::string& name);

// Writes samples (all of one chunk and dim) as a tensor set: a directory
// (created if needed) unless `path` ends in .npz or .safetensors. Keys are
// written as `keys_dtype`, g and beta as `value_dtype`.
void write_tensor_set(const std::string& path, std::span<const Sample> samples,
                      DType keys_dtype = DType::kBF16, DType value_dtype = DType::kF64);

}  // namespace chunkinv
