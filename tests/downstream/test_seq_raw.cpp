// FlashKDA's raw inputs as sequences (families kda and collinear): the raw
// tensors of T tokens do not depend on the chunk; each chunk's sample is
// the chunk's raw tokens activated as the chunk family activates them (its
// rows are the whole sequence's activation: every activation is token by
// token); the references read the exact activation, the gold's, so the
// FP64 chunked forward with the gold's inverses is the recurrence; and
// every path of this machine runs them.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "downstream/experiment.hpp"
#include "downstream/forward.hpp"
#include "downstream/sources.hpp"
#include "inputs/raw.hpp"
#include "metrics/metrics.hpp"
#include "paths/gold/gold.hpp"
#include "support/usage_error.hpp"

namespace chunkinv {
namespace {

using nlohmann::json;

SeqConfig raw_config(const std::string& family, int T, int C, json params = json::object()) {
  SeqConfig c;
  c.family = family;
  c.seq_len = T;
  c.chunk = C;
  c.dim = 16;
  c.value_dim = 8;
  c.params = std::move(params);
  complete(c);
  validate_sequence_config(c);
  return c;
}

// The collinear family with a perturbation, so that its keys differ from row to row.
const json kCollinear = {{"eps", 0.3}, {"gate_raw", -2.0}, {"beta_raw", 1.0}};

TEST(SeqRaw, SequencesDoNotDependOnTheChunk) {
  for (const auto& [family, params] : {std::pair<std::string, json>{"kda", json::object()}, {"collinear", kCollinear}}) {
    const Sequence a = find_source(family).make(raw_config(family, 256, 16, params), 3, 5);
    const Sequence b = find_source(family).make(raw_config(family, 256, 64, params), 3, 5);
    ASSERT_TRUE(a.raw && b.raw) << family;
    EXPECT_EQ(a.raw->keys, b.raw->keys) << family;
    EXPECT_EQ(a.raw->g, b.raw->g) << family;
    EXPECT_EQ(a.raw->beta, b.raw->beta) << family;
    EXPECT_EQ(a.raw->dt_bias, b.raw->dt_bias) << family;
    EXPECT_EQ(a.k, b.k) << family;
    EXPECT_EQ(a.g, b.g) << family;
    EXPECT_EQ(a.beta, b.beta) << family;
    EXPECT_EQ(a.q, b.q) << family;
    EXPECT_EQ(a.v, b.v) << family;
    EXPECT_EQ(a.gating, Gating::kChannel) << family;
    EXPECT_NE(a.k, a.q) << family;
  }
}

// Chunk n's sample: its raw tokens activated by the kernel's model, whose
// rows are those of the model's activation of the whole sequence; the
// gold's exact activation of them is the sequence's k, g and beta.
TEST(SeqRaw, EachChunkIsItsRawTokensActivatedAsTheWholeSequence) {
  const SeqConfig c = raw_config("kda", 128, 32);
  const Sequence s = find_source("kda").make(c, 11, 2);
  Configuration at_t = c.chunk_config();
  at_t.chunk = c.seq_len;
  const Sample whole = find_family("kda").make(at_t, 11, 2);  // the model's activation of all T tokens
  const size_t K = 16;
  for (int n = 0; n < 4; ++n) {
    const Sample chunk = chunk_sample(s, 32, n);
    ASSERT_TRUE(chunk.raw);
    EXPECT_EQ(chunk.raw->chunk, 32);
    const size_t t0 = size_t(n) * 32;
    EXPECT_EQ(chunk.keys, std::vector<double>(whole.keys.begin() + t0 * K, whole.keys.begin() + (t0 + 32) * K)) << n;
    EXPECT_EQ(chunk.g, std::vector<double>(whole.g.begin() + t0 * K, whole.g.begin() + (t0 + 32) * K)) << n;
    EXPECT_EQ(chunk.beta, std::vector<double>(whole.beta.begin() + t0, whole.beta.begin() + t0 + 32)) << n;
    const Sample exact = activate_exact(*chunk.raw);
    EXPECT_EQ(exact.keys, std::vector<double>(s.k.begin() + t0 * K, s.k.begin() + (t0 + 32) * K)) << n;
    EXPECT_EQ(exact.g, std::vector<double>(s.g.begin() + t0 * K, s.g.begin() + (t0 + 32) * K)) << n;
    EXPECT_EQ(exact.beta, std::vector<double>(s.beta.begin() + t0, s.beta.begin() + t0 + 32)) << n;
    EXPECT_NE(chunk.keys, exact.keys) << "the kernel's activation is not the exact one";
  }
}

// The gold's inverse of each chunk (from the raw tokens, activated exactly)
// in the FP64 chunked forward: the recurrence on the sequence's k, g, beta.
TEST(SeqRaw, ChunkedFp64WithTheGoldsInversesEqualsTheRecurrence) {
  for (const auto& [family, params] : {std::pair<std::string, json>{"kda", json::object()}, {"collinear", kCollinear}}) {
    for (const int C : {16, 64}) {
      const Sequence s = find_source(family).make(raw_config(family, 1024, C, params), 1, 0);
      std::vector<Mat> inverses;
      for (int n = 0; n < s.chunks(C); ++n) inverses.push_back(compute_gold(chunk_sample(s, C, n)).inv);
      const double scale = default_scale(s);
      const Trace ref = recurrent_forward(s, C, scale);
      const Trace got = chunked_forward(s, C, inverses, fp64_storage(), scale);
      EXPECT_LE(rel_rmse(got.o, ref.o), 1e-12) << family << " C=" << C;
      EXPECT_LE(rel_rmse(got.final_state, ref.final_state), 1e-12) << family << " C=" << C;
    }
  }
}

// A run per path this machine has (gold and emulated here; kernel and
// cublas where there is a GPU): each runs both families with the methods it
// has (the GPU paths run neumann, not exact or fwdsub_fp32); the gold's exact
// inverse has no inverse-only error.
TEST(SeqRaw, EveryPathRunsTheRawFamilies) {
  std::vector<std::string> usable = path_names_usable();
  ASSERT_FALSE(usable.empty());
  for (const std::string family : {"kda", "collinear"}) {
    json axes = {{"family", family}, {"seq_len", 256}, {"chunk", 16}, {"dim", 16}, {"value_dim", 8},
                 {"method", json::array({"exact", "fwdsub_fp32", "neumann"})}};
    if (family == "collinear") axes["eps"] = 0.3;
    const auto groups = expand_sequences(axes);
    ASSERT_EQ(groups.size(), 1u);
    for (const std::string& path : usable) {
      SeqRunOptions opt;
      opt.samples = 2;
      opt.seed = 4;
      const SeqRunResult r = run_sequences(groups, parse_paths(path), opt);
      ASSERT_FALSE(r.entries.empty()) << family << " " << path << ": " << fmt::format("{}", fmt::join(r.skipped, "; "));
      for (const ReportEntry& e : r.entries) {
        EXPECT_EQ(e.axes["family"], family);
        EXPECT_EQ(e.samples, 2u);
        const double storage = e.metrics.at("o_rel_rmse_storage").median;
        EXPECT_GT(storage, 1e-5) << "BF16 storage of fla_chunk_kda";
        EXPECT_LT(storage, 5e-2);
        const bool exact = e.axes["path"] == "gold" && e.axes["method"] == "exact";
        const double inverse_only = e.metrics.at("o_rel_rmse_inverse_only").max;
        if (exact) {
          EXPECT_LE(inverse_only, 1e-12) << family;
        }
        const bool finite = e.metrics.at("o_finite").mean == 1.0;
        if (!exact && finite) {
          EXPECT_GT(inverse_only, 0.0) << family << " " << path;
        }
      }
    }
  }
}

TEST(SeqRaw, PerTokenStorageIsRefused) {
  EXPECT_HAS(testing::usage_error([] { expand_sequences({{"family", "kda"}, {"seq_len", 256}, {"chunk", 16},
                                                        {"storage", "fla_chunk_gdn"}}); }),
             "family kda's gates are per channel");
}

}  // namespace
}  // namespace chunkinv
