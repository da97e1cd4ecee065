// .npz (ZIP) archives: round trips, an archive written by Python's zipfile,
// and hostile archives: records pointing past the end, ZIP64 records in
// short files, zip bombs, duplicate and overlapping members.
#include <gtest/gtest.h>

#include <string>

#include "helpers.hpp"
#include "io/npy.hpp"
#include "io/zip.hpp"

using namespace chunkinv;
using namespace chunkinv::testing;

namespace {

// A stored member holding a small valid .npy.
RawMember npy_member(const std::string& name, double value = -1.0) {
  RawMember m;
  m.name = name;
  m.data = npy_bytes(Tensor{DType::kF64, {2}, {value, value}});
  m.crc = crc32_of(m.data);
  return m;
}

// A deflated member of `n` zero bytes, declaring `declared` (default: n).
RawMember zeros_member(const std::string& name, uint64_t n, std::optional<uint64_t> declared = std::nullopt) {
  RawMember m;
  m.name = name;
  m.method = 8;
  m.data = deflate_zeros(n);
  m.crc = crc32_of(std::string(n, '\0'));
  m.usize = declared.value_or(n);
  m.zip64 = m.usize > 0xFFFFFFFEu;
  return m;
}

// The end record and ZIP64 locator alone: 42 bytes (after `prefix`)
// claiming a ZIP64 end record at `z64`.
std::string short_zip64(uint64_t z64, const std::string& prefix = "") {
  std::string z = prefix;
  put32(z, 0x07064b50u);
  put32(z, 0);
  put64(z, z64);
  put32(z, 1);
  put32(z, 0x06054b50u);
  put16(z, 0);
  put16(z, 0);
  put16(z, 0xFFFF);
  put16(z, 0xFFFF);
  put32(z, 0xFFFFFFFFu);
  put32(z, 0xFFFFFFFFu);
  put16(z, 0);
  return z;
}

}  // namespace

TEST(Npz, RoundTripEveryDtype) {
  const std::string f = temp_dir() + "/all.npz";
  TensorMap m;
  for (DType t : kAllTypes) m[dtype_name(t)] = tensor_of(t);
  write_npz(f, m);
  const TensorMap got = read_npz(f);
  ASSERT_EQ(got.size(), m.size());
  for (DType t : kAllTypes) expect_same_tensor(got.at(dtype_name(t)), m[dtype_name(t)], t == DType::kBF16 ? DType::kU16 : t);
}

TEST(Npz, ReadsPythonZipfileNpz) {
  const std::string f = temp_dir() + "/py.npz";
  write_bytes(f, python_npz());
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
}

TEST(Npz, HandMadeArchivesRead) {
  // The test's own archive builder, as the hostile cases below use it: plain,
  // with ZIP64 extra fields and end record, and deflated.
  EXPECT_EQ(parse_npz(zip_archive({npy_member("g.npy"), npy_member("beta.npy", 0.5)}), "a.npz").size(), 2u);
  RawMember z64 = npy_member("g.npy");
  z64.zip64 = true;
  EXPECT_EQ(parse_npz(zip_archive({z64}, /*zip64_end=*/true), "b.npz").at("g").values, (std::vector<double>{-1, -1}));
  if (zlib_available()) {
    RawMember d = npy_member("g.npy", -3.0);
    const uint64_t npy_size = d.data.size();
    d.method = 8;
    d.data = deflate_stored(d.data);
    d.usize = npy_size;
    EXPECT_EQ(parse_npz(zip_archive({d}), "d.npz").at("g").values, (std::vector<double>{-3, -3}));
    const ZipMember m = zip_directory(zip_archive({zeros_member("z", 100000)}), "c.npz").at(0);
    EXPECT_EQ(zip_extract(zip_archive({zeros_member("z", 100000)}), m, "c.npz"), std::string(100000, '\0'));
  }
}

