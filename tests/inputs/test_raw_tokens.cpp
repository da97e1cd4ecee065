// Raw tensor sets (FlashKDA's keys, g_raw, beta_raw, A_log, dt_bias,
// lower_bound) in the tokens layout [B, T, H, K], as FlashKDA's users hold
// them: every chunk of one (batch, head) is the sample of the chunks-layout
// raw set built by hand from the same numbers, bit for bit; a partial last
// chunk is padded (zero keys, g = 0, beta = 0 on every activation) or
// dropped as the activated tokens layout does it; each misshapen set is one
// line naming the tensor and the shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "../io/helpers.hpp"
#include "core/fp.hpp"
#include "inputs/family.hpp"
#include "inputs/raw.hpp"
#include "inputs/tensor_set.hpp"
#include "io/npy.hpp"
#include "io/safetensors.hpp"
#include "io/zip.hpp"
#include "paths/gold/gold.hpp"

using namespace chunkinv;
using namespace chunkinv::testing;

namespace {

// A raw set of the tokens layout with distinct BF16 values everywhere:
// keys and g_raw [B, T, H, D], beta_raw [B, T, H], A_log [H], dt_bias [H, D],
// lower_bound a scalar.
TensorMap raw_token_set(int64_t b, int64_t t, int64_t h, int64_t d) {
  TensorMap m;
  m["keys"] = {DType::kBF16, {b, t, h, d}, {}};
  m["g_raw"] = {DType::kBF16, {b, t, h, d}, {}};
  m["beta_raw"] = {DType::kBF16, {b, t, h}, {}};
  m["A_log"] = {DType::kF32, {h}, {}};
  m["dt_bias"] = {DType::kF32, {h, d}, {}};
  m["lower_bound"] = {DType::kF32, {}, {-4.5}};
  for (int64_t i = 0; i < b * t * h * d; ++i) {
    m["keys"].values.push_back(bf16(1.7 * std::sin(0.3 + i * 0.37)));
    m["g_raw"].values.push_back(bf16(2.5 * std::cos(0.1 + i * 0.53)));
  }
  for (int64_t i = 0; i < b * t * h; ++i) m["beta_raw"].values.push_back(bf16(3.0 * std::sin(1.1 + i * 0.71)));
  for (int64_t i = 0; i < h; ++i) m["A_log"].values.push_back(static_cast<float>(-0.4 + 0.9 * i));
  for (int64_t i = 0; i < h * d; ++i) m["dt_bias"].values.push_back(static_cast<float>(0.8 * std::sin(2.0 + i * 0.29)));
  return m;
}

// The chunks-layout raw set [N, C, D] of the whole chunks of `m` (T a
// multiple of C), in the tokens layout's sample order (row, chunk, head
// fastest), each sample with its head's A_log and dt_bias row.
TensorMap chunks_by_hand(const TensorMap& m, int64_t c) {
  const auto& s = m.at("keys").shape;
  const int64_t b = s[0], t = s[1], h = s[2], d = s[3], n = b * (t / c) * h;
  TensorMap out;
  out["keys"] = {DType::kBF16, {n, c, d}, {}};
  out["g_raw"] = {DType::kBF16, {n, c, d}, {}};
  out["beta_raw"] = {DType::kBF16, {n, c}, {}};
  out["A_log"] = {DType::kF32, {n}, {}};
  out["dt_bias"] = {DType::kF32, {n, d}, {}};
  out["lower_bound"] = m.at("lower_bound");
  for (int64_t row = 0; row < b; ++row)
    for (int64_t first = 0; first < t; first += c)
      for (int64_t head = 0; head < h; ++head) {
        for (int64_t r = 0; r < c; ++r) {
          const int64_t tok = (row * t + first + r) * h + head;
          for (int64_t k = 0; k < d; ++k) {
            out["keys"].values.push_back(m.at("keys").values[size_t(tok * d + k)]);
            out["g_raw"].values.push_back(m.at("g_raw").values[size_t(tok * d + k)]);
          }
          out["beta_raw"].values.push_back(m.at("beta_raw").values[size_t(tok)]);
        }
        out["A_log"].values.push_back(m.at("A_log").values[size_t(head)]);
        for (int64_t k = 0; k < d; ++k) out["dt_bias"].values.push_back(m.at("dt_bias").values[size_t(head * d + k)]);
      }
  return out;
}

void expect_same_sample(const Sample& got, const Sample& want, const std::string& what) {
  ASSERT_TRUE(got.raw) << what;
  EXPECT_EQ(got.chunk, want.chunk) << what;
  EXPECT_EQ(got.dim, want.dim) << what;
  EXPECT_EQ(got.gating, want.gating) << what;
  EXPECT_EQ(got.keys, want.keys) << what;  // exact: same bits
  EXPECT_EQ(got.g, want.g) << what;
  EXPECT_EQ(got.beta, want.beta) << what;
  EXPECT_EQ(got.raw->keys, want.raw->keys) << what;
  EXPECT_EQ(got.raw->g, want.raw->g) << what;
  EXPECT_EQ(got.raw->beta, want.raw->beta) << what;
  EXPECT_EQ(got.raw->dt_bias, want.raw->dt_bias) << what;
  EXPECT_EQ(got.raw->a_log, want.raw->a_log) << what;
  EXPECT_EQ(got.raw->lower_bound, want.raw->lower_bound) << what;
  const Sample ge = activate_exact(*got.raw), we = activate_exact(*want.raw);  // the gold's activation
  EXPECT_EQ(ge.keys, we.keys) << what;
  EXPECT_EQ(ge.g, we.g) << what;
  EXPECT_EQ(ge.beta, we.beta) << what;
}

}  // namespace

