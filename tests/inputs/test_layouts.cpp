// Tensor sets in the fla/FlashKDA layout (keys [B, T, H, K], g [B, T, H] or
// per channel, beta [B, T, H], cu_seqlens), cut into chunks by the tool:
// chunks never cross a sequence, a short last chunk is zero-padded or
// dropped, padding changes no metric of the valid tokens' L, zero gates of
// either sign are a decay of 1, and per-channel gates are refused in one
// line unless their channels agree.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "../io/helpers.hpp"
#include "core/fp.hpp"
#include "inputs/data_families.hpp"
#include "inputs/family.hpp"
#include "inputs/tensor_set.hpp"
#include "io/npy.hpp"
#include "io/safetensors.hpp"
#include "io/zip.hpp"
#include "paths/gold/gold.hpp"

using namespace chunkinv;
using namespace chunkinv::testing;

namespace {

// keys [B, T, H, K], g [B, T, H] (or [B, T, H, K] with per_channel), beta [B, T, H]: distinct values everywhere.
TensorMap token_set(int64_t b, int64_t t, int64_t h, int64_t k, bool per_channel = false) {
  TensorMap m;
  m["keys"] = {DType::kF32, {b, t, h, k}, {}};
  m["g"] = {DType::kF32, per_channel ? std::vector<int64_t>{b, t, h, k} : std::vector<int64_t>{b, t, h}, {}};
  m["beta"] = {DType::kF32, {b, t, h}, {}};
  for (int64_t i = 0; i < b * t * h * k; ++i) m["keys"].values.push_back(std::sin(0.7 + i * 0.31) * 0.3);
  for (int64_t i = 0; i < b * t * h; ++i) {
    const double gate = -0.05 - 0.5 * (1 + std::cos(i * 1.3));
    for (int64_t c = 0; c < (per_channel ? k : 1); ++c) m["g"].values.push_back(gate);
    m["beta"].values.push_back(0.5 + 0.4 * std::sin(i * 0.9));
  }
  return m;
}

double key_at(const TensorMap& m, int64_t row, int64_t t, int64_t h, int64_t c) {
  const auto& s = m.at("keys").shape;
  return m.at("keys").values[((row * s[1] + t) * s[2] + h) * s[3] + c];
}

}  // namespace

TEST(TokenLayout, ChunksFollowTheSequencesAndPadTheirTails) {
  // One row of 50 tokens, 2 heads, sequences of 7, 23 and 20 tokens.
  TensorMap m = token_set(1, 50, 2, 8);
  m["cu_seqlens"] = {DType::kI32, {4}, {0, 7, 30, 50}};
  const std::string f = temp_dir() + "/t.npz";
  write_npz(f, m);
  const TensorSet s = load_tensor_set(f);
  EXPECT_TRUE(s.token_layout);
  EXPECT_EQ(s.heads, 2);
  EXPECT_EQ(s.dim, 8);
  EXPECT_EQ(s.cu_seqlens, (std::vector<int64_t>{0, 7, 30, 50}));
  // pad: 7 -> 1 chunk, 23 -> 3, 20 -> 3, each for 2 heads; drop keeps the whole ones only.
  const auto pad = chunk_tokens(s, 8, Tail::kPad);
  const auto drop = chunk_tokens(s, 8, Tail::kDrop);
  ASSERT_EQ(pad.size(), 14u);
  ASSERT_EQ(drop.size(), 8u);
  const std::vector<std::pair<int64_t, int>> want{{0, 7}, {7, 8}, {15, 8}, {23, 7}, {30, 8}, {38, 8}, {46, 4}};
  for (size_t i = 0; i < pad.size(); ++i) {
    EXPECT_EQ(pad[i].first, want[i / 2].first) << i;
    EXPECT_EQ(pad[i].valid, want[i / 2].second) << i;
    EXPECT_EQ(pad[i].head, int(i % 2)) << i;  // head fastest
  }
  for (const TokenChunk& c : drop) EXPECT_EQ(c.valid, 8);
  // A sample holds its tokens' values (keys rounded to BF16), then padding.
  const Sample x = chunk_sample(s, pad[13], 8);  // tokens 46..49, head 1
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 8; ++c)
      EXPECT_EQ(x.key(r, c), r < 4 ? bf16(static_cast<float>(key_at(m, 0, 46 + r, 1, c))) : 0.0) << r << "," << c;
  for (int r = 4; r < 8; ++r) {
    EXPECT_EQ(x.g[r], 0.0);
    EXPECT_EQ(x.beta[r], 0.0);
  }
  EXPECT_EQ(x.g[3], static_cast<double>(static_cast<float>(m["g"].values[49 * 2 + 1])));
  // Without cu_seqlens every batch row is a sequence.
  TensorMap rows = token_set(3, 10, 1, 4);
  write_npz(f, rows);
  EXPECT_EQ(chunk_tokens(load_tensor_set(f), 4, Tail::kPad).size(), 9u);   // 3 rows x (4, 4, 2)
  EXPECT_EQ(chunk_tokens(load_tensor_set(f), 4, Tail::kDrop).size(), 6u);
}

