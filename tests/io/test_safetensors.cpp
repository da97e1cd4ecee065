// .safetensors: round trips, a file built from the format's specification,
// and hostile headers: duplicate keys, overlapping, reversed, gapped or
// out-of-file offsets, deep nesting, bytes after the JSON, absurd shapes.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "helpers.hpp"
#include "io/safetensors.hpp"

using namespace chunkinv;
using namespace chunkinv::testing;

namespace {

// A file of header `json` (taken as it is: no padding) and `data`.
std::string safetensors_of(const std::string& json, const std::string& data) {
  std::string b;
  store_le<uint64_t>(b, json.size());
  return b + json + data;
}

// Two F32 tensors of one element each: a at [0, 4], b at [4, 8].
const std::string kTwo = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
const std::string kData(8, '\0');

}  // namespace

TEST(Safetensors, RoundTripEveryDtype) {
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

TEST(Safetensors, WritersRoundToTheDtype) {
  // 1 + 2^-8 is halfway between two BF16 values: nearest even is 1.
  Tensor t{DType::kBF16, {3}, {1.0 + 0x1p-8, 1.0 + 3 * 0x1p-8, 0.1}};
  const std::string f = temp_dir() + "/r.safetensors";
  write_safetensors(f, {{"x", t}});
  const Tensor got = read_safetensors(f).at("x");
  EXPECT_EQ(got.values[0], 1.0);
  EXPECT_EQ(got.values[1], 1.0 + 0x1p-6);
  EXPECT_EQ(got.values[2], bf16(0.1));
}

TEST(Safetensors, ReadsHandBuiltFile) {
  // The format from its specification: u64 header length, JSON, raw data.
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"w":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]},)"
      R"("v":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
  const std::string f = temp_dir() + "/hand.safetensors";
  write_bytes(f, safetensors_of(header + "   ", std::string("\x80\x3f\x20\xc0", 4) + std::string("\x00\x00\x40\x40", 4)));
  const TensorMap m = read_safetensors(f);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m.at("w").dtype, DType::kBF16);
  EXPECT_EQ(m.at("w").values, (std::vector<double>{1.0, -2.5}));
  EXPECT_EQ(m.at("v").values, (std::vector<double>{3.0}));
  // Empty tensors take no bytes, wherever they sit.
  const TensorMap e = parse_safetensors(
      safetensors_of(R"({"e":{"dtype":"F64","shape":[0,3],"data_offsets":[4,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                     R"("z":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}})",
                     std::string(4, '\0')),
      "e.safetensors");
  EXPECT_EQ(e.at("e").shape, (std::vector<int64_t>{0, 3}));
  EXPECT_TRUE(e.at("e").values.empty());
}

