// .npy files and the bounded file reader under them: round trips of every
// dtype, files written by NumPy, Fortran order, and every malformed or
// hostile input named in a one-line error.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "helpers.hpp"
#include "io/npy.hpp"

using namespace chunkinv;
using namespace chunkinv::testing;
namespace fs = std::filesystem;

namespace {

// A .npy of header dict `dict` (v1, padded as NumPy pads) and `data` bytes.
std::string npy_with_header(const std::string& dict, const std::string& data = std::string(64, '\0')) {
  std::string h = dict;
  h.append((64 - (10 + h.size() + 1) % 64) % 64, ' ');
  h.push_back('\n');
  std::string b("\x93NUMPY\x01\x00", 8);
  b.push_back(static_cast<char>(h.size() & 0xFF));
  b.push_back(static_cast<char>(h.size() >> 8));
  return b + h + data;
}

}  // namespace

TEST(Npy, RoundTripEveryDtype) {
  const std::string dir = temp_dir();
  for (DType t : kAllTypes) {
    const Tensor want = tensor_of(t);
    const std::string f = dir + "/" + dtype_name(t) + ".npy";
    write_npy(f, want);
    expect_same_tensor(read_npy(f), want, t == DType::kBF16 ? DType::kU16 : t);
  }
}

TEST(Npy, ReadsNumpyWrittenGates) {
  // Files written by NumPy itself (header v1, <f4 and <i4).
  const std::string dir = std::string(CHUNKINV_SHARED_DATA) + "/gdn-gates/Qwen3-Next/";
  const Tensor g = read_npy(dir + "g.npy");
  EXPECT_EQ(g.dtype, DType::kF32);
  EXPECT_EQ(g.shape, (std::vector<int64_t>{1, 8192, 8}));
  const Tensor cu = read_npy(dir + "cu_seqlens.npy");
  EXPECT_EQ(cu.dtype, DType::kI32);
  EXPECT_EQ(cu.values, (std::vector<double>{0, 1024, 2048, 3072, 4096, 5120, 6144, 7168, 8192}));
}