TEST(Npz, MalformedArchivesNameTheCulprit) {
  const std::string dir = temp_dir();
  const Tensor t{DType::kF32, {4, 4}, std::vector<double>(16, -1.0)};
  // Truncated: the end of the central directory is gone.
  write_npz(dir + "/x.npz", {{"g", t}});
  const std::string z = read_bytes(dir + "/x.npz");
  write_bytes(dir + "/cut.npz", z.substr(0, z.size() - 30));
  EXPECT_TRUE(usage_error([&] { read_npz(dir + "/cut.npz"); }, {"cut.npz", "truncated"}));
  // A flipped data byte: the CRC catches it.
  std::string flip = z;
  flip[z.find("NUMPY") + 100] ^= 1;
  write_bytes(dir + "/flip.npz", flip);
  EXPECT_TRUE(usage_error([&] { read_npz(dir + "/flip.npz"); }, {"flip.npz[g.npy]", "CRC"}));
}

TEST(Npz, Zip64RecordsPastTheEndOfAShortFile) {
  // Once a segfault (an offset far past the end) and a heap overflow (an
  // offset that fits in 32 bits, in a file shorter than the record).
  EXPECT_TRUE(usage_error([&] { parse_npz(short_zip64(uint64_t{1} << 40), "far.npz"); },
                          {"far.npz: not a valid .npz (zip) file: ZIP64 end record at byte 1099511627776 does not fit in "
                           "the file (42 bytes; truncated?)"}));
  EXPECT_TRUE(usage_error([&] { parse_npz(short_zip64(10), "near.npz"); },
                          {"near.npz", "ZIP64 end record at byte 10 does not fit in the file (42 bytes"}));
  EXPECT_TRUE(usage_error([&] { parse_npz(short_zip64(40), "edge.npz"); },
                          {"edge.npz", "ZIP64 end record at byte 40 does not fit in the file (42 bytes"}));
  // A true ZIP64 signature at byte 0 of a file too short for the record.
  std::string sig;
  put32(sig, 0x06064b50u);
  EXPECT_TRUE(usage_error([&] { parse_npz(short_zip64(0, sig), "sig.npz"); },
                          {"sig.npz", "ZIP64 end record at byte 0 does not fit in the file (46 bytes"}));
  EXPECT_TRUE(usage_error([&] { parse_npz(short_zip64(UINT64_MAX - 8), "wrap.npz"); }, {"wrap.npz", "ZIP64 end record"}));
  // The ZIP64 extra field of a member: a local header offset far past the end.
  for (uint64_t offset : {uint64_t{1} << 50, UINT64_MAX - 10, uint64_t{200}}) {
    RawMember m = npy_member("g.npy");
    m.zip64 = true;
    m.offset = offset;
    EXPECT_TRUE(usage_error([&] { parse_npz(zip_archive({m}, true), "x.npz"); },
                            {"x.npz[g.npy]: no local header at byte " + std::to_string(offset)}));
  }
  // ... and a compressed size that runs past the end.
  RawMember m = npy_member("g.npy");
  m.zip64 = true;
  m.csize = m.usize = UINT64_MAX - 40;
  EXPECT_TRUE(usage_error([&] { parse_npz(zip_archive({m}, true), "y.npz"); }, {"y.npz[g.npy]: data of", "lies beyond the end"}));
  // A ZIP64 end record claiming more entries than its directory can hold.
  std::string many = zip_archive({npy_member("g.npy")}, true);
  const size_t at = many.find(std::string("\x50\x4b\x06\x06", 4)) + 24;
  for (int i = 0; i < 8; ++i) many[at + i] = many[at + 8 + i] = '\x7f';
  EXPECT_TRUE(usage_error([&] { parse_npz(many, "many.npz"); }, {"many.npz", "cannot hold", "entries"}));
}

