// Tensor sets (keys, g, beta in a directory of .npy, an .npz or a
// .safetensors file) and the data-backed families: round trips of every
// container and key type, every malformed set named by file, tensor and
// entry, hostile paths, and the captured gates against the facts of
// data/gdn-gates/README.md.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>

#include "driver/runner.hpp"
#include "driver/spec.hpp"
#include "inputs/data_families.hpp"
#include "inputs/family.hpp"
#include "inputs/tensor_set.hpp"
#include "../io/helpers.hpp"
#include "io/npy.hpp"
#include "io/safetensors.hpp"
#include "io/zip.hpp"
#include "report/report.hpp"

using namespace chunkinv;
using namespace chunkinv::testing;
namespace fs = std::filesystem;

namespace {

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

}  // namespace

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
  // g > 0, the example of the docs; both zeros are a decay of exactly 1 (tests/inputs/test_layouts.cpp).
  Tensor g = npy_tensor("g");
  g.values[3 * 8 + 7] = 0.25;
  std::string p = with("g", g);
  EXPECT_TRUE(usage_error([&] { load_tensor_set(p); }, {"inputs " + p + "/g.npy: entry [3, 7] = 0.25 is not <= 0"}));
  g.values[3 * 8 + 7] = 1e-300;
  p = with("g", g);
  EXPECT_TRUE(usage_error([&] { load_tensor_set(p); }, {p + "/g.npy: entry [3, 7] = 1e-300 is not <= 0"}));
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
                          {"inputs " + dir + "/bad.safetensors[g]: entry [3, 7] = 0.25 is not <= 0"}));
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

TEST(TensorSet, ReadsPythonZipfileNpz) {
  if (!zlib_available()) GTEST_SKIP() << "deflated members need zlib";
  const std::string f = temp_dir() + "/py.npz";
  write_bytes(f, python_npz());
  // FP32 keys are rounded to BF16.
  const TensorSet s = load_tensor_set(f);
  EXPECT_EQ(s.count, 2u);
  EXPECT_EQ(s.chunk, 2);
  EXPECT_EQ(s.dim, 3);
  EXPECT_EQ(s.keys_dtype, DType::kF32);
  EXPECT_EQ(s.sample(1).keys[5], bf16(static_cast<double>(0.9f)));
  EXPECT_NE(s.sample(1).keys[5], static_cast<double>(0.9f));
  EXPECT_EQ(s.sample(1).g, (std::vector<double>{-0.125, -7.0}));
}

TEST(TensorSet, ParsedFromBytesAsFromTheFile) {
  const std::string dir = temp_dir();
  const auto want = some_samples(3, 8, 4);
  for (const std::string name : {"set.npz", "set.safetensors"}) {
    write_tensor_set(dir + "/" + name, want);
    expect_same_samples(parse_tensor_set(read_bytes(dir + "/" + name), name), want);
  }
  EXPECT_TRUE(usage_error([&] { parse_tensor_set("x", "set.pt"); }, {"inputs set.pt: not an .npz or a .safetensors file"}));
  EXPECT_TRUE(usage_error([&] { parse_tensor_set("x", "set.npz"); }, {"inputs set.npz: not a valid .npz (zip) file"}));
}

TEST(TensorSet, HostilePathsAreRefusedInOneLine) {
  const std::string dir = temp_dir();
  const auto good = some_samples(2, 4, 3);
  // A directory whose g.npy is a link to an endless device.
  const std::string d = dir + "/d";
  write_tensor_set(d, good);
  fs::remove(d + "/g.npy");
  fs::create_symlink("/dev/zero", d + "/g.npy");
  EXPECT_TRUE(usage_error([&] { load_tensor_set(d); },
                          {"inputs " + d + "/g.npy: is a character device (a link to /dev/zero), not a regular file"}));
  // An .npz and a .safetensors that are FIFOs, and one that is a directory.
  ASSERT_EQ(::mkfifo((dir + "/f.npz").c_str(), 0600), 0);
  EXPECT_TRUE(usage_error([&] { load_tensor_set(dir + "/f.npz"); }, {"inputs " + dir + "/f.npz: is a FIFO, not a regular file"}));
  fs::create_symlink("/dev/zero", dir + "/z.safetensors");
  EXPECT_TRUE(usage_error([&] { load_tensor_set(dir + "/z.safetensors"); },
                          {"inputs " + dir + "/z.safetensors: is a character device (a link to /dev/zero)"}));
  // A set beyond the limit on tensor data.
  write_tensor_set(dir + "/s.npz", some_samples(6, 8, 4));
  ScopedEnv env("CHUNKINV_MAX_TENSOR_BYTES", "1K");
  EXPECT_TRUE(usage_error([&] { load_tensor_set(dir + "/s.npz"); }, {"inputs " + dir + "/s.npz", "exceeds the 1 KiB limit"}));
}

namespace {

// A .npy file of `shape` whose data is zeros, sparse: the header is all
// that takes disk.
void sparse_npy(const std::string& path, const char* descr, int size, const std::vector<int64_t>& shape) {
  std::string h = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': (";
  uint64_t bytes = static_cast<uint64_t>(size);
  for (int64_t d : shape) h += std::to_string(d) + ", ", bytes *= static_cast<uint64_t>(d);
  h += "), }";
  h += std::string(63 - (10 + h.size()) % 64, ' ') + "\n";
  std::string head = std::string("\x93NUMPY\x01\x00", 8);
  head += static_cast<char>(h.size() & 0xFF);
  head += static_cast<char>(h.size() >> 8);
  write_bytes(path, head + h);
  fs::resize_file(path, head.size() + h.size() + bytes);
}

}  // namespace

