#include "io/tensor.hpp"

#include <bit>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/output_file.hpp"
#include "core/fp.hpp"
#include "core/limits.hpp"

namespace chunkinv {

// ---------------------------------------------------------------------------
// Element types

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kBF16: return "bf16";
    case DType::kF16: return "f16";
    case DType::kF32: return "f32";
    case DType::kF64: return "f64";
    case DType::kU16: return "u16";
    case DType::kI16: return "i16";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
    case DType::kU8: return "u8";
  }
  return "?";
}

int dtype_size(DType t) {
  switch (t) {
    case DType::kU8: return 1;
    case DType::kBF16: case DType::kF16: case DType::kU16: case DType::kI16: return 2;
    case DType::kF32: case DType::kI32: return 4;
    case DType::kF64: case DType::kI64: return 8;
  }
  return 0;
}

bool dtype_is_float(DType t) {
  return t == DType::kBF16 || t == DType::kF16 || t == DType::kF32 || t == DType::kF64;
}

uint64_t Tensor::numel() const {
  uint64_t n = 1;
  for (int64_t s : shape) n *= static_cast<uint64_t>(s);
  return n;
}

std::string index_string(const std::vector<int64_t>& shape, uint64_t flat) {
  std::vector<uint64_t> idx(shape.size());
  for (size_t k = shape.size(); k-- > 0;) {
    const auto s = static_cast<uint64_t>(shape[k]);
    idx[k] = s ? flat % s : 0;
    flat = s ? flat / s : 0;
  }
  return fmt::format("[{}]", fmt::join(idx, ", "));
}

std::string shape_string(const std::vector<int64_t>& shape) { return fmt::format("({})", fmt::join(shape, ", ")); }

std::optional<uint64_t> bytes_needed(const std::vector<int64_t>& shape, DType t) {
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (d == 0) return 0;
  }
  uint64_t n = static_cast<uint64_t>(dtype_size(t));
  for (int64_t d : shape) {
    const auto u = static_cast<uint64_t>(d);
    if (n > UINT64_MAX / u) return std::nullopt;
    n *= u;
  }
  return n;
}

void check_shape(const std::vector<int64_t>& shape, DType t, const std::string& what) {
  if (shape.size() > kMaxRank)
    throw UsageError(fmt::format("{}: malformed shape: rank {} exceeds {}", what, shape.size(), kMaxRank));
  for (int64_t d : shape)
    if (d < 0) throw UsageError(fmt::format("{}: malformed shape {}: dimension {} is negative", what, shape_string(shape), d));
  if (!bytes_needed(shape, t))
    throw UsageError(fmt::format("{}: malformed shape {} of {}: more than 2^64 bytes", what, shape_string(shape), dtype_name(t)));
}

// ---------------------------------------------------------------------------
// Limits

namespace {

constexpr uint64_t kKiB = uint64_t{1} << 10, kMiB = uint64_t{1} << 20, kGiB = uint64_t{1} << 30;
constexpr uint64_t kDefaultMaxTensorBytes = 4 * kGiB;
constexpr const char* kLimitVariable = "CHUNKINV_MAX_TENSOR_BYTES";

}  // namespace

uint64_t max_tensor_bytes() {
  const char* env = std::getenv(kLimitVariable);
  return env && *env ? parse_size(kLimitVariable, env) : kDefaultMaxTensorBytes;  // read as --max-memory is
}

std::string byte_count_text(uint64_t n) {
  if (n && n % kGiB == 0) return fmt::format("{} GiB", n / kGiB);
  if (n && n % kMiB == 0) return fmt::format("{} MiB", n / kMiB);
  if (n && n % kKiB == 0) return fmt::format("{} KiB", n / kKiB);
  return fmt::format("{} bytes", n);
}

std::string tensor_limit_text(std::string_view of) {
  return fmt::format("exceeds the {} limit on {}; raise it with {}", byte_count_text(max_tensor_bytes()), of, kLimitVariable);
}

// ---------------------------------------------------------------------------
// Encoding

std::vector<double> decode(std::string_view bytes, DType t, uint64_t n) {
  std::vector<double> v(n);
  const unsigned char* p = ubytes(bytes);
  const int sz = dtype_size(t);
  for (uint64_t i = 0; i < n; ++i, p += sz) {
    switch (t) {
      case DType::kBF16: v[i] = bf16_from_bits(load_le<uint16_t>(p)); break;
      case DType::kF16: v[i] = fp16_from_bits(load_le<uint16_t>(p)); break;
      case DType::kF32: v[i] = std::bit_cast<float>(load_le<uint32_t>(p)); break;
      case DType::kF64: v[i] = std::bit_cast<double>(load_le<uint64_t>(p)); break;
      case DType::kU16: v[i] = load_le<uint16_t>(p); break;
      case DType::kI16: v[i] = static_cast<int16_t>(load_le<uint16_t>(p)); break;
      case DType::kI32: v[i] = static_cast<int32_t>(load_le<uint32_t>(p)); break;
      case DType::kI64: v[i] = static_cast<double>(static_cast<int64_t>(load_le<uint64_t>(p))); break;
      case DType::kU8: v[i] = *p; break;
    }
  }
  return v;
}