TEST(Npz, ZipBombsAreRefusedBeforeInflating) {
  // Declared: 5 GiB from a file of kilobytes. Refused on the declaration.
  EXPECT_TRUE(usage_error([&] { parse_npz(zip_archive({zeros_member("g.npy", 1000, uint64_t{5} << 30)}, true), "bomb.npz"); },
                          {"bomb.npz[g.npy]: declared size of 5368709120 bytes exceeds the 4 GiB limit on decompressed tensor "
                           "data; raise it with CHUNKINV_MAX_TENSOR_BYTES"}));
  // Several members under the limit each, over it together.
  std::vector<RawMember> parts;
  for (const char* n : {"a", "b", "c"}) parts.push_back(zeros_member(n, 1000, uint64_t{3} << 29));
  EXPECT_TRUE(usage_error([&] { parse_npz(zip_archive(parts), "sum.npz"); },
                          {"sum.npz[c]: declared size of 1610612736 bytes (after 3221225472 bytes in the members before it) "
                           "exceeds the 4 GiB limit"}));
  if (!zlib_available()) return;
  // A member that inflates to far more than it declares: stopped at the
  // declared size, not inflated to the end.
  const std::string lie = zip_archive({zeros_member("g.npy", 64 << 20, 4096)});
  EXPECT_LT(lie.size(), 500000u);
  EXPECT_TRUE(usage_error([&] { zip_extract(lie, zip_directory(lie, "lie.npz").at(0), "lie.npz"); },
                          {"lie.npz[g.npy]: deflated data inflates to more than the 4096 bytes declared"}));
  // ... or to less.
  const std::string less = zip_archive({zeros_member("g.npy", 4000, 4096)});
  EXPECT_TRUE(usage_error([&] { zip_extract(less, zip_directory(less, "less.npz").at(0), "less.npz"); },
                          {"less.npz[g.npy]: deflated data inflates to 4000 bytes, not the 4096 declared"}));
  // The limit moves with the variable: a true 64 MiB member under a 16 MiB limit.
  ScopedEnv env("CHUNKINV_MAX_TENSOR_BYTES", "16M");
  EXPECT_TRUE(usage_error([&] { parse_npz(zip_archive({zeros_member("g.npy", 64 << 20)}), "big.npz"); },
                          {"big.npz[g.npy]: declared size of 67108864 bytes exceeds the 16 MiB limit"}));
}

TEST(Npz, DuplicateAndOverlappingMembersAreRefused) {
  EXPECT_TRUE(usage_error([&] { parse_npz(zip_archive({npy_member("g.npy"), npy_member("g.npy", -2.0)}), "dup.npz"); },
                          {"dup.npz[g.npy]: the archive holds two members of this name"}));
  EXPECT_TRUE(usage_error([&] { parse_npz(zip_archive({npy_member("g.npy"), npy_member("g", -2.0)}), "two.npz"); },
                          {"two.npz[g]: tensor 'g' is also given by member g.npy"}));
  // Two names for the same bytes: how a small archive claims its size many times.
  RawMember b = npy_member("beta.npy");
  RawMember g = npy_member("g.npy");
  g.local_at = 0;
  EXPECT_TRUE(usage_error([&] { parse_npz(zip_archive({b, g}), "over.npz"); }, {"over.npz[", "overlaps the member"}));
}

TEST(Npz, DamagedFilesNeverCrash) {
  const std::string dir = temp_dir();
  TensorMap m{{"keys", tensor_of(DType::kBF16)}, {"g", tensor_of(DType::kF64)}};
  EXPECT_GT(damage(npz_bytes(m, "x"), dir + "/damaged.npz", [](const std::string& f) { read_npz(f); }), 500u);
  EXPECT_GT(damage(python_npz(), dir + "/damaged-py.npz", [](const std::string& f) { read_npz(f); }), 500u);
  RawMember z64 = npy_member("g.npy");
  z64.zip64 = true;
  EXPECT_GT(damage(zip_archive({z64}, true), dir + "/damaged-z64.npz", [](const std::string& f) { read_npz(f); }), 500u);
}