TEST(RawTokenLayout, ChunksAreTheChunksLayoutSamplesBitForBit) {
  constexpr int C = 8;
  const TensorMap m = raw_token_set(2, 2 * C, 2, 16);  // B = 2, T = 2 chunks, H = 2
  const std::string dir = temp_dir();
  write_safetensors(dir + "/hand.safetensors", chunks_by_hand(m, C));
  const TensorSet hand = load_tensor_set(dir + "/hand.safetensors");
  ASSERT_FALSE(hand.token_layout);
  ASSERT_EQ(hand.count, 8u);
  // The tokens file as safetensors (BF16), as .npz (BF16 bit patterns, <u2)
  // and with dt_bias flattened to [H*K] as FlashKDA's users may hold it.
  TensorMap flat = m;
  flat["dt_bias"].shape = {2 * 16};
  write_safetensors(dir + "/tok.safetensors", m);
  write_npz(dir + "/tok.npz", m);
  write_npz(dir + "/flat.npz", flat);
  for (const std::string f : {"/tok.safetensors", "/tok.npz", "/flat.npz"}) {
    const TensorSet s = load_tensor_set(dir + f);
    ASSERT_TRUE(s.token_layout) << f;
    ASSERT_TRUE(s.is_raw()) << f;
    EXPECT_EQ(s.batch, 2);
    EXPECT_EQ(s.tokens, 2 * C);
    EXPECT_EQ(s.heads, 2);
    EXPECT_EQ(s.dim, 16);
    EXPECT_TRUE(s.keys.empty());
    for (Tail tail : {Tail::kPad, Tail::kDrop}) {
      const auto chunks = chunk_tokens(s, C, tail);
      ASSERT_EQ(chunks.size(), 8u) << f;
      for (size_t i = 0; i < chunks.size(); ++i)
        expect_same_sample(chunk_sample(s, chunks[i], C), hand.sample(i), f + " sample " + std::to_string(i));
    }
  }
  // The activation is that of the per-head parameters: both heads differ.
  const TensorSet s = load_tensor_set(dir + "/tok.npz");
  const auto chunks = chunk_tokens(s, C, Tail::kPad);
  EXPECT_NE(chunk_sample(s, chunks[0], C).raw->a_log, chunk_sample(s, chunks[1], C).raw->a_log);
}

