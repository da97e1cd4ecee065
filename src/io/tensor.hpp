// Tensors as read from and written to files, and what every container needs:
// element types, little-endian encoding, bounded whole-file reads.
//
// Formats only: nothing here knows samples or families. Every error is a
// UsageError of one line naming the file (or member) and the culprit.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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
// "(4, 4)"
std::string shape_string(const std::vector<int64_t>& shape);

// More dimensions than this is a corrupt header, not a tensor (NumPy allows 64).
inline constexpr size_t kMaxRank = 64;

// Bytes that `shape` of `t` needs; nullopt when that does not fit in 64 bits
// (a corrupt header must not wrap around into a small size).
std::optional<uint64_t> bytes_needed(const std::vector<int64_t>& shape, DType t);

// Checks a shape read from a file before anything is allocated for it: rank
// at most kMaxRank, no negative dimension, a byte count that fits in 64 bits.
// `what` names the source in the message.
void check_shape(const std::vector<int64_t>& shape, DType t, const std::string& what);

// --- limits ------------------------------------------------------------------
// The most bytes of tensor data one file may hold or inflate to: 4 GiB, or
// $CHUNKINV_MAX_TENSOR_BYTES (a byte count, optionally with K, M, G or T for
// powers of 1024). A malformed value is a UsageError.
uint64_t max_tensor_bytes();
// "exceeds the 4 GiB limit on <of>; raise it with CHUNKINV_MAX_TENSOR_BYTES"
std::string tensor_limit_text(std::string_view of = "decompressed tensor data");
// "4 GiB", "512 MiB", "1000 bytes"
std::string byte_count_text(uint64_t n);

// --- little-endian bytes ---------------------------------------------------
template <typename T>
T load_le(const unsigned char* p) {
  T v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<T>(static_cast<T>(p[i]) << (8 * i));
  return v;
}

template <typename T>
void store_le(std::string& out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

inline const unsigned char* ubytes(std::string_view s) { return reinterpret_cast<const unsigned char*>(s.data()); }

// True when [offset, offset + length) lies within `size` bytes (no wrap-around).
inline bool in_bounds(uint64_t offset, uint64_t length, uint64_t size) {
  return offset <= size && length <= size - offset;
}

// `n` elements of `t` from `bytes` (which holds at least n * dtype_size(t)).
std::vector<double> decode(std::string_view bytes, DType t, uint64_t n);
// Appends t's values, rounded to t.dtype (nearest even), little-endian.
void encode(const Tensor& t, std::string& out);

// --- files -------------------------------------------------------------------
// The whole of a regular file (symlinks followed). Refuses FIFOs, devices,
// directories and files larger than max_tensor_bytes() before reading.
std::string read_file(const std::string& path);
// At most the first `n` bytes of such a file (with the same checks); its
// size in `*size`: a header is read without the data after it.
std::string read_file_prefix(const std::string& path, uint64_t n, uint64_t* size);
// Such a file mapped read-only: only the pages touched are read (an
// archive's directory and its members' headers, not their data).
class MappedFile {
 public:
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  std::string_view bytes() const { return {static_cast<const char*>(data_), data_ ? size_ : 0}; }
  uint64_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  uint64_t size_ = 0;
};
// Replaces the file at `path` atomically (core/output_file).
void write_file(const std::string& path, const std::string& bytes);

}  // namespace chunkinv
