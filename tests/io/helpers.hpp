// What the tensor-file tests share: temporary folders, the one-line
// UsageError check, tensors of every dtype, hand-made ZIP archives
// (zip_builder.hpp), and a damage loop (truncations and byte changes of a
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
#include "support/shell.hpp"
#include "zip_builder.hpp"

namespace chunkinv::testing {

namespace fs = std::filesystem;

// A fresh, empty folder per test.
inline std::string temp_dir() { return chunkinv::testing::test_dir("io"); }

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

}  // namespace chunkinv::testing
