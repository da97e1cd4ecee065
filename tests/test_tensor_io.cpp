// Tensor files (.npy, .npz, .safetensors), tensor sets and the data-backed
// families: round trips of every dtype and container, files written by
// other tools, every malformed input named in its error, and the captured
// gates against the facts of data/gdn-gates/README.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <unistd.h>

#include "core/error.hpp"
#include "core/fp.hpp"
#include "driver/experiment.hpp"
#include "inputs/data_families.hpp"
#include "inputs/family.hpp"
#include "inputs/tensor_io.hpp"
#include "report/report.hpp"

using namespace chunkinv;
namespace fs = std::filesystem;

namespace {

// A fresh, empty folder per test.
std::string temp_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const fs::path p = fs::temp_directory_path() /
                     (std::string("chunkinv-io-") + std::to_string(::getpid()) + "-" + info->test_suite_name() + "-" + info->name());
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

// Same value and, for zeros and NaNs, the same kind.
bool same(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

::testing::AssertionResult usage_error(const std::function<void()>& fn, std::initializer_list<std::string> parts) {
  try {
    fn();
  } catch (const UsageError& e) {
    const std::string m = e.what();
    for (const auto& p : parts)
      if (m.find(p) == std::string::npos)
        return ::testing::AssertionFailure() << "message \"" << m << "\" lacks \"" << p << "\"";
    if (m.find('\n') != std::string::npos) return ::testing::AssertionFailure() << "message spans lines: " << m;
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "not a UsageError: " << e.what();
  }
  return ::testing::AssertionFailure() << "no error thrown";
}

// Values each dtype holds exactly, specials included.
std::vector<double> values_of(DType t) {
  switch (t) {
    case DType::kBF16:
      return {0.0, -0.0, 1.0, -2.5, 0x1.FEp127, 0x1p-133, INFINITY, -INFINITY, NAN, 0.5 + 0x1p-8};
    case DType::kF16:
      return {0.0, -0.0, 1.0, -2.5, 65504.0, 0x1p-24, INFINITY, -INFINITY, NAN, 1.0 + 0x1p-10};
    case DType::kF32:
      return {0.0, -0.0, 1.0, -2.5, 0x1.FFFFFEp127, 0x1p-149, INFINITY, -INFINITY, NAN, 1.0 + 0x1p-23};
    case DType::kF64:
      return {0.0, -0.0, 0.1, -2.5, 1e300, 5e-324, INFINITY, -INFINITY, NAN, 1.0 + 0x1p-52};
    case DType::kU16: return {0, 1, 65535, 32768, 7, 8, 9, 10, 11, 12};
    case DType::kI16: return {0, 1, -32768, 32767, -7, 8, 9, 10, 11, 12};
    case DType::kI32: return {0, 1, -2147483648.0, 2147483647.0, -7, 8, 9, 10, 11, 12};
    case DType::kI64: return {0, 1, -9007199254740992.0, 9007199254740992.0, -7, 8, 9, 10, 11, 12};
    case DType::kU8: return {0, 1, 255, 128, 7, 8, 9, 10, 11, 12};
  }
  return {};
}

const std::vector<DType> kAllTypes{DType::kBF16, DType::kF16, DType::kF32, DType::kF64, DType::kU16,
                                   DType::kI16,  DType::kI32, DType::kI64, DType::kU8};

Tensor tensor_of(DType t) { return Tensor{t, {2, 5}, values_of(t)}; }

void expect_same_tensor(const Tensor& got, const Tensor& want, DType want_type) {
  EXPECT_EQ(got.dtype, want_type) << dtype_name(want.dtype);
  EXPECT_EQ(got.shape, want.shape) << dtype_name(want.dtype);
  ASSERT_EQ(got.values.size(), want.values.size());
  for (size_t i = 0; i < want.values.size(); ++i) {
    double w = want.values[i];
    if (want.dtype == DType::kBF16 && want_type == DType::kU16) w = bf16_bits(w);  // .npy holds BF16 as bits
    EXPECT_TRUE(same(got.values[i], w)) << dtype_name(want.dtype) << " element " << i << ": " << got.values[i] << " vs " << w;
  }
}

// Samples with distinct, non-trivial values in every entry.
std::vector<Sample> some_samples(int n, int c, int d) {
  std::vector<Sample> v(n);
  for (int s = 0; s < n; ++s) {
    v[s].chunk = c;
    v[s].dim = d;
    for (int i = 0; i < c * d; ++i) v[s].keys.push_back(bf16(std::sin(1.0 + s * 131 + i * 0.37)));
    for (int t = 0; t < c; ++t) {
      v[s].g.push_back(-std::exp(std::cos(s * 7.0 + t)) * 3.0);
      v[s].beta.push_back(0.5 + 0.45 * std::sin(s * 3.0 + t * 1.7));
    }
  }
  return v;
}

void expect_same_samples(const TensorSet& set, const std::vector<Sample>& want) {
  ASSERT_EQ(set.count, want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const Sample s = set.sample(i);
    EXPECT_EQ(s.chunk, want[i].chunk);
    EXPECT_EQ(s.dim, want[i].dim);
    EXPECT_EQ(s.keys, want[i].keys) << "sample " << i;
    EXPECT_EQ(s.g, want[i].g) << "sample " << i;
    EXPECT_EQ(s.beta, want[i].beta) << "sample " << i;
  }
}

// Written by Python's zipfile (ZIP_DEFLATED, force_zip64 as NumPy's savez
// uses): keys.npy [2,2,3] <f4 (header v1), g.npy [2,2] <f8 (v2), beta.npy
// [2,2] <f4 (v3).
const unsigned char kPythonNpz[] = {
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
    0x03, 0x00, 0x9f, 0x00, 0x00, 0x00, 0xc7, 0x01, 0x00, 0x00, 0x00, 0x00
};

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

// ---------------------------------------------------------------------------
// Containers

TEST(TensorIo, NpyRoundTripEveryDtype) {
  const std::string dir = temp_dir();
  for (DType t : kAllTypes) {
    const Tensor want = tensor_of(t);
    const std::string f = dir + "/" + dtype_name(t) + ".npy";
    write_npy(f, want);
    expect_same_tensor(read_npy(f), want, t == DType::kBF16 ? DType::kU16 : t);
  }
}

TEST(TensorIo, NpzRoundTripEveryDtype) {
  const std::string f = temp_dir() + "/all.npz";
  TensorMap m;
  for (DType t : kAllTypes) m[dtype_name(t)] = tensor_of(t);
  write_npz(f, m);
  const TensorMap got = read_npz(f);
  ASSERT_EQ(got.size(), m.size());
  for (DType t : kAllTypes) expect_same_tensor(got.at(dtype_name(t)), m[dtype_name(t)], t == DType::kBF16 ? DType::kU16 : t);
}

TEST(TensorIo, SafetensorsRoundTripEveryDtype) {
  const std::string f = temp_dir() + "/all.safetensors";
  TensorMap m;
  for (DType t : kAllTypes) m[dtype_name(t)] = tensor_of(t);
  write_safetensors(f, m);
  const TensorMap got = read_safetensors(f);
  ASSERT_EQ(got.size(), m.size());
  for (DType t : kAllTypes) expect_same_tensor(got.at(dtype_name(t)), m[dtype_name(t)], t);
  // The header is padded so that the data starts 8-byte aligned.
  const std::string b = read_bytes(f);
  uint64_t hlen;
  std::memcpy(&hlen, b.data(), 8);
  EXPECT_EQ((8 + hlen) % 8, 0u);
}

TEST(TensorIo, WritersRoundToTheDtype) {
  // 1 + 2^-8 is halfway between two BF16 values: nearest even is 1.
  Tensor t{DType::kBF16, {3}, {1.0 + 0x1p-8, 1.0 + 3 * 0x1p-8, 0.1}};
  const std::string f = temp_dir() + "/r.safetensors";
  write_safetensors(f, {{"x", t}});
  const Tensor got = read_safetensors(f).at("x");
  EXPECT_EQ(got.values[0], 1.0);
  EXPECT_EQ(got.values[1], 1.0 + 0x1p-6);
  EXPECT_EQ(got.values[2], bf16(0.1));
}

TEST(TensorIo, ReadsNumpyWrittenGates) {
  // Files written by NumPy itself (header v1, <f4 and <i4).
  const std::string dir = std::string(CHUNKINV_SHARED_DATA) + "/gdn-gates/Qwen3-Next/";
  const Tensor g = read_npy(dir + "g.npy");
  EXPECT_EQ(g.dtype, DType::kF32);
  EXPECT_EQ(g.shape, (std::vector<int64_t>{1, 8192, 8}));
  const Tensor cu = read_npy(dir + "cu_seqlens.npy");
  EXPECT_EQ(cu.dtype, DType::kI32);
  EXPECT_EQ(cu.values, (std::vector<double>{0, 1024, 2048, 3072, 4096, 5120, 6144, 7168, 8192}));
}

TEST(TensorIo, ReadsPythonZipfileNpz) {
  const std::string f = temp_dir() + "/py.npz";
  write_bytes(f, std::string(reinterpret_cast<const char*>(kPythonNpz), sizeof(kPythonNpz)));
  if (!zlib_available()) {
    EXPECT_TRUE(usage_error([&] { read_npz(f); }, {f, "keys.npy", "deflated", "zlib"}));
    return;
  }
  const TensorMap m = read_npz(f);
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m.at("keys").dtype, DType::kF32);
  EXPECT_EQ(m.at("keys").shape, (std::vector<int64_t>{2, 2, 3}));
  EXPECT_EQ(m.at("keys").values[11], static_cast<double>(0.9f));
  EXPECT_EQ(m.at("g").dtype, DType::kF64);
  EXPECT_EQ(m.at("g").values, (std::vector<double>{-1.0, -2.5, -0.125, -7.0}));
  EXPECT_EQ(m.at("beta").values, (std::vector<double>{0.5, 0.25, 0.75, 0.125}));
  // As a tensor set: FP32 keys are rounded to BF16.
  const TensorSet s = load_tensor_set(f);
  EXPECT_EQ(s.count, 2u);
  EXPECT_EQ(s.chunk, 2);
  EXPECT_EQ(s.dim, 3);
  EXPECT_EQ(s.keys_dtype, DType::kF32);
  EXPECT_EQ(s.sample(1).keys[5], bf16(static_cast<double>(0.9f)));
  EXPECT_NE(s.sample(1).keys[5], static_cast<double>(0.9f));
  EXPECT_EQ(s.sample(1).g, (std::vector<double>{-0.125, -7.0}));
}

TEST(TensorIo, ReadsHandBuiltSafetensors) {
  // The format from its specification: u64 header length, JSON, raw data.
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"w":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]},)"
      R"("v":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
  std::string b;
  const uint64_t n = header.size();
  b.append(reinterpret_cast<const char*>(&n), 8);  // little-endian host
  b += header;
  b += std::string("\x80\x3f\x20\xc0", 4);  // BF16 1.0, -2.5
  b += std::string("\x00\x00\x40\x40", 4);  // F32 3.0
  const std::string f = temp_dir() + "/hand.safetensors";
  write_bytes(f, b);
  const TensorMap m = read_safetensors(f);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m.at("w").dtype, DType::kBF16);
  EXPECT_EQ(m.at("w").values, (std::vector<double>{1.0, -2.5}));
  EXPECT_EQ(m.at("v").values, (std::vector<double>{3.0}));
}

