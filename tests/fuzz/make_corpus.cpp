// Writes the fuzzers' seed corpus: tests/fuzz/corpus/<target>/ gets a few
// valid files made by the project's own writers and the hostile cases the
// readers refuse (docs/inputs.md, "Limits and hostile files").
//
//   build-fuzz/fuzz_make_corpus tests/fuzz/corpus
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/fp.hpp"
#include "inputs/tensor_set.hpp"
#include "io/npy.hpp"
#include "io/safetensors.hpp"
#include "io/zip.hpp"
#include "../io/zip_builder.hpp"

using namespace chunkinv;
using namespace chunkinv::testing;
namespace fs = std::filesystem;

namespace {

fs::path root;

void put(const std::string& target, const std::string& name, const std::string& bytes) {
  fs::create_directories(root / target);
  std::ofstream(root / target / name, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A .npy of header dict `dict` (v1, padded as NumPy pads) and `data`.
std::string npy_with_header(const std::string& dict, const std::string& data) {
  std::string h = dict;
  h.append((64 - (10 + h.size() + 1) % 64) % 64, ' ');
  h.push_back('\n');
  std::string b("\x93NUMPY\x01\x00", 8);
  put16(b, h.size());
  return b + h + data;
}

std::string safetensors_of(const std::string& json, const std::string& data) {
  std::string b;
  put64(b, json.size());
  return b + json + data;
}

RawMember npy_member(const std::string& name, const Tensor& t) {
  RawMember m;
  m.name = name;
  m.data = npy_bytes(t);
  m.crc = crc32_of(m.data);
  return m;
}

std::vector<Sample> samples(int n, int c, int d) {
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

void npy_seeds() {
  put("npy", "f32_2x3.npy", npy_bytes(Tensor{DType::kF32, {2, 3}, {1, -2, 3.5, 0, -0.25, 1e30}}));
  put("npy", "bf16_bits.npy", npy_bytes(Tensor{DType::kBF16, {4}, {1, -2.5, 0x1p-130, INFINITY}}));
  put("npy", "i64_2x2x2.npy", npy_bytes(Tensor{DType::kI64, {2, 2, 2}, {0, 1, -1, 7, 8, 9, 10, -11}}));
  put("npy", "u8_scalar.npy", npy_bytes(Tensor{DType::kU8, {}, {200}}));
  const std::string f64(6 * 8, '\x01');
  put("npy", "fortran.npy", npy_with_header("{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3), }", f64));
  put("npy", "bfloat16_descr.npy", npy_with_header("{'descr': 'bfloat16', 'fortran_order': False, 'shape': (2,), }", "\x80\x3f\x20\xc0"));
  std::string v2("\x93NUMPY\x02\x00", 8), h2 = "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }\n";
  put32(v2, h2.size());
  put("npy", "v2.npy", v2 + h2 + std::string("\x00\x00\x80\x3f", 4));
  // Hostile.
  put("npy", "trailing_nul.npy", npy_with_header(std::string("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }") + '\0', "abcd"));
  put("npy", "negative_dim.npy", npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", ""));
  put("npy", "overflow_shape.npy",
      npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4), }", std::string(16, 0)));
  std::string rank = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  for (int i = 0; i < 65; ++i) rank += "1, ";
  put("npy", "rank65.npy", npy_with_header(rank + "), }", "abcd"));
  put("npy", "deep.npy", npy_with_header("{'descr': '<f4', 'shape': " + std::string(100, '('), ""));
  put("npy", "big_int.npy", npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", ""));
}

// The end record and ZIP64 locator alone (after `prefix`), claiming a ZIP64
// end record at `z64`.
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

void npz_seeds() {
  const Tensor g{DType::kF64, {2, 2}, {-1, -2, -3, -4}}, k{DType::kBF16, {2, 2, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}};
  put("npz", "stored.npz", npz_bytes({{"g", g}, {"keys", k}}, "seed"));
  put("npz", "python_zip64_deflated.npz", python_npz());
  RawMember z64 = npy_member("g.npy", g);
  z64.zip64 = true;
  put("npz", "zip64.npz", zip_archive({z64}, true));
  RawMember d = npy_member("g.npy", g);
  const uint64_t npy_size = d.data.size();
  d.method = 8;
  d.data = deflate_stored(d.data);
  d.usize = npy_size;
  put("npz", "deflated_stored_blocks.npz", zip_archive({d}));
  // Hostile.
  put("npz", "short_zip64_far.npz", short_zip64(uint64_t{1} << 40));
  put("npz", "short_zip64_near.npz", short_zip64(40));
  std::string sig;
  put32(sig, 0x06064b50u);
  put("npz", "short_zip64_record.npz", short_zip64(0, sig));
  RawMember far = npy_member("g.npy", g);
  far.zip64 = true;
  far.offset = uint64_t{1} << 50;
  put("npz", "zip64_extra_offset_past_end.npz", zip_archive({far}, true));
  RawMember bomb;
  bomb.name = "g.npy";
  bomb.method = 8;
  bomb.data = deflate_zeros(1000);
  bomb.crc = crc32_of(std::string(1000, '\0'));
  bomb.usize = uint64_t{5} << 30;
  bomb.zip64 = true;
  put("npz", "bomb_declared_5GiB.npz", zip_archive({bomb}, true));
  RawMember lie = bomb;
  lie.data = deflate_zeros(1 << 20);
  lie.crc = crc32_of(std::string(1 << 20, '\0'));
  lie.usize = 4096;
  lie.zip64 = false;
  put("npz", "bomb_inflates_past_declared.npz", zip_archive({lie}));
  put("npz", "duplicate_member.npz", zip_archive({npy_member("g.npy", g), npy_member("g.npy", g)}));
  put("npz", "duplicate_tensor.npz", zip_archive({npy_member("g.npy", g), npy_member("g", g)}));
  RawMember again = npy_member("beta.npy", g);
  again.local_at = 0;
  put("npz", "overlapping_members.npz", zip_archive({npy_member("g.npy", g), again}));
}

void safetensors_seeds() {
  TensorMap m{{"keys", Tensor{DType::kBF16, {1, 2, 2}, {1, 2, 3, 4}}},
              {"g", Tensor{DType::kF32, {1, 2}, {-1, -2}}},
              {"e", Tensor{DType::kF64, {0, 3}, {}}},
              {"i", Tensor{DType::kI32, {3}, {1, -2, 3}}}};
  put("safetensors", "valid.safetensors", safetensors_bytes(m));
  const std::string two = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
  put("safetensors", "padded_with_metadata.safetensors",
      safetensors_of(R"({"__metadata__":{"format":"pt"},)" + two.substr(1) + "    ", std::string(8, '\x3f')));
  // Hostile.
  const auto pair = [](const std::string& a, const std::string& b) {
    return R"({"a":{"dtype":"F32","shape":[1],"data_offsets":)" + a + R"(},"b":{"dtype":"F32","shape":[1],"data_offsets":)" + b + "}}";
  };
  const std::string eight(8, '\0');
  put("safetensors", "duplicate_key.safetensors",
      safetensors_of(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", eight));
  put("safetensors", "duplicate_inner_key.safetensors",
      safetensors_of(R"({"a":{"dtype":"F32","shape":[1],"dtype":"F64","data_offsets":[0,4]}})", std::string(4, '\0')));
  put("safetensors", "overlap.safetensors", safetensors_of(pair("[0,4]", "[2,6]"), eight));
  put("safetensors", "reversed.safetensors", safetensors_of(pair("[4,0]", "[4,8]"), eight));
  put("safetensors", "gap.safetensors", safetensors_of(pair("[0,4]", "[8,12]"), std::string(12, '\0')));
  put("safetensors", "tail.safetensors", safetensors_of(two, eight + "xyz"));
  put("safetensors", "past_end.safetensors", safetensors_of(pair("[0,4]", "[18446744073709551611,18446744073709551615]"), eight));
  std::string longer;
  put64(longer, 1000);
  put("safetensors", "header_longer_than_file.safetensors", longer + "{}");
  put("safetensors", "deep.safetensors", safetensors_of(R"({"__metadata__":)" + std::string(200, '[') + std::string(200, ']') + "}", ""));
  put("safetensors", "trailing_nul.safetensors", safetensors_of(two + std::string("\0\0", 2), eight));
  const auto one = [](const std::string& shape) {
    return safetensors_of(R"({"a":{"dtype":"F32","shape":)" + shape + R"(,"data_offsets":[0,4]}})", std::string(4, '\0'));
  };
  put("safetensors", "negative_dim.safetensors", one("[1,-1]"));
  put("safetensors", "overflow_shape.safetensors", one("[4294967296,4294967296]"));
  std::string rank = "[1";
  for (int i = 0; i < 64; ++i) rank += ",1";
  put("safetensors", "rank65.safetensors", one(rank + "]"));
}

void tensor_set_seeds() {
  const fs::path dir = root / "tensor_set";
  fs::create_directories(dir);
  const auto s = samples(2, 4, 3);
  write_tensor_set((dir / "set.npz").string(), s);
  write_tensor_set((dir / "set.safetensors").string(), s);
  write_tensor_set((dir / "set_f32.safetensors").string(), s, DType::kF32, DType::kF32);
  write_tensor_set((dir / "set_i16_keys.npz").string(), s, DType::kI16, DType::kF16);
  // Hostile: values out of range, a missing tensor, shapes that disagree,
  // a duplicate member.
  auto bad = s;
  bad[1].g[2] = 0.5;
  bad[0].beta[1] = 1.0;
  write_tensor_set((dir / "bad_values.safetensors").string(), bad);
  const Tensor g{DType::kF64, {2, 4}, std::vector<double>(8, -1.0)};
  const Tensor keys{DType::kBF16, {2, 4, 3}, std::vector<double>(24, 0.5)};
  const Tensor beta{DType::kF64, {2, 5}, std::vector<double>(10, 0.5)};
  put("tensor_set", "missing_beta.npz", npz_bytes({{"g", g}, {"keys", keys}}, "seed"));
  put("tensor_set", "shape_mismatch.safetensors", safetensors_bytes({{"g", g}, {"keys", keys}, {"beta", beta}}));
  put("tensor_set", "duplicate_g.npz",
      zip_archive({npy_member("keys.npy", keys), npy_member("g.npy", g), npy_member("beta.npy", g), npy_member("g.npy", g)}));
  // The hostile containers of the other targets.
  for (const char* f : {"short_zip64_far.npz", "bomb_declared_5GiB.npz", "overlapping_members.npz"})
    put("tensor_set", f, file_bytes(root / "npz" / f));
  for (const char* f : {"duplicate_key.safetensors", "deep.safetensors", "trailing_nul.safetensors"})
    put("tensor_set", f, file_bytes(root / "safetensors" / f));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  root = argv[1];
  npy_seeds();
  npz_seeds();
  safetensors_seeds();
  tensor_set_seeds();
  return 0;
}