TEST(RawTokenLayout, PartialLastChunksArePaddedOrDroppedAsActivatedSetsAre) {
  constexpr int C = 8, V = 3;
  const TensorMap m = raw_token_set(2, C + V, 2, 16);  // each row: one whole chunk and one of 3 tokens
  const std::string f = temp_dir() + "/tok.safetensors";
  write_safetensors(f, m);
  const TensorSet s = load_tensor_set(f);
  ASSERT_EQ(chunk_tokens(s, C, Tail::kDrop).size(), 4u);
  const auto pad = chunk_tokens(s, C, Tail::kPad);
  ASSERT_EQ(pad.size(), 8u);
  // The chunks of 3 tokens against whole chunks that start with the same 3
  // tokens (the activation is per token): the 3 rows agree, the rest of the
  // padded sample is zero keys, g = 0 and beta = 0, in the kernel's model
  // and in the gold's exact activation.
  TensorMap shifted = m;  // row r's tokens C..C+V-1 moved to 0..V-1
  shifted["keys"].shape = shifted["g_raw"].shape = {2, C, 2, 16};
  shifted["beta_raw"].shape = {2, C, 2};
  for (auto* name : {"keys", "g_raw", "beta_raw"}) {
    auto& v = shifted[name].values;
    const size_t per_token = name == std::string("beta_raw") ? 2 : 32;
    std::vector<double> out;
    for (int row = 0; row < 2; ++row)
      for (int t = 0; t < C; ++t) {
        const size_t from = (size_t(row) * (C + V) + size_t(t < V ? C + t : t)) * per_token;
        out.insert(out.end(), v.begin() + from, v.begin() + from + per_token);
      }
    v = out;
  }
  const TensorSet whole = make_tensor_set(shifted, "whole.npz");
  const auto whole_chunks = chunk_tokens(whole, C, Tail::kPad);
  ASSERT_EQ(whole_chunks.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    const TokenChunk& c = pad[size_t(i < 2 ? 2 + i : 4 + i)];  // row 0: samples 2, 3; row 1: 6, 7
    ASSERT_EQ(c.valid, V);
    const Sample x = chunk_sample(s, c, C), w = chunk_sample(whole, whole_chunks[size_t(i)], C);
    ASSERT_TRUE(x.raw);
    EXPECT_EQ(x.raw->padding, C - V);
    const Sample xe = activate_exact(*x.raw), we = activate_exact(*w.raw);
    for (const auto& [got, want] : {std::pair{&x, &w}, std::pair{&xe, &we}}) {
      for (int r = 0; r < C; ++r) {
        for (int k = 0; k < 16; ++k) {
          EXPECT_EQ(got->key(r, k), r < V ? want->key(r, k) : 0.0) << i << ": " << r << "," << k;
          EXPECT_EQ(got->gate(r, k), r < V ? want->gate(r, k) : 0.0) << i << ": " << r << "," << k;
        }
        EXPECT_EQ(got->beta[size_t(r)], r < V ? want->beta[size_t(r)] : 0.0) << i << ": " << r;
      }
    }
    // The gold of the padded chunk: padding rows and columns of L are zero.
    const GoldOutput g = compute_gold(x);
    for (int r = 0; r < C; ++r)
      for (int j = 0; j < C; ++j)
        if (r >= V || j >= V) {
          EXPECT_EQ(g.L(r, j), 0.0) << r << "," << j;
        }
  }
  // A sample from activated values (the GPU's way) pads the same way.
  const Sample x = chunk_sample(s, pad[2], C);
  std::vector<float> k(x.keys.begin(), x.keys.end()), g(x.g.size(), -1.0f), b(C, 0.5f);
  const Sample y = sample_from_activated(x.raw, k, g, b);
  for (int r = V; r < C; ++r) {
    EXPECT_EQ(y.beta[size_t(r)], 0.0);
    for (int c = 0; c < 16; ++c) EXPECT_EQ(y.gate(r, c), 0.0);
  }
}