TEST(TensorIo, FortranOrderIsReordered) {
  // A 2x3 matrix [[1,2,3],[4,5,6]] stored column-major.
  Tensor t{DType::kF64, {6}, {1, 4, 2, 5, 3, 6}};
  std::string b = npy_bytes(t);
  const std::string from = "'fortran_order': False, 'shape': (6,), ";
  const std::string to = "'fortran_order': True, 'shape': (2, 3), ";
  ASSERT_EQ(from.size() + 1, to.size());
  b.replace(b.find(from), from.size(), to);
  b.erase(b.find('\n') - 1, 1);  // keep the header length: one space of padding less
  const Tensor got = parse_npy(b, "f.npy");
  EXPECT_EQ(got.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(got.values, (std::vector<double>{1, 2, 3, 4, 5, 6}));
}

TEST(TensorIo, MalformedContainersNameTheCulprit) {
  const std::string dir = temp_dir();
  const Tensor t{DType::kF32, {4, 4}, std::vector<double>(16, -1.0)};
  const std::string npy = npy_bytes(t);
  // Truncated .npy data and header.
  write_bytes(dir + "/cut.npy", npy.substr(0, npy.size() - 3));
  EXPECT_TRUE(usage_error([&] { read_npy(dir + "/cut.npy"); }, {dir + "/cut.npy", "truncated", "64 data bytes"}));
  write_bytes(dir + "/cut2.npy", npy.substr(0, 40));
  EXPECT_TRUE(usage_error([&] { read_npy(dir + "/cut2.npy"); }, {"cut2.npy", "truncated"}));
  write_bytes(dir + "/bad.npy", "PK not numpy at all");
  EXPECT_TRUE(usage_error([&] { read_npy(dir + "/bad.npy"); }, {"bad.npy", "not a .npy"}));
  EXPECT_TRUE(usage_error([&] { read_npy(dir + "/none.npy"); }, {"none.npy", "no such file"}));
  // Big-endian and unknown dtypes.
  std::string be = npy;
  be.replace(be.find("'<f4'"), 5, "'>f4'");
  EXPECT_TRUE(usage_error([&] { parse_npy(be, "be.npy"); }, {"be.npy", ">f4", "big-endian"}));
  std::string c8 = npy;
  c8.replace(c8.find("'<f4'"), 5, "'<c8'");
  EXPECT_TRUE(usage_error([&] { parse_npy(c8, "c8.npy"); }, {"c8.npy", "<c8", "not supported"}));
  // Headers built to mislead: a shape whose byte count wraps around 2^64, a
  // fortran_order that is no bool, nesting deep enough to exhaust a stack.
  auto npy_with_header = [](const std::string& dict) {
    std::string h = dict;
    h.append((64 - (10 + h.size() + 1) % 64) % 64, ' ');
    h.push_back('\n');
    std::string b("\x93NUMPY\x01\x00", 8);
    b.push_back(static_cast<char>(h.size() & 0xFF));
    b.push_back(static_cast<char>(h.size() >> 8));
    return b + h + std::string(64, '\0');
  };
  EXPECT_TRUE(usage_error([&] { parse_npy(npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4), }"), "wrap.npy"); },
                          {"wrap.npy", "truncated", "over 2^64"}));
  EXPECT_TRUE(usage_error([&] { parse_npy(npy_with_header("{'descr': '<f4', 'fortran_order': 1, 'shape': (4,), }"), "fo.npy"); },
                          {"fo.npy", "fortran_order"}));
  EXPECT_TRUE(usage_error([&] { parse_npy(npy_with_header("{'descr': '<f4', 'shape': " + std::string(60000, '(')), "deep.npy"); },
                          {"deep.npy", "nested too deeply"}));
  EXPECT_TRUE(usage_error([&] { parse_npy(npy_with_header("{'descr': '<f4', 'shape': 4, }"), "s.npy"); }, {"s.npy", "malformed shape"}));
  // Truncated .npz: the end of the central directory is gone.
  write_npz(dir + "/x.npz", {{"g", t}});
  const std::string z = read_bytes(dir + "/x.npz");
  write_bytes(dir + "/cut.npz", z.substr(0, z.size() - 30));
  EXPECT_TRUE(usage_error([&] { read_npz(dir + "/cut.npz"); }, {"cut.npz", "truncated"}));
  // A flipped data byte: the CRC catches it.
  std::string flip = z;
  flip[z.find("NUMPY") + 100] ^= 1;
  write_bytes(dir + "/flip.npz", flip);
  EXPECT_TRUE(usage_error([&] { read_npz(dir + "/flip.npz"); }, {"flip.npz[g.npy]", "CRC"}));
  // Truncated .safetensors: in the data, and in the header.
  write_safetensors(dir + "/x.safetensors", {{"g", t}});
  const std::string s = read_bytes(dir + "/x.safetensors");
  write_bytes(dir + "/cut.safetensors", s.substr(0, s.size() - 1));
  EXPECT_TRUE(usage_error([&] { read_safetensors(dir + "/cut.safetensors"); }, {"cut.safetensors[g]", "truncated"}));
  write_bytes(dir + "/cut2.safetensors", s.substr(0, 20));
  EXPECT_TRUE(usage_error([&] { read_safetensors(dir + "/cut2.safetensors"); }, {"cut2.safetensors", "truncated"}));
  std::string odd = s;
  odd.replace(odd.find("\"F32\""), 5, "\"F8X\"");
  write_bytes(dir + "/odd.safetensors", odd);
  EXPECT_TRUE(usage_error([&] { read_safetensors(dir + "/odd.safetensors"); }, {"odd.safetensors[g]", "F8X", "not supported"}));
}

// ---------------------------------------------------------------------------
// Tensor sets

TEST(TensorSet, RoundTripEveryContainerAndKeyType) {
  const std::string dir = temp_dir();
  const auto want = some_samples(5, 16, 24);
  int n = 0;
  for (const std::string ext : {"", ".npz", ".safetensors"}) {
    // F32 and F64 hold BF16 keys exactly; U16/I16 are BF16 bit patterns.
    for (DType k : {DType::kBF16, DType::kU16, DType::kI16, DType::kF32, DType::kF64}) {
      const std::string p = dir + "/set" + std::to_string(n++) + ext;
      write_tensor_set(p, want, k, DType::kF64);
      const TensorSet got = load_tensor_set(p);
      EXPECT_EQ(got.keys_dtype, k == DType::kBF16 && ext != ".safetensors" ? DType::kU16 : k) << p;
      expect_same_samples(got, want);
    }
  }
}

TEST(TensorSet, NonBf16KeysAreRoundedToNearestEven) {
  auto s = some_samples(1, 4, 3);
  s[0].keys[0] = 1.0 + 0x1p-8;       // tie: to even (1)
  s[0].keys[1] = 1.0 + 3 * 0x1p-8;   // tie: to even (1 + 2^-6)
  s[0].keys[2] = -(1.0 + 0x1.8p-8);  // above the tie: away from 1
  s[0].keys[3] = 0.1;
  const std::string p = temp_dir() + "/k.safetensors";
  write_tensor_set(p, s, DType::kF64, DType::kF32);
  const TensorSet got = load_tensor_set(p);
  EXPECT_EQ(got.keys[0], 1.0);
  EXPECT_EQ(got.keys[1], 1.0 + 0x1p-6);
  EXPECT_EQ(got.keys[2], -(1.0 + 0x1p-7));
  EXPECT_EQ(got.keys[3], bf16(0.1));
  // F32 g and beta arrive as their FP32 values, widened exactly.
  EXPECT_EQ(got.g[0], static_cast<double>(static_cast<float>(s[0].g[0])));
  EXPECT_EQ(got.beta[3], static_cast<double>(static_cast<float>(s[0].beta[3])));
}

TEST(TensorSet, MalformedSetsNameFileTensorAndEntry) {
  const std::string dir = temp_dir();
  const auto good = some_samples(6, 8, 4);
  const std::string d = dir + "/d";
  write_tensor_set(d, good);
  ASSERT_EQ(load_tensor_set(d).count, 6u);

  auto npy_tensor = [&](const char* name) { return read_npy(d + "/" + name + ".npy"); };
  auto with = [&](const char* name, const Tensor& t) {
    const std::string p = dir + "/" + name + "-" + std::to_string(std::rand());
    fs::copy(d, p);
    write_npy(p + "/" + name + ".npy", t);
    return p;
  };
  // g >= 0, the example of the docs.
  Tensor g = npy_tensor("g");
  g.values[3 * 8 + 7] = 0.25;
  std::string p = with("g", g);
  EXPECT_TRUE(usage_error([&] { load_tensor_set(p); }, {"inputs " + p + "/g.npy: entry [3, 7] = 0.25 is not < 0"}));
  g.values[3 * 8 + 7] = 0.0;
  p = with("g", g);
  EXPECT_TRUE(usage_error([&] { load_tensor_set(p); }, {p + "/g.npy: entry [3, 7] = 0 is not < 0"}));
  g.values[3 * 8 + 7] = -INFINITY;
  p = with("g", g);
  EXPECT_TRUE(usage_error([&] { load_tensor_set(p); }, {p + "/g.npy: entry [3, 7] = -inf is not finite"}));
  // beta outside (0, 1).
  Tensor b = npy_tensor("beta");
  b.values[5 * 8 + 2] = 1.0;
  p = with("beta", b);
  EXPECT_TRUE(usage_error([&] { load_tensor_set(p); }, {p + "/beta.npy: entry [5, 2] = 1 is not in (0, 1)"}));
  b.values[5 * 8 + 2] = NAN;
  p = with("beta", b);
  EXPECT_TRUE(usage_error([&] { load_tensor_set(p); }, {p + "/beta.npy: entry [5, 2] = nan is not finite"}));
  // Non-finite and overflowing keys.
  Tensor k{DType::kF64, {6, 8, 4}, {}};
  for (const Sample& s : good) k.values.insert(k.values.end(), s.keys.begin(), s.keys.end());
  k.values[1 * 32 + 2 * 4 + 3] = NAN;
  p = with("keys", k);
  EXPECT_TRUE(usage_error([&] { load_tensor_set(p); }, {p + "/keys.npy: entry [1, 2, 3] = nan is not finite"}));
  k.values[1 * 32 + 2 * 4 + 3] = 1e300;
  p = with("keys", k);
  EXPECT_TRUE(usage_error([&] { load_tensor_set(p); }, {p + "/keys.npy: entry [1, 2, 3] = 1e+300 overflows BF16"}));
  // Wrong shapes.
  Tensor g2{DType::kF64, {6, 9}, std::vector<double>(54, -1.0)};
  p = with("g", g2);
  EXPECT_TRUE(usage_error([&] { load_tensor_set(p); }, {p + "/g.npy: shape (6, 9) does not match keys", "(6, 8)"}));
  Tensor k2{DType::kF32, {48, 4}, std::vector<double>(192, 0.5)};
  p = with("keys", k2);
  EXPECT_TRUE(usage_error([&] { load_tensor_set(p); }, {p + "/keys.npy: shape (48, 4) is not [N, C, d]"}));
  Tensor k3{DType::kF32, {1, 65, 2}, std::vector<double>(130, 0.5)};
  p = with("keys", k3);
  EXPECT_TRUE(usage_error([&] { load_tensor_set(p); }, {p + "/keys.npy", "C = 65 is not in 2..64"}));
  // Wrong dtype.
  Tensor gi{DType::kI32, {6, 8}, std::vector<double>(48, -1.0)};
  p = with("g", gi);
  EXPECT_TRUE(usage_error([&] { load_tensor_set(p); }, {p + "/g.npy: dtype i32 is not a floating-point type"}));
  // Missing tensors: in a directory, an .npz and a .safetensors.
  const std::string m = dir + "/missing";
  fs::copy(d, m);
  fs::remove(m + "/beta.npy");
  EXPECT_TRUE(usage_error([&] { load_tensor_set(m); }, {"inputs " + m + ": beta.npy is missing (found: g.npy, keys.npy)"}));
  TensorMap tm{{"keys", read_npy(d + "/keys.npy")}, {"beta", read_npy(d + "/beta.npy")}};
  write_npz(dir + "/nog.npz", tm);
  EXPECT_TRUE(usage_error([&] { load_tensor_set(dir + "/nog.npz"); },
                          {"inputs " + dir + "/nog.npz: tensor 'g' is missing (found: beta, keys)"}));
  write_safetensors(dir + "/nog.safetensors", tm);
  EXPECT_TRUE(usage_error([&] { load_tensor_set(dir + "/nog.safetensors"); }, {"nog.safetensors: tensor 'g' is missing"}));
  // Culprits inside containers are named as file[tensor].
  tm["g"] = g;
  tm["g"].values[3 * 8 + 7] = 0.25;
  write_safetensors(dir + "/bad.safetensors", tm);
  EXPECT_TRUE(usage_error([&] { load_tensor_set(dir + "/bad.safetensors"); },
                          {"inputs " + dir + "/bad.safetensors[g]: entry [3, 7] = 0.25 is not < 0"}));
  // Truncated container and unknown kinds of path.
  write_tensor_set(dir + "/t.npz", good);
  const std::string z = read_bytes(dir + "/t.npz");
  write_bytes(dir + "/t.npz", z.substr(0, z.size() / 2));
  EXPECT_TRUE(usage_error([&] { load_tensor_set(dir + "/t.npz"); }, {"inputs " + dir + "/t.npz", "truncated"}));
  EXPECT_TRUE(usage_error([&] { load_tensor_set(dir + "/nothing.npz"); }, {"nothing.npz", "no such file"}));
  write_bytes(dir + "/x.pt", "x");
  EXPECT_TRUE(usage_error([&] { load_tensor_set(dir + "/x.pt"); }, {"x.pt", "not a directory of .npy files, an .npz or a .safetensors"}));
  // A sample beyond the set.
  EXPECT_TRUE(usage_error([&] { load_tensor_set(d).sample(6); }, {"sample 6", "holds 6"}));
}

// ---------------------------------------------------------------------------
// The file family

TEST(FileFamily, ServesTheSamplesOfItsSet) {
  const auto want = some_samples(7, 12, 5);
  const std::string p = temp_dir() + "/set.npz";
  write_tensor_set(p, want);
  const Family& f = find_family("file");
  Configuration c;
  c.family = "file";
  c.params["inputs"] = p;
  f.complete(c);
  f.validate(c);
  EXPECT_EQ(c.chunk, 12);
  EXPECT_EQ(c.dim, 5);
  EXPECT_EQ(f.available_samples(c), std::optional<uint64_t>(7));
  for (uint64_t i = 0; i < 7; ++i) {
    const Sample s = f.make(c, /*seed=*/12345 + i, i);  // the seed is not used
    EXPECT_EQ(s.keys, want[i].keys);
    EXPECT_EQ(s.g, want[i].g);
    EXPECT_EQ(s.beta, want[i].beta);
  }
  EXPECT_TRUE(usage_error([&] { f.make(c, 0, 7); }, {"inputs " + p, "sample 7"}));
  Configuration none;
  none.family = "file";
  none.params["inputs"] = nullptr;
  EXPECT_TRUE(usage_error([&] { f.complete(none); }, {"family file", "inputs=PATH"}));
  Configuration wrong = c;
  wrong.chunk = 16;
  EXPECT_TRUE(usage_error([&] { f.validate(wrong); }, {"C = 12", "C = 16"}));
}

// ---------------------------------------------------------------------------
// Real gates

TEST(RealGates, DataMatchesItsReadme) {
  struct Fact {
    const char* model;
    int heads;
    double g_min, share_below_5, worst_16_sum;
  };
  // data/gdn-gates/README.md: g range, share of g < -5, most negative
  // 16-token sum of g over the per-head chunks.
  for (const Fact& f : {Fact{"Qwen3-Next", 8, -166.7, 0.25, -2652}, Fact{"Qwen3.5-0.8B", 16, -10.9, 0.021, -83}}) {
    const GateData& d = real_gate_data(f.model);
    EXPECT_EQ(d.tokens, 8192);
    EXPECT_EQ(d.heads, f.heads);
    EXPECT_EQ(d.cu_seqlens.size(), 9u);
    double lo = 0, hi = -INFINITY;
    size_t below = 0;
    for (double g : d.g) {
      lo = std::min(lo, g);
      hi = std::max(hi, g);
      below += g < -5;
    }
    EXPECT_NEAR(lo, f.g_min, 0.05) << f.model;
    EXPECT_LE(hi, 0.0) << f.model;
    EXPECT_GT(hi, -1e-6) << f.model;
    EXPECT_NEAR(static_cast<double>(below) / d.g.size(), f.share_below_5, 0.0006) << f.model;
    double worst = 0;
    for (const GateChunk& ch : real_gate_chunks(d, 16)) {
      double sum = 0;
      for (int t = 0; t < 16; ++t) sum += d.gate(ch.first + t, ch.head);
      worst = std::min(worst, sum);
    }
    EXPECT_NEAR(worst, f.worst_16_sum, 0.5) << f.model;
  }
}

TEST(RealGates, ChunksNeverCrossASequence) {
  const GateData& d = real_gate_data("Qwen3-Next");
  for (int c : {2, 7, 16, 48, 64}) {
    const auto chunks = real_gate_chunks(d, c);
    size_t expected = 0;
    for (size_t s = 0; s + 1 < d.cu_seqlens.size(); ++s) expected += (d.cu_seqlens[s + 1] - d.cu_seqlens[s]) / c * d.heads;
    EXPECT_EQ(chunks.size(), expected) << "C=" << c;
    std::set<std::tuple<int, int>> seen;
    for (size_t i = 0; i < chunks.size(); ++i) {
      const GateChunk& ch = chunks[i];
      EXPECT_GE(ch.first, d.cu_seqlens[ch.sequence]);
      EXPECT_LE(ch.first + c, d.cu_seqlens[ch.sequence + 1]) << "C=" << c << " chunk " << i << " crosses";
      EXPECT_EQ((ch.first - d.cu_seqlens[ch.sequence]) % c, 0);
      EXPECT_TRUE(seen.insert({ch.first, ch.head}).second);
      if (i > 0) {
        EXPECT_EQ(ch.head, (chunks[i - 1].head + 1) % d.heads);  // head fastest
      }
    }
  }
  // An uneven split: sequences of 1024 tokens hold 21 chunks of 48 (16 tokens dropped each).
  EXPECT_EQ(real_gate_chunks(d, 48).size(), 8u * 21 * 8);
}

TEST(RealGates, FamilyTakesGatesFromTheDataAndWraps) {
  const Family& f = find_family("real_gates");
  Configuration c;
  c.family = "real_gates";
  c.chunk = 16;
  c.dim = 32;
  c.params = {{"model", "Qwen3-Next"}, {"decay_floor", nullptr}};
  f.validate(c);
  const GateData& d = real_gate_data("Qwen3-Next");
  const auto chunks = real_gate_chunks(d, 16);
  EXPECT_EQ(chunks.size(), 4096u);
  for (uint64_t i : {0ull, 1ull, 9ull, 4095ull}) {
    const Sample s = f.make(c, 7, i);
    const GateChunk& ch = chunks[i];
    for (int t = 0; t < 16; ++t) {
      EXPECT_EQ(s.g[t], d.gate(ch.first + t, ch.head));
      EXPECT_EQ(s.beta[t], d.beta_at(ch.first + t, ch.head));
    }
    // Keys: random normalised BF16 rows.
    for (int r = 0; r < 16; ++r) {
      double n2 = 0;
      for (int k = 0; k < 32; ++k) {
        EXPECT_EQ(s.key(r, k), bf16(s.key(r, k)));
        n2 += s.key(r, k) * s.key(r, k);
      }
      EXPECT_NEAR(n2, 1.0, 0.02);
    }
  }
  // Sample 4096 + i reuses chunk i's gates with fresh keys.
  const Sample a = f.make(c, 7, 5), b = f.make(c, 7, 4096 + 5);
  EXPECT_EQ(a.g, b.g);
  EXPECT_EQ(a.beta, b.beta);
  EXPECT_NE(a.keys, b.keys);
  EXPECT_EQ(f.available_samples(c), std::nullopt);
  // Same seed and index, same sample.
  EXPECT_EQ(f.make(c, 7, 5).keys, a.keys);
  // The clamp.
  c.params["decay_floor"] = -5.0;
  f.validate(c);
  size_t clamped = 0;
  for (uint64_t i = 0; i < 64; ++i) {
    const Sample s = f.make(c, 7, i);
    for (int t = 0; t < 16; ++t) {
      const double raw = d.gate(chunks[i].first + t, chunks[i].head);
      EXPECT_EQ(s.g[t], std::max(raw, -5.0));
      clamped += raw < -5.0;
    }
  }
  EXPECT_GT(clamped, 0u);
  // Bad parameters.
  c.params["decay_floor"] = 0.5;
  EXPECT_TRUE(usage_error([&] { f.validate(c); }, {"decay_floor = 0.5", "< 0"}));
  c.params["decay_floor"] = nullptr;
  c.params["model"] = "Qwen3-next";
  EXPECT_TRUE(usage_error([&] { f.validate(c); }, {"model = \"Qwen3-next\"", "did you mean \"Qwen3-Next\""}));
}

// ---------------------------------------------------------------------------
// Imported samples run exactly like the family they came from.

TEST(FileFamily, ExportedSamplesGiveTheGeneratedFamilysMetrics) {
  Configuration gen;
  gen.family = "model_like";
  gen.chunk = 16;
  gen.dim = 64;
  gen.params = {{"decay_floor", -5.0}};
  const Family& model_like = find_family("model_like");
  model_like.validate(gen);
  const uint64_t n = 20, seed = 11;
  std::vector<Sample> samples;
  for (uint64_t i = 0; i < n; ++i) samples.push_back(model_like.make(gen, seed, i));

  RunOptions opt;
  opt.threads = 2;
  opt.per_sample = true;
  opt.batch = 7;  // batches that do not divide the count
  const std::vector<std::string> paths{"gold", "emulated"};
  const auto want = run_experiment({gen}, paths, n, seed, opt);
  ASSERT_EQ(want.size(), 2u);
  // Not a trivial comparison: the errors differ between samples.
  const auto& errs = want[1].per_sample.at("inv_total_rel_rmse");
  EXPECT_GT(*std::max_element(errs.begin(), errs.end()), *std::min_element(errs.begin(), errs.end()));
  EXPECT_GT(errs[0], 0.0);

  const std::string dir = temp_dir();
  for (const std::string& p : {dir + "/set", dir + "/set.npz", dir + "/set.safetensors"}) {
    write_tensor_set(p, samples);
    ExperimentSpec spec;
    spec.grids.push_back({{"family", "file"}, {"inputs", p}});
    const auto configs = expand(spec);
    ASSERT_EQ(configs.size(), 1u);
    EXPECT_EQ(configs[0].chunk, 16);
    EXPECT_EQ(configs[0].dim, 64);
    opt.batch = 3;
    const auto got = run_experiment(configs, paths, n, /*seed, unused by file=*/999, opt);
    ASSERT_EQ(got.size(), want.size());
    for (size_t e = 0; e < want.size(); ++e) {
      EXPECT_EQ(got[e].axes["path"], want[e].axes["path"]);
      EXPECT_EQ(got[e].axes["inputs"], p);
      ASSERT_EQ(got[e].metrics.size(), want[e].metrics.size());
      for (const auto& [name, stats] : want[e].metrics)
        EXPECT_EQ(stats_to_json(got[e].metrics.at(name)), stats_to_json(stats)) << p << " " << name;
      for (const auto& [name, values] : want[e].per_sample) {
        const auto& g = got[e].per_sample.at(name);
        ASSERT_EQ(g.size(), values.size());
        for (size_t i = 0; i < values.size(); ++i) EXPECT_TRUE(same(g[i], values[i])) << p << " " << name << " sample " << i;
      }
    }
    // More samples than the file holds: refused, not wrapped.
    EXPECT_TRUE(usage_error([&] { run_experiment(configs, paths, n + 1, 0, opt); }, {"holds 20 samples"}));
  }
}

// ---------------------------------------------------------------------------
// Damaged files: every truncation and many byte changes of a valid file give
// a UsageError or a valid read, never another exception or a crash.

TEST(TensorIo, DamagedFilesNeverCrash) {
  const std::string dir = temp_dir();
  const auto samples = some_samples(3, 4, 5);
  write_tensor_set(dir + "/s.npz", samples);
  write_tensor_set(dir + "/s.safetensors", samples);
  write_tensor_set(dir + "/d", samples);
  struct Case {
    std::string file;
    std::function<void(const std::string&)> read;
  };
  const std::vector<Case> cases{
      {dir + "/s.npz", [](const std::string& f) { read_npz(f); }},
      {dir + "/s.safetensors", [](const std::string& f) { read_safetensors(f); }},
      {dir + "/d/g.npy", [](const std::string& f) { read_npy(f); }},
      {std::string(kPythonNpz, kPythonNpz + sizeof(kPythonNpz)), [](const std::string& f) { read_npz(f); }},
  };
  uint64_t state = 12345, usage_errors = 0, reads = 0;
  auto next = [&] { return state = state * 6364136223846793005ull + 1442695040888963407ull, state >> 33; };
  for (size_t c = 0; c < cases.size(); ++c) {
    const std::string good = c == 3 ? cases[c].file : read_bytes(cases[c].file);
    const std::string f = dir + "/damaged" + std::to_string(c) + (c == 1 ? ".safetensors" : c == 2 ? ".npy" : ".npz");
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
      write_bytes(f, v);
      try {
        cases[c].read(f);
        ++reads;
      } catch (const UsageError& e) {
        ++usage_errors;
        ASSERT_NE(std::string(e.what()).find(f), std::string::npos) << e.what();
      } catch (const std::exception& e) {
        FAIL() << "case " << c << ": not a UsageError: " << e.what();
      }
    }
  }
  EXPECT_GT(usage_errors, 1000u);
  EXPECT_GT(reads, 0u);
}
