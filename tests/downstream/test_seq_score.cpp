// `chunkinv score --inputs SEQ --candidate OUT` with sequences in fla's
// layout (q and v beside k, g, beta) is seq's candidate scoring: the same
// report as `seq --inputs SEQ --candidate OUT`, the perturbation it was
// given, and options that only a chunk candidate has are one line.
#include <algorithm>
#include <filesystem>

#include <gtest/gtest.h>

#include "downstream/forward.hpp"
#include "downstream/sources.hpp"
#include "downstream/tensors.hpp"
#include "io/zip.hpp"
#include "support/shell.hpp"
#include "support/usage_error.hpp"

namespace chunkinv {
namespace {

using nlohmann::json;

Tensor tensor(DType dtype, std::vector<int64_t> shape, std::vector<double> values) {
  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.values = std::move(values);
  return t;
}

TEST(SeqScore, ScoreOnSequencesIsSeqsCandidateScoring) {
  const std::string dir = testing::test_dir("seq-score");
  const int T = 64, H = 2, K = 8, V = 4, B = 2;  // two batch rows of two heads
  SeqConfig c;
  c.family = "model_like";
  c.seq_len = T;
  c.chunk = 16;
  c.dim = K;
  c.value_dim = V;
  complete(c);
  std::vector<double> q, k, v, g, beta, o;
  const double e = 2e-3;
  for (int b = 0; b < B; ++b) {
    std::vector<Sequence> heads;
    std::vector<Trace> refs;
    for (int h = 0; h < H; ++h) {
      heads.push_back(find_source(c.family).make(c, 7, b * H + h));
      refs.push_back(recurrent_forward(heads.back(), 16, default_scale(heads.back())));
    }
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < H; ++h) {
        const Sequence& s = heads[h];
        q.insert(q.end(), s.q.begin() + t * K, s.q.begin() + (t + 1) * K);
        k.insert(k.end(), s.k.begin() + t * K, s.k.begin() + (t + 1) * K);
        v.insert(v.end(), s.v.begin() + t * V, s.v.begin() + (t + 1) * V);
        g.push_back(s.g[t]);
        beta.push_back(s.beta[t]);
        for (int x = 0; x < V; ++x) o.push_back(refs[h].o(t, x) * (1 + e));
      }
  }
  write_npz(dir + "/in.npz", {{"q", tensor(DType::kF32, {B, T, H, K}, q)}, {"k", tensor(DType::kF32, {B, T, H, K}, k)},
                              {"v", tensor(DType::kF32, {B, T, H, V}, v)}, {"g", tensor(DType::kF64, {B, T, H}, g)},
                              {"beta", tensor(DType::kF64, {B, T, H}, beta)}});
  write_npz(dir + "/out.npz", {{"o", tensor(DType::kF64, {B, T, H, V}, o)}});
  EXPECT_TRUE(holds_sequences(dir + "/in.npz"));
  EXPECT_FALSE(holds_sequences(dir + "/out.npz"));

  const auto score = testing::run_chunkinv_in(
      dir, "score --inputs in.npz --candidate out.npz -a chunk=16 -a method=fla_solve_tril -q -o score.json");
  ASSERT_EQ(score.status, 0) << score.out;
  const auto seq = testing::run_chunkinv_in(
      dir, "seq --inputs in.npz --candidate out.npz -a chunk=16 -a method=fla_solve_tril -q -o seq.json");
  ASSERT_EQ(seq.status, 0) << seq.out;
  const json a = testing::load_json(dir + "/score.json"), b = testing::load_json(dir + "/seq.json");
  EXPECT_EQ(a["results"], b["results"]);
  ASSERT_EQ(a["results"].size(), 1u);
  EXPECT_EQ(a["results"][0]["axes"]["path"], "candidate");
  EXPECT_EQ(a["results"][0]["samples"], B * H);
  EXPECT_NEAR(a["results"][0]["metrics"]["o_rel_rmse"]["median"].get<double>(), e, 1e-9);
  EXPECT_EQ(a["meta"]["candidate"]["file"], "out.npz");
  // The table prints as seq's: o's error is the perturbation given.
  const auto shown = testing::run_chunkinv_in(dir, "score --inputs in.npz --candidate out.npz -a chunk=16");
  EXPECT_EQ(shown.status, 0) << shown.out;
  EXPECT_HAS(shown.out, "o median");
  EXPECT_HAS(shown.out, "2.00e-3");

  // What only a chunk candidate has: one line, exit 2, nothing written.
  for (const std::string extra : {"--worst 3", "--paths gold,emulated", "--per-sample", "-a tail=pad", "-a chunk=48"}) {
    const auto bad = testing::run_chunkinv_in(dir, "score --inputs in.npz --candidate out.npz -a chunk=16 " + extra + " -o bad.json");
    EXPECT_EQ(bad.status, 2) << extra << "\n" << bad.out;
    EXPECT_EQ(std::count(bad.out.begin(), bad.out.end(), '\n'), 1) << extra << "\n" << bad.out;
    EXPECT_FALSE(std::filesystem::exists(dir + "/bad.json")) << extra;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace chunkinv