void encode(const Tensor& t, std::string& out) {
  if (t.values.size() != t.numel())
    throw UsageError(fmt::format("tensor of shape {} holds {} values", shape_string(t.shape), t.values.size()));
  out.reserve(out.size() + t.values.size() * dtype_size(t.dtype));
  for (double x : t.values) {
    switch (t.dtype) {
      case DType::kBF16: store_le<uint16_t>(out, bf16_bits(bf16(x))); break;
      case DType::kF16: store_le<uint16_t>(out, fp16_bits(fp16(x))); break;
      case DType::kF32: store_le<uint32_t>(out, std::bit_cast<uint32_t>(static_cast<float>(x))); break;
      case DType::kF64: store_le<uint64_t>(out, std::bit_cast<uint64_t>(x)); break;
      case DType::kU16: case DType::kI16:
        store_le<uint16_t>(out, static_cast<uint16_t>(static_cast<int64_t>(x))); break;
      case DType::kI32: store_le<uint32_t>(out, static_cast<uint32_t>(static_cast<int64_t>(x))); break;
      case DType::kI64: store_le<uint64_t>(out, static_cast<uint64_t>(static_cast<int64_t>(x))); break;
      case DType::kU8: out.push_back(static_cast<char>(static_cast<uint8_t>(x))); break;
    }
  }
}

// ---------------------------------------------------------------------------
// Files

namespace {

const char* file_kind(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

// Refuses anything but a regular file: reading /dev/zero or a FIFO never
// ends, and a directory is no tensor.
void require_regular(const std::string& path, const struct stat& st) {
  if (S_ISREG(st.st_mode)) return;
  if (S_ISDIR(st.st_mode)) throw UsageError(path + ": is a directory, not a file");
  std::string via;
  struct stat lst {};
  if (::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) {
    std::error_code ec;
    const auto target = std::filesystem::canonical(path, ec);
    if (!ec) via = fmt::format(" (a link to {})", target.string());
  }
  throw UsageError(fmt::format("{}: is {}{}, not a regular file", path, file_kind(st.st_mode), via));
}

// The regular file at `path` opened for reading (read_file's checks, its
// size within the limit); the caller closes it.
int open_regular(const std::string& path, uint64_t* size) {
  // stat first: merely opening some devices has effects, and opening a FIFO
  // waits for a writer.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) throw UsageError(path + ": no such file");
    throw UsageError(fmt::format("{}: cannot be read ({})", path, std::strerror(errno)));
  }
  require_regular(path, st);
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw UsageError(fmt::format("{}: cannot be opened for reading ({})", path, std::strerror(errno)));
  try {
    // Again on what was opened: the path may have been replaced in between.
    if (::fstat(fd, &st) != 0) throw UsageError(fmt::format("{}: cannot be read ({})", path, std::strerror(errno)));
    require_regular(path, st);
    *size = static_cast<uint64_t>(st.st_size);
    if (*size > max_tensor_bytes())
      throw UsageError(fmt::format("{}: file of {} bytes {}", path, *size, tensor_limit_text("tensor files")));
  } catch (...) {
    ::close(fd);
    throw;
  }
  return fd;
}

struct Closer {
  int fd;
  ~Closer() { ::close(fd); }
};

// At most `most` bytes from the start of the regular file at `path`; its size in `*size_out`.
std::string read_regular(const std::string& path, uint64_t most, uint64_t* size_out) {
  uint64_t size = 0;
  const Closer closer{open_regular(path, &size)};
  if (size_out) *size_out = size;
  std::string bytes(std::min(size, most), '\0');
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t r = ::read(closer.fd, bytes.data() + got, bytes.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw UsageError(fmt::format("{}: read failed ({})", path, std::strerror(errno)));
    if (r == 0) break;  // shrank since fstat
    got += static_cast<size_t>(r);
  }
  bytes.resize(got);
  return bytes;
}

}  // namespace

std::string read_file(const std::string& path) { return read_regular(path, UINT64_MAX, nullptr); }

std::string read_file_prefix(const std::string& path, uint64_t n, uint64_t* size) { return read_regular(path, n, size); }

MappedFile::MappedFile(const std::string& path) {
  const Closer closer{open_regular(path, &size_)};
  if (size_ == 0) return;
  void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, closer.fd, 0);
  if (p == MAP_FAILED)
    throw UsageError(fmt::format("{}: cannot be mapped to read its headers ({})", path, std::strerror(errno)));
  data_ = p;
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(data_, size_);
}

void write_file(const std::string& path, const std::string& bytes) {
  OutputFile(path).commit(bytes);  // whole or not at all: a kill mid-write leaves the file before it
}

}  // namespace chunkinv