// What a set needs is judged from its headers before any data is read: a
// sparse set of 2^39 values (8 TiB as doubles, more than any machine here)
// is refused at once, naming the set and the limit (once a 3 GiB set was read
// for 18 s, then ran out of memory, the message naming neither).
TEST(TensorSet, SetsLargerThanMemoryAreRefusedFromTheirHeaders) {
  const std::string dir = temp_dir();
  ScopedEnv env("CHUNKINV_MAX_TENSOR_BYTES", "2T");  // the file limit is not what refuses them
  const int64_t n = int64_t{1} << 28;
  const std::string d = dir + "/d";
  fs::create_directories(d);
  sparse_npy(d + "/keys.npy", "<u2", 2, {n, 16, 128});
  sparse_npy(d + "/g.npy", "<f4", 4, {n, 16});
  sparse_npy(d + "/beta.npy", "<f4", 4, {n, 16});
  const std::string header = R"({"keys": {"dtype": "BF16", "shape": [268435456, 16, 128], "data_offsets": [0, 1099511627776]}})";
  const std::string padded = header + std::string((8 - header.size() % 8) % 8, ' ');
  std::string st(8, '\0');
  for (int i = 0; i < 8; ++i) st[i] = static_cast<char>((padded.size() >> (8 * i)) & 0xFF);
  write_bytes(dir + "/s.safetensors", st + padded);
  fs::resize_file(dir + "/s.safetensors", 8 + padded.size() + (uint64_t{1} << 40));
  for (const std::string& set : {d, dir + "/s.safetensors"}) {
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_TRUE(usage_error([&] { load_tensor_set(set); },
                            {"inputs " + set + ": reading it needs about", " values at 16 bytes each", "more than the",
                             "this process may use ("}));
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5)) << "the data was read";
  }
  // The same of a candidate's matrices.
  sparse_npy(d + "/L.npy", "<f4", 4, {n, 16, 16});
  EXPECT_TRUE(usage_error([&] { load_candidate(d, TensorSet{}, {}, 16); }, {"candidate " + d + ": reading it needs about"}));
  fs::remove_all(dir);
}

// A set's dim is the dim axis of its configurations: beyond 4096 it is
// refused naming the file and the tensor (once: "axis dim = 5000 is outside
// 1..4096", no file named).
TEST(TensorSet, DimBeyond4096NamesTheFileAndTheTensor) {
  const std::string dir = temp_dir();
  for (const std::vector<int64_t>& keys : {std::vector<int64_t>{2, 8, 4097}, std::vector<int64_t>{1, 16, 1, 5000}}) {
    const std::string d = dir + "/d" + std::to_string(keys.size());
    fs::create_directories(d);
    Tensor k{DType::kF32, keys, {}};
    k.values.assign(k.numel(), 0.5);
    const std::vector<int64_t> per_token(keys.begin(), keys.end() - 1);
    Tensor g{DType::kF32, per_token, {}}, b{DType::kF32, per_token, {}};
    g.values.assign(g.numel(), -1.0);
    b.values.assign(b.numel(), 0.5);
    write_npy(d + "/keys.npy", k);
    write_npy(d + "/g.npy", g);
    write_npy(d + "/beta.npy", b);
    EXPECT_TRUE(usage_error([&] { load_tensor_set(d); },
                            {"inputs " + d + "/keys.npy: shape ", "dim d = " + std::to_string(keys.back()) + " is not in 1..4096"}));
  }
  fs::remove_all(dir);
}

TEST(TensorSet, DamagedSetsNeverCrash) {
  const std::string dir = temp_dir();
  const auto good = some_samples(3, 4, 5);
  for (const std::string name : {"s.npz", "s.safetensors"}) {
    write_tensor_set(dir + "/" + name, good);
    const std::string bytes = read_bytes(dir + "/" + name);
    EXPECT_GT(damage(bytes, dir + "/damaged-" + name, [](const std::string& f) { load_tensor_set(f); }), 500u) << name;
  }
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

  RunnerOptions opt;
  opt.threads = 2;
  opt.batch = 7;  // batches that do not divide the count
  const auto paths = parse_paths("gold,emulated");
  const auto want = run_experiment({{gen, method_of(default_method())}}, paths, n, seed, opt, true).entries;
  ASSERT_EQ(want.size(), 3u);  // the gold's own entry, neumann on the gold L and on the emulated L
  // Not a trivial comparison: the errors differ between samples.
  const auto& errs = want[2].per_sample.at("inv_total_rel_rmse");
  EXPECT_GT(*std::max_element(errs.begin(), errs.end()), *std::min_element(errs.begin(), errs.end()));
  EXPECT_GT(errs[0], 0.0);

  const std::string dir = temp_dir();
  for (const std::string& p : {dir + "/set", dir + "/set.npz", dir + "/set.safetensors"}) {
    write_tensor_set(p, samples);
    ExperimentSpec spec;
    spec.grids.push_back({{"family", "file"}, {"inputs", p}});
    const auto configs = expand(spec);
    ASSERT_EQ(configs.size(), 1u);
    EXPECT_EQ(configs[0].config.chunk, 16);
    EXPECT_EQ(configs[0].config.dim, 64);
    opt.batch = 3;
    const auto got = run_experiment(configs, paths, n, /*seed, unused by file=*/999, opt, true).entries;
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

