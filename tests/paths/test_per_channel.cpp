// Per-channel gates (SPEC §1): the gold and the kernel's model per element,
// per-token gates as the case of one value repeated over the channels, and
// the `gating` axis of the families that draw their own gates.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "core/detmath.hpp"
#include "core/thread_pool.hpp"
#include "gpu/gpu_test_common.hpp"
#include "inputs/family.hpp"
#include "inputs/witness_summary.hpp"
#include "metrics/metrics.hpp"
#include "paths/emulated/emulated.hpp"
#include "paths/gold/gold.hpp"
#include "paths/path.hpp"
#include "support/shell.hpp"
#include "support/usage_error.hpp"

using namespace chunkinv;
using chunkinv::testing::usage_error;

namespace {

Configuration config(const std::string& family, int chunk, int dim, const std::string& gating = "") {
  Configuration c;
  c.family = family;
  c.chunk = chunk;
  c.dim = dim;
  const Family& f = find_family(family);
  for (const FamilyParam& p : f.params())
    if (!p.default_value.is_null()) c.params[p.name] = p.default_value;
  if (!gating.empty()) c.params["gating"] = gating;
  f.complete(c);
  f.validate(c);
  return c;
}

// The same sample with each token's gate written on every channel.
Sample broadcast(const Sample& s) {
  Sample b = s;
  b.gating = Gating::kChannel;
  b.g.assign(static_cast<size_t>(s.chunk) * s.dim, 0.0);
  for (int t = 0; t < s.chunk; ++t)
    for (int c = 0; c < s.dim; ++c) b.g[static_cast<size_t>(t) * s.dim + c] = s.g[t];
  return b;
}

PathOutput run_one(const std::string& path, const Sample& s, const GoldOutput& gold, const std::string& method) {
  ThreadPool pool(1);
  auto p = make_path(parse_paths(path).at(0));
  const Method m = parse_method(method);
  const Method* ms[] = {&m};
  std::vector<PathOutput> out(1);
  p->run_batch({std::span<const Sample>(&s, 1), std::span<const GoldOutput>(&gold, 1)}, ms, out, pool, false);
  return out[0];
}

// Every entry the same value and sign of zero (every NaN equals every NaN).
bool same_bits(const Mat& a, const Mat& b) {
  if (a.rows() != b.rows() || a.cols() != b.cols()) return false;
  for (Eigen::Index i = 0; i < a.size(); ++i)
    if (!gputest::same_double(a.data()[i], b.data()[i])) return false;
  return true;
}

}  // namespace

TEST(PerChannelGates, GoldIsTheSumOverChannelsOfEachChannelsDecay) {
  const Configuration c = config("model_like", 12, 32, "channel");
  const Sample s = find_family("model_like").make(c, 5, 3);
  ASSERT_EQ(s.gating, Gating::kChannel);
  const GoldOutput g = compute_gold(s);
  // The definition, written out: G per channel, one exponential per element.
  for (int i = 1; i < s.chunk; ++i)
    for (int j = 0; j < i; ++j) {
      double want = 0.0;
      for (int k = 0; k < s.dim; ++k) {
        double gi = 0.0, gj = 0.0;
        for (int t = 0; t <= i; ++t) gi += s.gate(t, k);
        for (int t = 0; t <= j; ++t) gj += s.gate(t, k);
        want += s.key(i, k) * s.key(j, k) * std::exp(gi - gj);
      }
      want *= s.beta[i];
      EXPECT_NEAR(g.L(i, j), want, 1e-14 + 1e-12 * std::abs(want)) << i << "," << j;
    }
}

TEST(PerChannelGates, TokenGatesWrittenPerChannelGiveTheSameBitsOnTheKernelModel) {
  for (const char* family : {"model_like", "floor"})
    for (int chunk : {8, 16, 17, 48}) {
      const Configuration c = config(family, chunk, 64);
      for (uint64_t i = 0; i < 4; ++i) {
        const Sample tok = find_family(family).make(c, 11, i);
        const Sample ch = broadcast(tok);
        const GoldOutput gt = compute_gold(tok), gc = compute_gold(ch);
        EXPECT_TRUE(gt.L.isApprox(gc.L, 1e-14)) << family << " C=" << chunk;
        for (const char* method : {"neumann", "fwdsub_fp32"}) {
          const PathOutput a = run_one("emulated", tok, gt, method), b = run_one("emulated", ch, gc, method);
          EXPECT_TRUE(same_bits(a.l.L, b.l.L)) << family << " C=" << chunk << " " << method;
          EXPECT_TRUE(same_bits(a.on_path_l.inv, b.on_path_l.inv)) << family << " C=" << chunk << " " << method;
          ASSERT_EQ(b.l.decay.size(), size_t(chunk) * 64);
          for (int t = 0; t < chunk; ++t)
            for (int k = 0; k < 64; k += 21) {
              EXPECT_EQ(b.l.decay[size_t(t) * 64 + k], a.l.decay[t]);
              EXPECT_EQ(b.l.inv_decay[size_t(t) * 64 + k], a.l.inv_decay[t]);
            }
        }
      }
    }
}