TEST(RawTokenLayout, TheFileFamilyAndCuSeqlensCutRawSetsLikeActivatedOnes) {
  TensorMap m = raw_token_set(1, 20, 2, 16);
  m["cu_seqlens"] = {DType::kI64, {3}, {0, 5, 20}};
  const std::string f = temp_dir() + "/packed.npz";
  write_npz(f, m);
  const TensorSet s = load_tensor_set(f);
  EXPECT_EQ(s.cu_seqlens, (std::vector<int64_t>{0, 5, 20}));
  EXPECT_EQ(chunk_tokens(s, 8, Tail::kPad).size(), 2u * (1 + 2));  // 5 -> 1 chunk, 15 -> 2
  EXPECT_EQ(chunk_tokens(s, 8, Tail::kDrop).size(), 2u * 1);
  const Family& fam = find_family("file");
  Configuration c;
  c.family = "file";
  c.chunk = 8;
  c.params = {{"inputs", f}, {"tail", "pad"}};
  fam.complete(c);
  fam.validate(c);
  EXPECT_EQ(c.dim, 16);
  EXPECT_EQ(fam.available_samples(c), std::optional<uint64_t>(6));
  const Sample x = fam.make(c, 0, 3);  // tokens 5..12, head 1
  ASSERT_TRUE(x.raw);
  EXPECT_EQ(x.raw->padding, 0);
  EXPECT_EQ(x.raw->key_raw(0, 4), static_cast<float>(m["keys"].values[size_t((5 * 2 + 1) * 16 + 4)]));
  EXPECT_EQ(x.raw->a_log, static_cast<float>(m["A_log"].values[1]));
}

