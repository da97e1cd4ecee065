// What the tensor-file tests share: temporary folders, the one-line
// UsageError check, tensors of every dtype, hand-made ZIP archives and
// deflate streams, and a damage loop (truncations and byte changes of a
// valid file must read or fail with a UsageError, nothing else).
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/fp.hpp"
#include "io/tensor.hpp"
#include "io/zip.hpp"

namespace chunkinv::testing {

namespace fs = std::filesystem;

// A fresh, empty folder per test.
inline std::string temp_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const fs::path p = fs::temp_directory_path() / (std::string("chunkinv-io-") + std::to_string(::getpid()) + "-" +
                                                  info->test_suite_name() + "-" + info->name());
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

// Same value and, for zeros and NaNs, the same kind.
inline bool same(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

// `fn` throws a UsageError of one line holding every part.
inline ::testing::AssertionResult usage_error(const std::function<void()>& fn, std::initializer_list<std::string> parts) {
  try {
    fn();
  } catch (const UsageError& e) {
    const std::string m = e.what();
    for (const auto& p : parts)
      if (m.find(p) == std::string::npos) return ::testing::AssertionFailure() << "message \"" << m << "\" lacks \"" << p << "\"";
    if (m.find('\n') != std::string::npos) return ::testing::AssertionFailure() << "message spans lines: " << m;
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "not a UsageError: " << e.what();
  }
  return ::testing::AssertionFailure() << "no error thrown";
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// Values each dtype holds exactly, specials included.
inline std::vector<double> values_of(DType t) {
  switch (t) {
    case DType::kBF16: return {0.0, -0.0, 1.0, -2.5, 0x1.FEp127, 0x1p-133, INFINITY, -INFINITY, NAN, 0.5 + 0x1p-8};
    case DType::kF16: return {0.0, -0.0, 1.0, -2.5, 65504.0, 0x1p-24, INFINITY, -INFINITY, NAN, 1.0 + 0x1p-10};
    case DType::kF32: return {0.0, -0.0, 1.0, -2.5, 0x1.FFFFFEp127, 0x1p-149, INFINITY, -INFINITY, NAN, 1.0 + 0x1p-23};
    case DType::kF64: return {0.0, -0.0, 0.1, -2.5, 1e300, 5e-324, INFINITY, -INFINITY, NAN, 1.0 + 0x1p-52};
    case DType::kU16: return {0, 1, 65535, 32768, 7, 8, 9, 10, 11, 12};
    case DType::kI16: return {0, 1, -32768, 32767, -7, 8, 9, 10, 11, 12};
    case DType::kI32: return {0, 1, -2147483648.0, 2147483647.0, -7, 8, 9, 10, 11, 12};
    case DType::kI64: return {0, 1, -9007199254740992.0, 9007199254740992.0, -7, 8, 9, 10, 11, 12};
    case DType::kU8: return {0, 1, 255, 128, 7, 8, 9, 10, 11, 12};
  }
  return {};
}

inline const std::vector<DType> kAllTypes{DType::kBF16, DType::kF16, DType::kF32, DType::kF64, DType::kU16,
                                          DType::kI16,  DType::kI32, DType::kI64, DType::kU8};

inline Tensor tensor_of(DType t) { return Tensor{t, {2, 5}, values_of(t)}; }

inline void expect_same_tensor(const Tensor& got, const Tensor& want, DType want_type) {
  EXPECT_EQ(got.dtype, want_type) << dtype_name(want.dtype);
  EXPECT_EQ(got.shape, want.shape) << dtype_name(want.dtype);
  ASSERT_EQ(got.values.size(), want.values.size());
  for (size_t i = 0; i < want.values.size(); ++i) {
    double w = want.values[i];
    if (want.dtype == DType::kBF16 && want_type == DType::kU16) w = bf16_bits(w);  // .npy holds BF16 as bits
    EXPECT_TRUE(same(got.values[i], w)) << dtype_name(want.dtype) << " element " << i << ": " << got.values[i] << " vs " << w;
  }
}

// --- hand-made ZIP archives ---------------------------------------------------

inline void put16(std::string& o, uint64_t v) { store_le<uint16_t>(o, static_cast<uint16_t>(v)); }
inline void put32(std::string& o, uint64_t v) { store_le<uint32_t>(o, static_cast<uint32_t>(v)); }
inline void put64(std::string& o, uint64_t v) { store_le<uint64_t>(o, v); }

// One member as it goes into an archive; the declared sizes and the local
// header offset may lie, and any of them may go into a ZIP64 extra field.
struct RawMember {
  std::string name;
  std::string data;  // as stored (compressed if method 8)
  uint16_t method = 0;
  uint32_t crc = 0;
  std::optional<uint64_t> usize, csize, offset;  // declared; default: the truth
  bool zip64 = false;                            // sizes and offset in a ZIP64 extra field
  std::optional<uint64_t> local_at;  // point the central entry at another member's local header
};

// An archive of `members`; with `zip64_end`, a ZIP64 end record and
// locator before the end record (whose fields are then saturated).
inline std::string zip_archive(std::vector<RawMember> members, bool zip64_end = false) {
  std::string z, cd;
  std::vector<uint64_t> offsets;
  for (RawMember& m : members) {
    offsets.push_back(z.size());
    put32(z, 0x04034b50u);
    put16(z, 45);
    put16(z, 0);
    put16(z, m.method);
    put16(z, 0);
    put16(z, 0x21);
    put32(z, m.crc);
    put32(z, m.data.size());
    put32(z, m.usize.value_or(m.data.size()));
    put16(z, m.name.size());
    put16(z, 0);
    z += m.name;
    z += m.data;
  }
  for (size_t i = 0; i < members.size(); ++i) {
    const RawMember& m = members[i];
    const uint64_t usize = m.usize.value_or(m.data.size()), csize = m.csize.value_or(m.data.size());
    const uint64_t offset = m.offset.value_or(m.local_at ? offsets[*m.local_at] : offsets[i]);
    std::string extra;
    if (m.zip64) {
      put16(extra, 0x0001);
      put16(extra, 24);
      put64(extra, usize);
      put64(extra, csize);
      put64(extra, offset);
    }
    put32(cd, 0x02014b50u);
    put16(cd, 45);
    put16(cd, 45);
    put16(cd, 0);
    put16(cd, m.method);
    put16(cd, 0);
    put16(cd, 0x21);
    put32(cd, m.crc);
    put32(cd, m.zip64 ? 0xFFFFFFFFu : csize);
    put32(cd, m.zip64 ? 0xFFFFFFFFu : usize);
    put16(cd, m.name.size());
    put16(cd, extra.size());
    put16(cd, 0);
    put16(cd, 0);
    put16(cd, 0);
    put32(cd, 0);
    put32(cd, m.zip64 ? 0xFFFFFFFFu : offset);
    cd += m.name;
    cd += extra;
  }
  const uint64_t cd_off = z.size();
  z += cd;
  if (zip64_end) {
    const uint64_t z64 = z.size();
    put32(z, 0x06064b50u);
    put64(z, 44);
    put16(z, 45);
    put16(z, 45);
    put32(z, 0);
    put32(z, 0);
    put64(z, members.size());
    put64(z, members.size());
    put64(z, cd.size());
    put64(z, cd_off);
    put32(z, 0x07064b50u);
    put32(z, 0);
    put64(z, z64);
    put32(z, 1);
  }
  put32(z, 0x06054b50u);
  put16(z, 0);
  put16(z, 0);
  put16(z, zip64_end ? 0xFFFF : members.size());
  put16(z, zip64_end ? 0xFFFF : members.size());
  put32(z, zip64_end ? 0xFFFFFFFFu : cd.size());
  put32(z, zip64_end ? 0xFFFFFFFFu : cd_off);
  put16(z, 0);
  return z;
}

// A raw deflate stream of `n` zero bytes (n >= 1) in one fixed-Huffman
// block: a literal 0, then matches of 258 bytes at distance 1 (13 bits
// each, the 1032:1 of a zip bomb), then literal zeros for the rest.
inline std::string deflate_zeros(uint64_t n) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  const auto put = [&](uint32_t v, int count) {  // LSB first
    acc |= v << bits;
    bits += count;
    while (bits >= 8) {
      out.push_back(static_cast<char>(acc & 0xFF));
      acc >>= 8;
      bits -= 8;
    }
  };
  const auto code = [&](uint32_t c, int count) {  // Huffman codes go MSB first
    for (int i = count - 1; i >= 0; --i) put((c >> i) & 1, 1);
  };
  put(1, 1);            // final block
  put(1, 2);            // fixed Huffman
  code(0x30, 8);        // literal 0
  uint64_t left = n - 1;
  for (; left >= 258; left -= 258) {
    code(0xC5, 8);      // length code 285: 258 bytes
    code(0, 5);         // distance code 0: distance 1
  }
  for (; left > 0; --left) code(0x30, 8);
  code(0, 7);           // end of block
  if (bits > 0) out.push_back(static_cast<char>(acc & 0xFF));
  return out;
}

// --- damaged files -------------------------------------------------------------
// Every truncation (about 200) and 1500 random changes of 1 to 3 bytes of
// `good`, written to `file` and read with `read`: each must read or throw a
// UsageError naming `file`. Returns the number of UsageErrors.
inline uint64_t damage(const std::string& good, const std::string& file, const std::function<void(const std::string&)>& read) {
  uint64_t state = 12345, usage_errors = 0;
  auto next = [&] { return state = state * 6364136223846793005ull + 1442695040888963407ull, state >> 33; };
  std::vector<std::string> variants;
  for (size_t n = 0; n < good.size(); n += 1 + good.size() / 200) variants.push_back(good.substr(0, n));
  for (int k = 0; k < 1500; ++k) {
    std::string v = good;
    const int changes = 1 + static_cast<int>(next() % 3);
    for (int j = 0; j < changes; ++j) {
      const size_t at = next() % v.size();
      // Bytes that matter most in headers: 0x00, 0xFF, digits, brackets, random.
      static const char kBytes[] = {'\0', '\xff', '9', '(', ')', '[', '{', '\x7f', '-'};
      v[at] = next() % 2 ? kBytes[next() % sizeof(kBytes)] : static_cast<char>(next());
    }
    variants.push_back(v);
  }
  for (const std::string& v : variants) {
    write_bytes(file, v);
    try {
      read(file);
    } catch (const UsageError& e) {
      ++usage_errors;
      EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << file << ": not a UsageError: " << e.what();
      break;
    }
  }
  return usage_errors;
}

// Written by Python's zipfile (ZIP_DEFLATED, force_zip64 as NumPy's savez
// uses): keys.npy [2,2,3] <f4 (header v1), g.npy [2,2] <f8 (v2), beta.npy
// [2,2] <f4 (v3).
inline const unsigned char kPythonNpz[] = {
    0x50, 0x4b, 0x03, 0x04, 0x2d, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x21, 0x00, 0x8e, 0xd0,
    0xc3, 0x2b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x08, 0x00, 0x14, 0x00, 0x6b, 0x65,
    0x79, 0x73, 0x2e, 0x6e, 0x70, 0x79, 0x01, 0x00, 0x10, 0x00, 0xb0, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x6f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x9b, 0xec, 0x17, 0xea, 0x1b, 0x10,
    0xc9, 0xc8, 0x50, 0xc6, 0x50, 0xad, 0x9e, 0x92, 0x5a, 0x9c, 0x5c, 0xa4, 0x6e, 0xa5, 0xa0, 0x6e,
    0x93, 0x66, 0xa2, 0xae, 0xa3, 0xa0, 0x9e, 0x96, 0x5f, 0x54, 0x52, 0x94, 0x98, 0x17, 0x9f, 0x5f,
    0x94, 0x92, 0x0a, 0x12, 0x77, 0x4b, 0xcc, 0x29, 0x4e, 0x05, 0x8a, 0x17, 0x67, 0x24, 0x16, 0xa4,
    0x02, 0xf9, 0x1a, 0x46, 0x3a, 0x0a, 0x40, 0x64, 0xac, 0xa9, 0xa3, 0x50, 0xab, 0x40, 0x1e, 0xe0,
    0x62, 0x60, 0x60, 0xb0, 0x67, 0x60, 0x68, 0xd8, 0x07, 0xc4, 0x40, 0x9a, 0xc1, 0x8e, 0x81, 0xc1,
    0x01, 0x48, 0x1f, 0xd8, 0x0f, 0x64, 0x3b, 0x30, 0x40, 0xc0, 0xfe, 0x59, 0x33, 0x67, 0xda, 0xcd,
    0x9a, 0x29, 0x69, 0x9f, 0x96, 0x96, 0x66, 0x0f, 0x00, 0x50, 0x4b, 0x03, 0x04, 0x2d, 0x00, 0x00,
    0x00, 0x08, 0x00, 0x00, 0x00, 0x21, 0x00, 0xb0, 0xeb, 0xe7, 0x25, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0x05, 0x00, 0x14, 0x00, 0x67, 0x2e, 0x6e, 0x70, 0x79, 0x01, 0x00, 0x10, 0x00,
    0xa0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x57, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x9b, 0xec, 0x17, 0xea, 0x1b, 0x10, 0xc9, 0xc4, 0x50, 0xc2, 0xc0, 0xc0, 0x50, 0xad, 0x9e, 0x92,
    0x5a, 0x9c, 0x5c, 0xa4, 0x6e, 0xa5, 0xa0, 0x6e, 0x93, 0x66, 0xa1, 0xae, 0xa3, 0xa0, 0x9e, 0x96,
    0x5f, 0x54, 0x52, 0x94, 0x98, 0x17, 0x9f, 0x5f, 0x94, 0x92, 0x0a, 0x12, 0x77, 0x4b, 0xcc, 0x29,
    0x4e, 0x05, 0x8a, 0x17, 0x67, 0x24, 0x16, 0xa4, 0x02, 0xf9, 0x1a, 0x46, 0x3a, 0x0a, 0x46, 0x9a,
    0x3a, 0x0a, 0xb5, 0x0a, 0x64, 0x02, 0x2e, 0x06, 0x30, 0xf8, 0xb0, 0x1f, 0x42, 0xb3, 0x1c, 0x80,
    0xd0, 0x07, 0xa0, 0x7c, 0x99, 0x03, 0x00, 0x50, 0x4b, 0x03, 0x04, 0x2d, 0x00, 0x00, 0x00, 0x08,
    0x00, 0x00, 0x00, 0x21, 0x00, 0x98, 0x7f, 0x47, 0xa7, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0x08, 0x00, 0x14, 0x00, 0x62, 0x65, 0x74, 0x61, 0x2e, 0x6e, 0x70, 0x79, 0x01, 0x00, 0x10,
    0x00, 0x90, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x56, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x9b, 0xec, 0x17, 0xea, 0x1b, 0x10, 0xc9, 0xcc, 0x50, 0xc2, 0xc0, 0xc0, 0x50, 0xad, 0x9e,
    0x92, 0x5a, 0x9c, 0x5c, 0xa4, 0x6e, 0xa5, 0xa0, 0x6e, 0x93, 0x66, 0xa2, 0xae, 0xa3, 0xa0, 0x9e,
    0x96, 0x5f, 0x54, 0x52, 0x94, 0x98, 0x17, 0x9f, 0x5f, 0x94, 0x92, 0x0a, 0x12, 0x77, 0x4b, 0xcc,
    0x29, 0x4e, 0x05, 0x8a, 0x17, 0x67, 0x24, 0x16, 0xa4, 0x02, 0xf9, 0x1a, 0x46, 0x3a, 0x0a, 0x46,
    0x9a, 0x3a, 0x0a, 0xb5, 0x0a, 0x64, 0x02, 0x2e, 0xa0, 0xb5, 0xf6, 0x0c, 0x0c, 0x0d, 0x76, 0x0c,
    0x0c, 0x0e, 0x40, 0x9a, 0xc1, 0x0e, 0x00, 0x50, 0x4b, 0x01, 0x02, 0x2d, 0x03, 0x2d, 0x00, 0x00,
    0x00, 0x08, 0x00, 0x00, 0x00, 0x21, 0x00, 0x8e, 0xd0, 0xc3, 0x2b, 0x6f, 0x00, 0x00, 0x00, 0xb0,
    0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80,
    0x01, 0x00, 0x00, 0x00, 0x00, 0x6b, 0x65, 0x79, 0x73, 0x2e, 0x6e, 0x70, 0x79, 0x50, 0x4b, 0x01,
    0x02, 0x2d, 0x03, 0x2d, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x21, 0x00, 0xb0, 0xeb, 0xe7,
    0x25, 0x57, 0x00, 0x00, 0x00, 0xa0, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0x01, 0xa9, 0x00, 0x00, 0x00, 0x67, 0x2e, 0x6e, 0x70, 0x79,
    0x50, 0x4b, 0x01, 0x02, 0x2d, 0x03, 0x2d, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x21, 0x00,
    0x98, 0x7f, 0x47, 0xa7, 0x56, 0x00, 0x00, 0x00, 0x90, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0x01, 0x37, 0x01, 0x00, 0x00, 0x62, 0x65,
    0x74, 0x61, 0x2e, 0x6e, 0x70, 0x79, 0x50, 0x4b, 0x05, 0x06, 0x00, 0x00, 0x00, 0x00, 0x03, 0x00,
    0x03, 0x00, 0x9f, 0x00, 0x00, 0x00, 0xc7, 0x01, 0x00, 0x00, 0x00, 0x00};

inline std::string python_npz() { return std::string(reinterpret_cast<const char*>(kPythonNpz), sizeof(kPythonNpz)); }

}  // namespace chunkinv::testing
