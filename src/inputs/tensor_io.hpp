// Tensor files: NumPy .npy / .npz and .safetensors, read and written
// without Python. A tensor set (the `file` family's inputs, docs/inputs.md)
// is keys [N, C, d], g [N, C] and beta [N, C] in one of those containers.
//
// Every error is a UsageError of one line naming the file, the tensor and
// the culprit, e.g. "inputs dir/g.npy: entry [3, 7] = 0.25 is not < 0".
#pragma once
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "inputs/sample.hpp"

namespace chunkinv {

// Element types. kU16/kI16 are plain integers to the reader; a tensor set
// takes them as BF16 bit patterns for its keys (how BF16 is commonly stored
// in .npy, which has no BF16 type).
enum class DType { kBF16, kF16, kF32, kF64, kU16, kI16, kI32, kI64, kU8 };

const char* dtype_name(DType t);  // "bf16", "f16", "f32", "f64", "u16", ...
int dtype_size(DType t);
bool dtype_is_float(DType t);

struct Tensor {
  DType dtype = DType::kF64;
  std::vector<int64_t> shape;
  // Every element's exact value in C order (all supported types are exact
  // in double, integers up to 2^53). Integers: the integer value.
  std::vector<double> values;

  uint64_t numel() const;
};

using TensorMap = std::map<std::string, Tensor>;

// "[3, 7]": the multi-index of flat element `flat` of `shape`.
std::string index_string(const std::vector<int64_t>& shape, uint64_t flat);

// --- readers (`what` names the source in error messages) ------------------
Tensor parse_npy(std::string_view bytes, const std::string& what);
Tensor read_npy(const std::string& path);
// Members "<name>.npy" become tensors "<name>". Stored members always;
// deflated members when built with zlib (CHUNKINV_HAVE_ZLIB).
TensorMap read_npz(const std::string& path);
TensorMap read_safetensors(const std::string& path);

// --- writers ---------------------------------------------------------------
// Values are rounded to the dtype (round to nearest even) before encoding;
// BF16 goes into .npy as '<u2' bit patterns.
std::string npy_bytes(const Tensor& t);
void write_npy(const std::string& path, const Tensor& t);
void write_npz(const std::string& path, const TensorMap& tensors);  // stored (no compression)
void write_safetensors(const std::string& path, const TensorMap& tensors);

bool zlib_available();

// --- tensor sets -------------------------------------------------------------
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

// Writes samples (all of one chunk and dim) as a tensor set: a directory
// (created if needed) unless `path` ends in .npz or .safetensors. Keys are
// written as `keys_dtype`, g and beta as `value_dtype`.
void write_tensor_set(const std::string& path, std::span<const Sample> samples,
                      DType keys_dtype = DType::kBF16, DType value_dtype = DType::kF64);

}  // namespace chunkinv