TEST(TokenLayout, PaddingLeavesTheGoldOfTheValidTokensUnchanged) {
  // The gold of a padded chunk is that of its valid tokens, with zero L rows
  // and identity inverse rows below: padding contributes nothing.
  TensorMap m = token_set(1, 11, 1, 16);
  const std::string f = temp_dir() + "/p.npz";
  write_npz(f, m);
  const TensorSet s = load_tensor_set(f);
  const auto pad = chunk_tokens(s, 16, Tail::kPad);
  ASSERT_EQ(pad.size(), 1u);
  const GoldOutput padded = compute_gold(chunk_sample(s, pad[0], 16));
  Sample valid = chunk_sample(s, pad[0], 16);
  valid.chunk = 11;
  valid.keys.resize(11 * 16), valid.g.resize(11), valid.beta.resize(11);
  const GoldOutput small = compute_gold(valid);
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      EXPECT_EQ(padded.L(i, j), i < 11 && j < 11 ? small.L(i, j) : 0.0) << i << "," << j;
      const double want = i < 11 && j < 11 ? small.inv(i, j) : (i == j ? 1.0 : 0.0);
      EXPECT_NEAR(padded.inv(i, j), want, 1e-14 * std::max(1.0, std::fabs(want))) << i << "," << j;
    }
}

TEST(TokenLayout, TheFileFamilyCutsAtTheChunkAxis) {
  TensorMap m = token_set(2, 40, 3, 16);
  const std::string f = temp_dir() + "/fam.safetensors";
  write_safetensors(f, m);
  const Family& fam = find_family("file");
  Configuration c;
  c.family = "file";
  c.chunk = 16;
  c.params = {{"inputs", f}, {"tail", "pad"}};
  fam.complete(c);
  fam.validate(c);
  EXPECT_EQ(c.chunk, 16);  // the axis's, not the file's
  EXPECT_EQ(c.dim, 16);
  EXPECT_EQ(fam.available_samples(c), std::optional<uint64_t>(2 * 3 * 3));
  c.params["tail"] = "drop";
  EXPECT_EQ(fam.available_samples(c), std::optional<uint64_t>(2 * 2 * 3));
  const Sample last = fam.make(c, 0, 11);  // row 1, tokens 16..31, head 2
  EXPECT_EQ(last.key(0, 5), bf16(static_cast<float>(key_at(m, 1, 16, 2, 5))));
  EXPECT_TRUE(usage_error([&] { fam.make(c, 0, 12); }, {"sample 12", "12 chunks of 16 tokens"}));
  c.params["tail"] = "trim";
  EXPECT_TRUE(usage_error([&] { fam.validate(c); }, {"tail = trim is not pad or drop"}));
}

TEST(TokenLayout, ZeroGatesOfEitherSignAreADecayOfOne) {
  TensorMap m = token_set(1, 12, 1, 8);
  m["g"].values[3] = -0.0;
  m["g"].values[4] = 0.0;
  m["g"].dtype = DType::kF64;
  const std::string f = temp_dir() + "/z.npz";
  write_npz(f, m);
  const TensorSet s = load_tensor_set(f);
  const Sample x = chunk_sample(s, chunk_tokens(s, 12, Tail::kPad)[0], 12);
  EXPECT_TRUE(std::signbit(x.g[3]));
  EXPECT_FALSE(std::signbit(x.g[4]));
  // Rows 3 and 4 see the decay of row 2 exactly: L(4, 3) = beta_4 k_4.k_3.
  const GoldOutput gold = compute_gold(x);
  double dot = 0;
  for (int c = 0; c < 8; ++c) dot += x.key(4, c) * x.key(3, c);
  EXPECT_EQ(gold.L(4, 3), x.beta[4] * dot);
  // The chunks layout takes them too.
  write_tensor_set(f, std::vector<Sample>{x});
  EXPECT_EQ(load_tensor_set(f).sample(0).g[4], 0.0);
}