TEST(PerChannelGates, FloorPerChannelEqualsFloorPerTokenAndCountsDecaysPerElement) {
  // Floor -5 at C = 48: G2 passes -133, so the last decays flush to zero;
  // per channel every one of them is counted d times.
  const Configuration tc = config("floor", 48, 32), cc = config("floor", 48, 32, "channel");
  const Sample t = find_family("floor").make(tc, 2, 0), c = find_family("floor").make(cc, 2, 0);
  EXPECT_EQ(c.g.size(), 48u * 32);
  EXPECT_EQ(c.keys, t.keys);
  EXPECT_EQ(c.beta, t.beta);
  const GoldOutput gt = compute_gold(t), gc = compute_gold(c);
  const PathOutput a = run_one("emulated", t, gt, "neumann"), b = run_one("emulated", c, gc, "neumann");
  EXPECT_TRUE(same_bits(a.l.L, b.l.L));
  const MetricSet& set = method_metrics(find_method("neumann"));
  std::vector<double> va(set.size()), vb(set.size());
  evaluate(find_method("neumann"), gt, a, va.data());
  evaluate(find_method("neumann"), gc, b, vb.data());
  const size_t zeros = set.index("decay_zeros");
  ASSERT_NE(zeros, MetricSet::npos);
  EXPECT_GT(va[zeros], 0.0);
  EXPECT_EQ(vb[zeros], 32 * va[zeros]);
}

TEST(PerChannelGates, ModelLikeDrawsEveryChannelFromTheSameLawAndLeavesTokenSamplesAsTheyWere) {
  const Configuration tc = config("model_like", 16, 64), cc = config("model_like", 16, 64, "channel");
  EXPECT_FALSE(tc.params.contains("gating")) << "token is the default and stays out of the axes";
  EXPECT_EQ(cc.axes().value("gating", ""), "channel");
  EXPECT_EQ(config("model_like", 16, 64, "token").axes(), tc.axes()) << "gating=token is the configuration without it";
  const Family& f = find_family("model_like");
  const Sample t = f.make(tc, 9, 4), c = f.make(cc, 9, 4);
  EXPECT_EQ(c.keys, t.keys);
  EXPECT_EQ(c.beta, t.beta);
  ASSERT_EQ(c.g.size(), 16u * 64);
  double mean = 0.0;
  int distinct_in_row = 0;
  for (size_t e = 0; e < c.g.size(); ++e) {
    EXPECT_LT(c.g[e], 0.0);
    EXPECT_GT(c.g[e], -5.0);
    mean += c.g[e] / double(c.g.size());
  }
  for (int k = 1; k < 64; ++k) distinct_in_row += c.gate(3, k) != c.gate(3, 0);
  EXPECT_GT(distinct_in_row, 60);
  EXPECT_NEAR(mean, -2.5, 0.15);  // -5 sigmoid(N(0,1)) has mean -2.5
  // inspect's summary reads the gates per token, and says so.
  const WitnessSummary w = summarise_witness(c, -5.0);
  ASSERT_FALSE(w.findings.empty());
  EXPECT_EQ(w.findings.back(), "per-channel gates: the gate figures above are each token's mean over its 64 channels");
  EXPECT_LT(w.g_max, 0.0);
  EXPECT_GT(w.g_min, -5.0);
  // A pure function of (seed, index, configuration).
  EXPECT_EQ(f.make(cc, 9, 4).g, c.g);
  EXPECT_NE(f.make(cc, 9, 5).g, c.g);
}

TEST(PerChannelGates, GatingAxisValuesAreCheckedInOneLine) {
  Configuration c = config("model_like", 16, 64);
  c.params["gating"] = "chanel";
  EXPECT_HAS(usage_error([&] { find_family("model_like").validate(c); }),
             "axis gating = \"chanel\" must be \"token\" or \"channel\"");
  c.params["gating"] = 1;
  EXPECT_HAS(usage_error([&] { find_family("floor").validate(c); }), "axis gating = 1 must be");
}

TEST(PerChannelGates, RunTakesTheGatingAxisAndRefusesABadValueInOneLine) {
  const std::string out = ::testing::TempDir() + "/chunkinv-gating.json";
  const auto ok = chunkinv::testing::run_shell(chunkinv::testing::binary() +
                                               " run -a family=model_like -a 'gating=[token,channel]' -a chunk=16 "
                                               "-a dim=64 --samples 20 --paths gold,emulated -q -o " + out + " 2>&1");
  ASSERT_EQ(ok.status, 0) << ok.out;
  std::ifstream in(out);
  const nlohmann::json r = nlohmann::json::parse(in);
  int channel = 0, token = 0;
  for (const auto& e : r["results"]) (e["axes"].contains("gating") ? channel : token) += 1;
  EXPECT_EQ(channel, 3);  // gold/exact, gold/neumann, emulated/neumann
  EXPECT_EQ(token, 3);
  for (const auto& e : r["results"])
    if (e["axes"].contains("gating")) {
      EXPECT_EQ(e["axes"]["gating"], "channel");
    }
  const auto bad = chunkinv::testing::run_shell(chunkinv::testing::binary() +
                                                " run -a family=model_like -a gating=chan --samples 2 -q -o " + out +
                                                ".bad 2>&1");
  EXPECT_EQ(bad.status, 2);
  EXPECT_EQ(bad.out, "chunkinv: axis gating = \"chan\" must be \"token\" or \"channel\"\n");
}