TEST(Safetensors, MalformedFilesNameTheCulprit) {
  const std::string dir = temp_dir();
  const Tensor t{DType::kF32, {4, 4}, std::vector<double>(16, -1.0)};
  // Truncated: in the data, and in the header.
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

TEST(Safetensors, DuplicateKeysAreRefused) {
  // A JSON parser keeps the last of two equal keys; two readers could see
  // two different tensors in one file.
  const std::string dup =
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
  EXPECT_TRUE(usage_error([&] { parse_safetensors(safetensors_of(dup, kData), "dup.safetensors"); },
                          {"dup.safetensors[a]: tensor appears twice in the header"}));
  const std::string inner = R"({"a":{"dtype":"F32","shape":[1],"dtype":"F64","data_offsets":[0,4]}})";
  EXPECT_TRUE(usage_error([&] { parse_safetensors(safetensors_of(inner, std::string(4, '\0')), "in.safetensors"); },
                          {"in.safetensors: malformed .safetensors header (key 'dtype' appears twice in one object)"}));
  // The same key in different objects is fine.
  EXPECT_EQ(parse_safetensors(safetensors_of(kTwo, kData), "ok.safetensors").size(), 2u);
}

TEST(Safetensors, OffsetsMustTileTheData) {
  const auto two = [](const std::string& a, const std::string& b) {
    return R"({"a":{"dtype":"F32","shape":[1],"data_offsets":)" + a + R"(},"b":{"dtype":"F32","shape":[1],"data_offsets":)" +
           b + "}}";
  };
  EXPECT_TRUE(usage_error([&] { parse_safetensors(safetensors_of(two("[0,4]", "[2,6]"), kData), "o.safetensors"); },
                          {"o.safetensors[b]: data_offsets [2, 6] overlap tensor 'a' [0, 4]"}));
  EXPECT_TRUE(usage_error([&] { parse_safetensors(safetensors_of(two("[0,4]", "[0,4]"), std::string(4, '\0')), "s.safetensors"); },
                          {"s.safetensors[b]: data_offsets [0, 4] overlap tensor 'a' [0, 4]"}));
  EXPECT_TRUE(usage_error([&] { parse_safetensors(safetensors_of(two("[4,0]", "[4,8]"), kData), "r.safetensors"); },
                          {"r.safetensors[a]: data_offsets [4, 0] are out of order (begin after end)"}));
  EXPECT_TRUE(usage_error([&] { parse_safetensors(safetensors_of(two("[0,4]", "[8,12]"), std::string(12, '\0')), "g.safetensors"); },
                          {"g.safetensors[b]: data_offsets [8, 12] leave bytes [4, 8) of the data unused"}));
  EXPECT_TRUE(usage_error([&] { parse_safetensors(safetensors_of(kTwo, kData + "xyz"), "t.safetensors"); },
                          {"t.safetensors: 3 bytes after the last tensor's data (the tensors end at byte 8 of 11)"}));
  EXPECT_TRUE(usage_error([&] { parse_safetensors(safetensors_of(two("[0,4]", "[4,8]"), std::string(6, '\0')), "p.safetensors"); },
                          {"p.safetensors[b]: truncated: data ends at byte 8, the file holds 6"}));
  EXPECT_TRUE(usage_error(
      [&] { parse_safetensors(safetensors_of(two("[0,4]", "[18446744073709551612,18446744073709551616]"), kData), "w.safetensors"); },
      {"w.safetensors[b]: malformed data_offsets"}));
  EXPECT_TRUE(usage_error(
      [&] { parse_safetensors(safetensors_of(two("[0,4]", "[18446744073709551611,18446744073709551615]"), kData), "e.safetensors"); },
      {"e.safetensors[b]: truncated: data ends at byte 18446744073709551615"}));
  // A header length beyond the file (and one that wraps past it).
  std::string big;
  store_le<uint64_t>(big, 1000);
  big += "{}";
  EXPECT_TRUE(usage_error([&] { parse_safetensors(big, "h.safetensors"); },
                          {"h.safetensors: truncated: header length 1000 exceeds the file (10 bytes)"}));
  std::string huge;
  store_le<uint64_t>(huge, UINT64_MAX - 4);
  huge += "{}";
  EXPECT_TRUE(usage_error([&] { parse_safetensors(huge, "u.safetensors"); }, {"u.safetensors: truncated: header length"}));
}

TEST(Safetensors, AbsurdShapesAreRefusedBeforeAllocating) {
  const auto one = [](const std::string& shape, const std::string& offsets = "[0,4]") {
    return safetensors_of(R"({"a":{"dtype":"F32","shape":)" + shape + R"(,"data_offsets":)" + offsets + "}}", std::string(4, '\0'));
  };
  EXPECT_TRUE(usage_error([&] { parse_safetensors(one("[4294967296,4294967296]"), "o.safetensors"); },
                          {"o.safetensors[a]: malformed shape (4294967296, 4294967296) of f32: more than 2^64 bytes"}));
  EXPECT_TRUE(usage_error([&] { parse_safetensors(one("[1,-1]"), "n.safetensors"); },
                          {"n.safetensors[a]: malformed shape (1, -1): dimension -1 is negative"}));
  EXPECT_TRUE(usage_error([&] { parse_safetensors(one("[9223372036854775808]"), "l.safetensors"); },
                          {"l.safetensors[a]: malformed shape: dimension 9223372036854775808 is too large"}));
  std::string rank = "[1";
  for (int i = 0; i < 64; ++i) rank += ",1";
  rank += "]";
  EXPECT_TRUE(usage_error([&] { parse_safetensors(one(rank), "r.safetensors"); }, {"r.safetensors[a]: malformed shape: rank 65 exceeds 64"}));
  EXPECT_TRUE(usage_error([&] { parse_safetensors(one("[1.5]"), "f.safetensors"); }, {"f.safetensors[a]: malformed shape"}));
  // A count that fits but is not what the offsets hold.
  EXPECT_TRUE(usage_error([&] { parse_safetensors(one("[1000000000000]"), "c.safetensors"); },
                          {"c.safetensors[a]: data_offsets [0, 4] do not hold shape (1000000000000) of F32 (4000000000000 bytes)"}));
}

TEST(Safetensors, DeepNestingAndTrailingBytesAreRefused) {
  // Nesting is counted before the JSON parser runs.
  const std::string deep = R"({"__metadata__":)" + std::string(100000, '[') + std::string(100000, ']') + "}";
  EXPECT_TRUE(usage_error([&] { parse_safetensors(safetensors_of(deep, ""), "deep.safetensors"); },
                          {"deep.safetensors: malformed .safetensors header (JSON nested deeper than 64 at byte 87)"}));
  // 64 levels are still JSON (brackets inside strings do not count).
  const std::string ok = R"({"__metadata__":{"x":")" + std::string(200, '[') + R"(","m":)" + std::string(62, '[') +
                         std::string(62, ']') + "}}";
  EXPECT_TRUE(parse_safetensors(safetensors_of(ok, ""), "ok.safetensors").empty());
  // The header may be padded with spaces, nothing else: a JSON parser would
  // stop at a NUL and accept the rest silently.
  EXPECT_TRUE(usage_error([&] { parse_safetensors(safetensors_of(kTwo + std::string("\0\0", 2), kData), "nul.safetensors"); },
                          {"nul.safetensors: malformed .safetensors header (byte", "after the JSON is 0x00; only spaces may pad it)"}));
  EXPECT_TRUE(usage_error([&] { parse_safetensors(safetensors_of(kTwo + "  {}", kData), "two.safetensors"); },
                          {"two.safetensors", "after the JSON is '{'"}));
  EXPECT_TRUE(usage_error([&] { parse_safetensors(safetensors_of("[" + kTwo + "]", kData), "arr.safetensors"); },
                          {"arr.safetensors: malformed .safetensors header (does not start with '{')"}));
  EXPECT_TRUE(usage_error([&] { parse_safetensors(safetensors_of(R"({"a":1,)" + std::string(1, '\0') + "}", ""), "mid.safetensors"); },
                          {"mid.safetensors: malformed .safetensors JSON header"}));
  EXPECT_EQ(parse_safetensors(safetensors_of(kTwo + "    ", kData), "pad.safetensors").size(), 2u);
}

TEST(Safetensors, DamagedFilesNeverCrash) {
  const std::string dir = temp_dir();
  TensorMap m{{"keys", tensor_of(DType::kBF16)}, {"g", tensor_of(DType::kF64)}, {"b", tensor_of(DType::kU8)}};
  EXPECT_GT(damage(safetensors_bytes(m), dir + "/damaged.safetensors", [](const std::string& f) { read_safetensors(f); }), 500u);
}