TEST(TokenLayout, PerChannelGatesAreKeptAndPerTokenWhereTheirChannelsAgree) {
  TensorMap m = token_set(1, 20, 2, 8, /*per_channel=*/true);
  const std::string f = temp_dir() + "/pc.npz";
  write_npz(f, m);
  const TensorSet equal = load_tensor_set(f);
  EXPECT_EQ(equal.g_channels, 8);
  EXPECT_TRUE(equal.g_channels_equal);
  EXPECT_EQ(equal.g.size(), 20u * 2 * 8);  // kept as given
  const Sample x = chunk_sample(equal, chunk_tokens(equal, 16, Tail::kPad)[1], 16);
  EXPECT_EQ(x.gating, Gating::kToken);
  ASSERT_EQ(x.g.size(), 16u);
  EXPECT_EQ(x.g[0], static_cast<double>(static_cast<float>(m["g"].values[(0 * 2 + 1) * 8])));
  m["g"].values[(5 * 2 + 1) * 8 + 3] = -2.5;  // token 5, head 1, channel 3
  write_npz(f, m);
  const TensorSet differ = load_tensor_set(f);
  EXPECT_FALSE(differ.g_channels_equal);
  // Channels that differ anywhere in the set: every chunk is per channel.
  const Sample y = chunk_sample(differ, chunk_tokens(differ, 16, Tail::kPad)[1], 16);
  EXPECT_EQ(y.gating, Gating::kChannel);
  ASSERT_EQ(y.g.size(), 16u * 8);
  EXPECT_EQ(y.g[5 * 8 + 3], -2.5);
  EXPECT_EQ(y.g[5 * 8 + 2], x.g[5]);
  const Sample tail = chunk_sample(differ, chunk_tokens(differ, 16, Tail::kPad)[3], 16);  // tokens 16..19
  EXPECT_EQ(tail.gating, Gating::kChannel);
  EXPECT_EQ(tail.g[4 * 8], 0.0) << "padding rows: a decay of 1 on every channel";
  EXPECT_EQ(tail.g[15 * 8 + 7], 0.0);
  // Channel 3 of token 5 decays faster: the gold of that chunk moves from row 5 on
  // (the per-channel sum rounds in another order: equal to 1e-15 before it).
  const GoldOutput gx = compute_gold(x), gy = compute_gold(y);
  EXPECT_TRUE(gx.L.topRows(5).isApprox(gy.L.topRows(5), 1e-15));
  EXPECT_GT(std::abs(gx.L(6, 2) - gy.L(6, 2)), 1e-6 * std::abs(gx.L(6, 2)));
  Configuration c;
  c.family = "file";
  c.params = {{"inputs", f}, {"tail", "pad"}};
  const Family& fam = find_family("file");
  fam.complete(c);
  EXPECT_NO_THROW(fam.validate(c));
  // Written back, a per-channel sample keeps its shape.
  write_tensor_set(f + ".again.npz", std::vector<Sample>{y});
  const Sample z = load_tensor_set(f + ".again.npz").sample(0);
  EXPECT_EQ(z.gating, Gating::kChannel);
  EXPECT_EQ(z.g, y.g);
}

TEST(TokenLayout, MalformedLayoutsNameTheCulprit) {
  const std::string dir = temp_dir();
  auto fails = [&](TensorMap m, std::initializer_list<std::string> parts) {
    write_npz(dir + "/x.npz", m);
    return usage_error([&] { load_tensor_set(dir + "/x.npz"); }, parts);
  };
  TensorMap m = token_set(2, 10, 1, 4);
  m["cu_seqlens"] = {DType::kI64, {2}, {0, 10}};
  EXPECT_TRUE(fails(m, {"x.npz[cu_seqlens]: with cu_seqlens the sequences are packed into one row: B = 1, keys have B = 2"}));
  m = token_set(1, 10, 1, 4);
  m["cu_seqlens"] = {DType::kI64, {3}, {0, 6, 9}};
  EXPECT_TRUE(fails(m, {"[cu_seqlens]: last entry 9 is not the token count T = 10"}));
  m["cu_seqlens"] = {DType::kI64, {3}, {0, 6, 5}};
  EXPECT_TRUE(fails(m, {"[cu_seqlens]: entry [2] = 5 is below entry [1] = 6"}));
  m["cu_seqlens"] = {DType::kF32, {3}, {0, 6, 10}};
  EXPECT_TRUE(fails(m, {"[cu_seqlens]: dtype f32 is not an integer type"}));
  m = token_set(1, 10, 2, 4);
  m["beta"].shape = {1, 10, 2, 1};
  EXPECT_TRUE(fails(m, {"x.npz[beta]: shape (1, 10, 2, 1) does not match keys: [B, T, H] = (1, 10, 2) expected"}));
  m = token_set(1, 10, 2, 4);
  m["g"] = {DType::kF32, {1, 10, 4}, std::vector<double>(40, -1.0)};
  EXPECT_TRUE(fails(m, {"x.npz[g]: shape (1, 10, 4) does not match keys: [B, T, H] = (1, 10, 2) or per channel (1, 10, 2, 4)"}));
  m = token_set(1, 10, 2, 4);
  m["keys"].shape = {1, 10, 2, 2, 2};
  EXPECT_TRUE(fails(m, {"shape (1, 10, 2, 2, 2) is not [N, C, d] (chunks) nor [B, T, H, K]"}));
  // fla's own name for the keys is taken where there is no `keys`.
  m = token_set(1, 10, 2, 4);
  m["k"] = m["keys"];
  m.erase("keys");
  write_npz(dir + "/k.npz", m);
  EXPECT_EQ(load_tensor_set(dir + "/k.npz").dim, 4);
}