TEST(RawTokenLayout, MisshapenMixedAndPartialSetsAreOneLineErrors) {
  const TensorMap good = raw_token_set(2, 8, 2, 16);
  ASSERT_NO_THROW(make_tensor_set(good, "raw.npz"));
  auto bad = [&](const std::function<void(TensorMap&)>& change, std::initializer_list<std::string> parts) {
    TensorMap m = good;
    change(m);
    return usage_error([&] { make_tensor_set(std::move(m), "raw.npz"); }, parts);
  };
  // Rank, H and d.
  EXPECT_TRUE(bad([](TensorMap& m) { m["keys"].shape = {2, 8, 2, 4, 4}; },
                  {"raw.npz[keys]", "(2, 8, 2, 4, 4)", "is not [N, C, d] (chunks) nor [B, T, H, K]"}));
  EXPECT_TRUE(bad([](TensorMap& m) { m["g_raw"].shape = {2, 8, 4, 8}; },
                  {"raw.npz[g_raw]", "(2, 8, 4, 8)", "is not keys' (2, 8, 2, 16)"}));
  EXPECT_TRUE(bad([](TensorMap& m) { m["g_raw"].shape = {2, 8, 2, 16, 1}; }, {"raw.npz[g_raw]", "(2, 8, 2, 16, 1)"}));
  EXPECT_TRUE(bad([](TensorMap& m) { m["beta_raw"].shape = {2, 16, 1}; },
                  {"raw.npz[beta_raw]", "(2, 16, 1)", "[B, T, H] = (2, 8, 2)"}));
  EXPECT_TRUE(bad([](TensorMap& m) { m["beta_raw"].shape = {2, 8, 2, 1}; }, {"raw.npz[beta_raw]", "(2, 8, 2, 1)"}));
  // A_log: [H], not a scalar, not another H.
  EXPECT_TRUE(bad([](TensorMap& m) { m["A_log"] = {DType::kF32, {}, {0.0}}; },
                  {"raw.npz[A_log]", "shape ()", "[H] = [2]", "(2, 8, 2, 16)"}));
  EXPECT_TRUE(bad([](TensorMap& m) { m["A_log"] = {DType::kF32, {3}, {0.0, 0.0, 0.0}}; },
                  {"raw.npz[A_log]", "(3)", "[H] = [2]"}));
  // dt_bias: [H, K] or [H*K] only.
  EXPECT_TRUE(bad([](TensorMap& m) { m["dt_bias"].shape = {32, 1}; },
                  {"raw.npz[dt_bias]", "(32, 1)", "[H, K] = [2, 16]", "[H*K] = [32]"}));
  EXPECT_TRUE(bad([](TensorMap& m) { m["dt_bias"] = {DType::kF32, {16}, std::vector<double>(16, 0.0)}; },
                  {"raw.npz[dt_bias]", "(16)", "[H, K] = [2, 16]"}));
  EXPECT_TRUE(bad([](TensorMap& m) { m["dt_bias"] = {DType::kF32, {2, 8}, std::vector<double>(16, 0.0)}; },
                  {"raw.npz[dt_bias]", "(2, 8)", "[H*K] = [32]"}));
  // lower_bound: one scalar for every head.
  EXPECT_TRUE(bad([](TensorMap& m) { m["lower_bound"] = {DType::kF32, {2}, {-5.0, -5.0}}; },
                  {"raw.npz[lower_bound]", "(2)", "is not a scalar"}));
  EXPECT_TRUE(bad([](TensorMap& m) { m["lower_bound"].values = {-7.0}; }, {"lower_bound = -7", "[-5, 0)"}));
  // Values: per head, named.
  EXPECT_TRUE(bad([](TensorMap& m) { m["A_log"].values[1] = 90.0; }, {"raw.npz head 1", "A_log = 90"}));
  EXPECT_TRUE(bad([](TensorMap& m) { m["dt_bias"].values[17] = INFINITY; },
                  {"raw.npz[dt_bias]", "entry [1, 1]", "not a finite FP32 value"}));
  EXPECT_TRUE(bad([](TensorMap& m) { m["keys"].values[5] = NAN; }, {"raw.npz[keys]", "is not finite"}));
  // Mixed and partial sets.
  EXPECT_TRUE(bad([](TensorMap& m) { m["g"] = m["beta_raw"]; }, {"raw.npz", "'g'", "activated or raw, not both"}));
  EXPECT_TRUE(bad([](TensorMap& m) { m["beta"] = m["beta_raw"]; }, {"'beta'", "activated or raw, not both"}));
  EXPECT_TRUE(bad([](TensorMap& m) { m.erase("dt_bias"); }, {"raw.npz", "'dt_bias' is missing"}));
  EXPECT_TRUE(bad([](TensorMap& m) { m.erase("keys"); }, {"raw.npz", "raw inputs need keys"}));
  // cu_seqlens: the sequences of one row, as for activated sets; never with chunks.
  EXPECT_TRUE(bad([](TensorMap& m) { m["cu_seqlens"] = {DType::kI32, {2}, {0, 8}}; },
                  {"raw.npz[cu_seqlens]", "B = 1, keys have B = 2"}));
  TensorMap chunks = good;
  chunks["keys"].shape = chunks["g_raw"].shape = {16, 2, 16};  // the same numbers as N = 16 chunks of C = 2
  chunks["beta_raw"].shape = {16, 2};
  chunks["A_log"] = {DType::kF32, {}, {0.0}};
  chunks["dt_bias"] = {DType::kF32, {16}, std::vector<double>(16, 0.0)};
  ASSERT_NO_THROW(make_tensor_set(chunks, "raw.npz"));
  chunks["cu_seqlens"] = {DType::kI32, {2}, {0, 2}};
  EXPECT_TRUE(usage_error([&] { make_tensor_set(chunks, "raw.npz"); },
                          {"raw.npz[cu_seqlens]", "goes with keys [B, T, H, K] (tokens)"}));
}