TEST(Npy, FortranOrderIsReordered) {
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

TEST(Npy, MalformedFilesNameTheCulprit) {
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
  EXPECT_TRUE(usage_error([&] { parse_npy(npy_with_header("{'descr': '<f4', 'fortran_order': 1, 'shape': (4,), }"), "fo.npy"); },
                          {"fo.npy", "fortran_order"}));
  EXPECT_TRUE(usage_error([&] { parse_npy(npy_with_header("{'descr': '<f4', 'shape': 4, }"), "s.npy"); }, {"s.npy", "malformed shape"}));
}

TEST(Npy, HostileHeadersAreRefusedBeforeAllocating) {
  // A shape whose byte count wraps around 2^64 (here to 0).
  EXPECT_TRUE(usage_error(
      [&] { parse_npy(npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4), }"), "wrap.npy"); },
      {"wrap.npy: malformed shape (4611686018427387904, 4) of f32: more than 2^64 bytes"}));
  // Negative dimensions; a rank no array has.
  EXPECT_TRUE(usage_error([&] { parse_npy(npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }"), "neg.npy"); },
                          {"neg.npy: malformed shape (2, -3): dimension -3 is negative"}));
  std::string rank = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  for (int i = 0; i < 65; ++i) rank += "1, ";
  rank += "), }";
  EXPECT_TRUE(usage_error([&] { parse_npy(npy_with_header(rank), "rank.npy"); }, {"rank.npy", "rank 65 exceeds 64"}));
  // Nesting deep enough to exhaust a stack.
  EXPECT_TRUE(usage_error([&] { parse_npy(npy_with_header("{'descr': '<f4', 'shape': " + std::string(60000, '(')), "deep.npy"); },
                          {"deep.npy", "nested too deeply"}));
  // Integers beyond 64 bits.
  EXPECT_TRUE(usage_error(
      [&] { parse_npy(npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }"), "big.npy"); },
      {"big.npy", "bad integer '99999999999999999999'"}));
  // A header length (v2: 32 bits) beyond any real header.
  std::string v2("\x93NUMPY\x02\x00", 8);
  store_le<uint32_t>(v2, 2u << 20);
  v2 += "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }";
  v2.append((2u << 20) - (v2.size() - 12) - 1, ' ');
  v2 += "\n";
  v2 += std::string(4, '\0');
  EXPECT_TRUE(usage_error([&] { parse_npy(v2, "long.npy"); }, {"long.npy: .npy header of 2097152 bytes is longer than the 1 MiB allowed"}));
}

TEST(Npy, TrailingBytesInTheHeaderAreRefused) {
  // NumPy pads the dict with spaces and ends it with '\n'; a NUL or other
  // text after the dict is no .npy header.
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }";
  EXPECT_TRUE(usage_error([&] { parse_npy(npy_with_header(dict + std::string(3, '\0')), "nul.npy"); },
                          {"nul.npy: malformed .npy header (unexpected text after the dict at character"}));
  EXPECT_TRUE(usage_error([&] { parse_npy(npy_with_header(dict + " x"), "junk.npy"); },
                          {"junk.npy", "unexpected text after the dict"}));
  EXPECT_TRUE(usage_error([&] { parse_npy(npy_with_header("{'descr': '<f4', 'fortran_order': False, \x01 'shape': (4,), }"), "ctl.npy"); },
                          {"ctl.npy", "unexpected character '\\x01'"}));
  // The same dict with its padding reads.
  EXPECT_EQ(parse_npy(npy_with_header(dict), "ok.npy").shape, (std::vector<int64_t>{4}));
}

TEST(Npy, OnlyRegularFilesAreRead) {
  const std::string dir = temp_dir();
  // A link to an endless device: refused before a byte is read.
  fs::create_symlink("/dev/zero", dir + "/zero.npy");
  EXPECT_TRUE(usage_error([&] { read_npy(dir + "/zero.npy"); },
                          {dir + "/zero.npy: is a character device (a link to /dev/zero), not a regular file"}));
  // A FIFO without a writer: refused, not waited on.
  ASSERT_EQ(::mkfifo((dir + "/fifo.npy").c_str(), 0600), 0);
  EXPECT_TRUE(usage_error([&] { read_npy(dir + "/fifo.npy"); }, {dir + "/fifo.npy: is a FIFO, not a regular file"}));
  fs::create_directory(dir + "/d.npy");
  EXPECT_TRUE(usage_error([&] { read_npy(dir + "/d.npy"); }, {dir + "/d.npy: is a directory, not a file"}));
  fs::create_symlink(dir + "/gone", dir + "/dangling.npy");
  EXPECT_TRUE(usage_error([&] { read_npy(dir + "/dangling.npy"); }, {dir + "/dangling.npy: no such file"}));
}

TEST(Npy, FilesBeyondTheLimitAreRefusedBeforeReading) {
  const std::string dir = temp_dir();
  // 5 GiB, sparse: the size alone refuses it.
  const std::string huge = dir + "/huge.npy";
  write_bytes(huge, npy_bytes(Tensor{DType::kF32, {1}, {1.0}}));
  fs::resize_file(huge, uint64_t{5} << 30);
  EXPECT_TRUE(usage_error([&] { read_npy(huge); },
                          {huge + ": file of 5368709120 bytes exceeds the 4 GiB limit on tensor files; raise it with "
                                  "CHUNKINV_MAX_TENSOR_BYTES"}));
  // The limit moves with the variable.
  const std::string f = dir + "/f.npy";
  write_npy(f, Tensor{DType::kF64, {300}, std::vector<double>(300, 0.5)});
  {
    ScopedEnv env("CHUNKINV_MAX_TENSOR_BYTES", "2K");
    EXPECT_TRUE(usage_error([&] { read_npy(f); }, {f + ": file of 2528 bytes exceeds the 2 KiB limit", "CHUNKINV_MAX_TENSOR_BYTES"}));
  }
  {
    ScopedEnv env("CHUNKINV_MAX_TENSOR_BYTES", "3kib");
    EXPECT_EQ(read_npy(f).values.size(), 300u);
  }
  {
    ScopedEnv env("CHUNKINV_MAX_TENSOR_BYTES", "lots");
    EXPECT_TRUE(usage_error([&] { read_npy(f); }, {"CHUNKINV_MAX_TENSOR_BYTES lots: not a size"}));
  }
  EXPECT_EQ(max_tensor_bytes(), uint64_t{4} << 30);
}

TEST(Npy, DamagedFilesNeverCrash) {
  const std::string dir = temp_dir();
  Tensor t{DType::kF64, {3, 4}, {}};
  for (int i = 0; i < 12; ++i) t.values.push_back(-0.5 * i);
  EXPECT_GT(damage(npy_bytes(t), dir + "/damaged.npy", [](const std::string& f) { read_npy(f); }), 500u);
}
