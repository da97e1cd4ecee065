// The downstream stage against its references: the chunked forward with the
// exact inverse in FP64 equals the token recurrence; the state propagation
// against finite differences; a scored candidate reports the perturbation
// it was given; runs are the same on any thread count; bad input is one line.
#include <cmath>
#include <filesystem>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/rng.hpp"
#include "io/zip.hpp"
#include "downstream/experiment.hpp"
#include "downstream/forward.hpp"
#include "downstream/scores.hpp"
#include "downstream/sources.hpp"
#include "gpu/gpu.hpp"
#include "metrics/metrics.hpp"
#include "paths/gold/gold.hpp"
#include "support/sequences.hpp"
#include "support/shell.hpp"
#include "support/usage_error.hpp"

namespace chunkinv {
namespace {

using nlohmann::json;

using testing::config;
using testing::exact_inverses;

double max_boundary_error(const Trace& a, const Trace& ref) {
  double m = 0;
  for (size_t b = 0; b < ref.boundaries.size(); ++b) m = std::max(m, rel_rmse(a.boundaries[b], ref.boundaries[b]));
  return m;
}

// The FP64 chunked forward with the exact inverse is the recurrence, over
// 4,096 tokens at C = 16 (with an initial state) and 64 (without), per-token
// and per-channel gates: o, every boundary state and the final state.
TEST(Downstream, ChunkedFp64WithTheExactInverseEqualsTheRecurrence) {
  for (const char* gating : {"token", "channel"})
    for (int C : {16, 64}) {
      const char* h0 = C == 16 ? "random" : "zero";
      SeqConfig c = config("model_like", 4096, C, 32, 32, {{"gating", gating}});
      c.initial_state = h0;
      const Sequence s = find_source(c.family).make(c, 7, 3);
      const double scale = default_scale(s);
      const Trace ref = recurrent_forward(s, C, scale);
      const Trace chunked = chunked_forward(s, C, exact_inverses(s, C), fp64_storage(), scale);
      SCOPED_TRACE(::testing::Message() << gating << " C=" << C << " h0=" << h0);
      EXPECT_LE(rel_rmse(chunked.o, ref.o), 1e-12);
      EXPECT_LE(rel_rmse(chunked.final_state, ref.final_state), 1e-12);
      EXPECT_LE(max_boundary_error(chunked, ref), 1e-12);
      EXPECT_GT(ref.o.norm(), 0.0);
    }
}

// Gates that forget hard (sparse_forget: g = -10 one token in 200; real
// gates to -167 a token): the decays are formed per pair and never overflow.
TEST(Downstream, StrongForgetsStayExact) {
  const SeqConfig sf = config("sparse_forget", 2048, 64, 32, 32, {{"forget_rate", 0.02}, {"forget", -40.0}});
  const SeqConfig rg = config("real_gates", 1024, 64, 32, 32, {{"model", "Qwen3-Next"}});
  for (const SeqConfig* c : {&sf, &rg}) {
    const Sequence s = find_source(c->family).make(*c, 0, 1);
    const Trace ref = recurrent_forward(s, c->chunk, default_scale(s));
    const Trace chunked = chunked_forward(s, c->chunk, exact_inverses(s, c->chunk), fp64_storage(), default_scale(s));
    EXPECT_TRUE(chunked.o.allFinite()) << c->family;
    EXPECT_LE(rel_rmse(chunked.o, ref.o), 1e-12) << c->family;
    EXPECT_LE(max_boundary_error(chunked, ref), 1e-12) << c->family;
  }
}

// The state propagates linearly: d(o, ht)/d(h0) along D by central
// differences of the recurrence equals the chunked forward's propagation of
// D alone (zero values, so only the w S0 and e^G S0 terms act).
TEST(Downstream, StatePropagationMatchesFiniteDifferences) {
  for (const char* gating : {"token", "channel"}) {
    // Weak decay and few tokens, so that h0 still reaches the end (each token
    // also contracts the state along its key).
    SeqConfig c = config("model_like", 128, 16, 16, 16, {{"gating", gating}, {"decay_floor", -0.05}});
    c.initial_state = "random";
    const Sequence s = find_source(c.family).make(c, 1, 0);
    const Rng rng(5, 0, Stream::kUser);
    std::vector<double> d(s.h0.size());
    for (size_t i = 0; i < d.size(); ++i) d[i] = rng.normal(i);
    const double eps = 1e-3, scale = default_scale(s);
    Sequence plus = s, minus = s, alone = s;
    for (size_t i = 0; i < d.size(); ++i) plus.h0[i] += eps * d[i], minus.h0[i] -= eps * d[i];
    alone.h0 = d;
    std::fill(alone.v.begin(), alone.v.end(), 0.0);
    const Trace tp = recurrent_forward(plus, 16, scale), tm = recurrent_forward(minus, 16, scale);
    const Trace prop = chunked_forward(alone, 16, exact_inverses(alone, 16), fp64_storage(), scale);
    const Mat fd_o = (tp.o - tm.o) / (2 * eps), fd_ht = (tp.final_state - tm.final_state) / (2 * eps);
    EXPECT_LE(rel_rmse(prop.o, fd_o), 1e-9) << gating;
    EXPECT_LE(rel_rmse(prop.final_state, fd_ht), 1e-9) << gating;
    EXPECT_GT(fd_ht.norm(), 1e-6) << gating;  // the initial state still reaches the end
  }
}

// Streamed over blocks of rows, rel_rmse is SPEC §3's of the whole matrix.
TEST(Downstream, StreamedRelRmseEqualsTheWholeMatrix) {
  const SeqConfig c = config("model_like", 256, 16, 8, 8);
  const Sequence s = find_source(c.family).make(c, 0, 0);
  const Trace ref = recurrent_forward(s, 16, default_scale(s));
  Mat noisy = ref.o;
  for (Eigen::Index i = 0; i < noisy.size(); ++i) noisy.data()[i] *= 1 + 1e-3 * std::sin(static_cast<double>(i));
  RelRmseSum sum;
  for (int r = 0; r < 256; r += 16) sum.add(noisy.middleRows(r, 16), ref.o.middleRows(r, 16));
  EXPECT_EQ(sum.value(), rel_rmse(noisy, ref.o));
  noisy(3, 1) = NAN;
  RelRmseSum bad;
  bad.add(noisy, ref.o);
  EXPECT_EQ(bad.value(), INFINITY);
}

// A candidate equal to the reference times (1 + e) in one window reports e
// there and 0 elsewhere, ht times (1 + e) reports e; a NaN at position 300
// is the first non-finite position.
TEST(Downstream, ScoringACandidateReportsItsPerturbation) {
  const SeqConfig c = config("model_like", 1024, 64, 16, 16);
  const Sequence s = find_source(c.family).make(c, 2, 0);
  const Trace ref = recurrent_forward(s, 64, default_scale(s));
  const double e = 3e-3;
  Mat o = ref.o;
  o.middleRows(256, 256) *= 1 + e;
  const Mat ht = ref.final_state * (1 + e);
  const VariantScore score = score_candidate(s, 256, o, &ht);
  ASSERT_EQ(score.windows(), 4u);
  EXPECT_EQ(score.window_rel_rmse(0), 0.0);
  EXPECT_NEAR(score.window_rel_rmse(1), e, 1e-12);
  EXPECT_EQ(score.window_rel_rmse(2), 0.0);
  EXPECT_NEAR(score.ht_rel_rmse(), e, 1e-12);
  EXPECT_GT(score.o_rel_rmse(), 0.0);
  EXPECT_LT(score.o_rel_rmse(), e);
  EXPECT_EQ(score.first_nonfinite(), -1);
  o(300, 2) = NAN;
  EXPECT_EQ(score_candidate(s, 256, o, nullptr).first_nonfinite(), 300);
  EXPECT_HAS(testing::usage_error([&] { score_candidate(s, 256, o.topRows(10), nullptr); }), "candidate o is 10 x 16");
}

// The recurrence's dot products follow the one order the GPU form computes
// (forward.hpp): at K = 32, slice r holds rows 2r, 2r+1, 16+2r, 17+2r; chain
// 0 the even ones, chain 1 the odd; the slices combine as
// ((P0 + P4) + (P1 + P5)) + ((P2 + P6) + (P3 + P7)). Terms of mixed scale
// make other orders give other bits (checked: the plain ascending sum differs).
TEST(Downstream, RecurrenceDotsFollowTheOneOrder) {
  const int K = 32, V = 64;
  const Rng rng(3, 0, Stream::kUser);
  std::vector<double> a(K);
  Mat S(K, V);
  for (int c = 0; c < K; ++c) a[c] = rng.normal(c) * std::ldexp(1.0, (c * 7) % 23 - 11);
  for (int i = 0; i < K * V; ++i) S.data()[i] = rng.normal(1000 + i);
  std::vector<double> out(V);
  recurrence_dots(a.data(), S, out.data());
  int differs_from_ascending = 0;
  for (int e = 0; e < V; ++e) {
    double p[8];
    for (int r = 0; r < 8; ++r) {
      const double c0 = std::fma(a[16 + 2 * r], S(16 + 2 * r, e), std::fma(a[2 * r], S(2 * r, e), 0.0));
      const double c1 = std::fma(a[17 + 2 * r], S(17 + 2 * r, e), std::fma(a[2 * r + 1], S(2 * r + 1, e), 0.0));
      p[r] = c0 + c1;
    }
    const double want = ((p[0] + p[4]) + (p[1] + p[5])) + ((p[2] + p[6]) + (p[3] + p[7]));
    EXPECT_EQ(out[e], want) << "column " << e;
    double ascending = 0;
    for (int c = 0; c < K; ++c) ascending += a[c] * S(c, e);
    differs_from_ascending += ascending != out[e];
  }
  EXPECT_GT(differs_from_ascending, 0);
  // K = 13: slices 0..5 hold two rows, slice 6 row 12 alone, slice 7 none (its partial +0).
  Mat S13 = S.topRows(13);
  recurrence_dots(a.data(), S13, out.data());
  for (int e = 0; e < V; ++e) {
    double p[8] = {};
    for (int r = 0; r < 6; ++r) p[r] = std::fma(a[2 * r], S13(2 * r, e), 0.0) + std::fma(a[2 * r + 1], S13(2 * r + 1, e), 0.0);
    p[6] = std::fma(a[12], S13(12, e), 0.0) + 0.0;
    p[7] = 0.0 + 0.0;
    EXPECT_EQ(out[e], ((p[0] + p[4]) + (p[1] + p[5])) + ((p[2] + p[6]) + (p[3] + p[7]))) << "K = 13, column " << e;
  }
}

// A sequence does not depend on the chunk it is cut into.
TEST(Downstream, SequencesDoNotDependOnTheChunk) {
  const json rate = {{"forget_rate", 0.05}};
  const SeqConfig a = config("sparse_forget", 512, 16, 8, 8, rate), b = config("sparse_forget", 512, 64, 8, 8, rate);
  const Sequence sa = find_source("sparse_forget").make(a, 4, 9), sb = find_source("sparse_forget").make(b, 4, 9);
  EXPECT_EQ(sa.k, sb.k);
  EXPECT_EQ(sa.q, sb.q);
  EXPECT_EQ(sa.v, sb.v);
  EXPECT_EQ(sa.g, sb.g);
  EXPECT_NE(sa.q, sa.k);
  int forgets = 0;
  for (double g : sa.g) forgets += g == -10.0;
  EXPECT_GT(forgets, 5);  // about 26 expected
  EXPECT_LT(forgets, 60);
}

json entries_json(const SeqRunResult& r) {
  json j = json::array();
  for (const auto& e : r.entries) j.push_back(entry_to_json(e));
  return j;
}

// A sequence is a sample of the one driver (run_experiment): the sequence
// back-end takes the groups of sequences and only those, the chunk runner
// refuses them, run_sequences is run_experiment over the sequence back-end,
// and the driver's stop rules hold for sequences as for chunks.
TEST(Downstream, SequencesRunThroughTheRunsDriver) {
  const auto paths = parse_paths("gold,emulated");
  SequenceBackend sequences(paths, 1, false);
  Group chunks;
  chunks.config.family = "floor";
  chunks.config.dim = 16;
  EXPECT_FALSE(sequences.takes(chunks, StatsOptions{}, nullptr));
  struct Nothing final : Sink {
    void consume(const BatchResult&) override {}
  } nothing;
  EXPECT_THROW(sequences.run(chunks, 0, {0, 1}, nothing), std::logic_error);
  Group seq;
  seq.config = chunks.config;
  seq.sequence = std::make_shared<const SeqGroup>();
  EXPECT_TRUE(sequences.takes(seq, StatsOptions{}, nullptr));
  RunnerOptions one_thread;
  one_thread.threads = 1;
  Runner runner(paths, one_thread);
  EXPECT_THROW(runner.run(seq, 0, {0, 1}, nothing), std::logic_error);

  const auto groups = expand_sequences({{"family", "model_like"}, {"seq_len", 64}, {"chunk", 16}, {"dim", 16},
                                        {"value_dim", 16}, {"method", "neumann"}, {"storage", "fp64"}});
  SeqRunOptions opt;
  opt.samples = 3;
  opt.seed = 5;
  opt.threads = 1;
  opt.per_sample = true;
  const SeqRunResult all = run_sequences(groups, paths, opt);
  ASSERT_EQ(all.entries.size(), 2u);
  EXPECT_EQ(all.entries[0].samples, 3u);
  StatsOptions stats;
  stats.per_sample = true;
  const Plan plan = plan_sequences(groups, paths, opt);
  ASSERT_EQ(plan.groups.size(), 1u);
  const RunResult same = run_experiment(sequences, paths, plan, 0, opt.seed, stats, RunControl{});
  EXPECT_EQ(entries_json({same.entries, {}}), entries_json(all));
  // Stop once two sequences have a finite o: the first two of the three, their values as before.
  StopRule rule;
  rule.metric = "o_finite";
  rule.kind = StopRule::Kind::kSuccesses;
  rule.count = 2;
  stats.until = &rule;
  const RunResult stopped = run_experiment(sequences, paths, plan, 0, opt.seed, stats, RunControl{});
  ASSERT_EQ(stopped.entries.size(), 2u);
  EXPECT_EQ(stopped.entries[1].samples, 2u);
  const auto& full = all.entries[1].per_sample.at("o_rel_rmse");
  EXPECT_EQ(stopped.entries[1].per_sample.at("o_rel_rmse"), std::vector<double>(full.begin(), full.begin() + 2));
}

// The decomposition on a run: the gold's exact inverse has no inverse-only
// error; FP16 Neumann's has one; the fla preset's storage error is BF16's.
// One thread or two: the same report.
TEST(Downstream, RunDecomposesAndIsTheSameOnAnyThreadCount) {
  const auto groups = expand_sequences(
      {{"family", "model_like"}, {"seq_len", 512}, {"chunk", 16}, {"dim", 16}, {"value_dim", 16},
       {"method", json::array({"exact", "neumann"})}, {"storage", "fla_chunk_kda"}});
  ASSERT_EQ(groups.size(), 1u);
  SeqRunOptions opt;
  opt.samples = 2;
  opt.threads = 1;
  const auto paths = parse_paths("gold,emulated");
  const SeqRunResult one = run_sequences(groups, paths, opt);
  opt.threads = 2;
  const SeqRunResult two = run_sequences(groups, paths, opt);
  EXPECT_EQ(entries_json(one), entries_json(two));
  const auto median = [&](const std::string& path, const std::string& method, const std::string& metric) -> double {
    for (const auto& e : one.entries)
      if (e.axes["path"] == path && e.axes["method"] == method) return e.metrics.at(metric).median;
    ADD_FAILURE() << path << " " << method;
    return NAN;
  };
  EXPECT_LE(median("gold", "exact", "o_rel_rmse_inverse_only"), 1e-13);
  EXPECT_GT(median("emulated", "neumann", "o_rel_rmse_inverse_only"), 1e-8);
  const double storage = median("gold", "exact", "o_rel_rmse_storage");
  EXPECT_GT(storage, 1e-4);
  EXPECT_LT(storage, 3e-2);
  EXPECT_EQ(median("gold", "exact", "o_rel_rmse"), storage);  // exact inverse: total = storage
  EXPECT_EQ(median("gold", "exact", "o_finite"), 1.0);
  EXPECT_EQ(median("gold", "exact", "o_first_nonfinite"), 512.0);
  EXPECT_TRUE(one.entries[0].metrics.count("o_rel_rmse_from_480"));
}

TEST(Downstream, BadConfigurationsAreOneLine) {
  using testing::usage_error;
  const auto grid = [](json extra) {
    json a = {{"family", "model_like"}, {"seq_len", 1024}, {"chunk", 64}};
    for (const auto& [k, v] : extra.items()) a[k] = v;
    return [a] { expand_sequences(a); };
  };
  EXPECT_HAS(usage_error(grid({{"seq_len", 1000}})), "axis seq_len = 1000 is not a whole number of chunks of 64");
  EXPECT_HAS(usage_error(grid({{"seq_len", 131072}})), "seq_len = 131072 is outside 1..65536");
  EXPECT_HAS(usage_error(grid({{"seq_lne", 64}})), "did you mean \"seq_len\"");
  EXPECT_HAS(usage_error(grid({{"storage", "fla_chunk_gdn"}, {"gating", "channel"}})), "per-token gates only");
  EXPECT_HAS(usage_error(grid({{"storage", "fla_kda"}})), "not a preset");
  EXPECT_HAS(usage_error(grid({{"window", 100}})), "axis window = 100 must divide seq_len");
  EXPECT_HAS(usage_error(grid({{"decay_floor", 1.0}})), "decay_floor");
  EXPECT_HAS(usage_error(grid({{"family", "real_gates"}, {"seq_len", 2048}})), "longer than every captured sequence");
  EXPECT_HAS(usage_error(grid({{"chunk", 1.5}})), "axis chunk = 1.5 must be a whole number");
}

// The command: a report `table` reads; bad input is one line, exit 2, nothing written.
// `bench --recurrence`: without a GPU one line and exit 2, nothing written;
// with one, a small run checked bit for bit against the CPU before it is
// timed (V odd, per-token gates, h0). Bad shapes are one line either way.
TEST(DownstreamCli, BenchRecurrenceChecksBeforeItTimes) {
  const std::string dir = testing::test_dir("bench-recurrence");
  const std::string small = "bench --recurrence --batch 2 --heads 3 --seq-len 100 --key-dim 16 --value-dim 13 "
                            "--gating token --initial-state random --block 37 --validate 6 --repeat 2 --threads 2 -q -o r.json";
  const auto r = testing::run_chunkinv_in(dir, small);
  if (!gpu::unavailable_reason().empty()) {
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
    EXPECT_HAS(r.out, "no CUDA GPU");
    EXPECT_FALSE(std::filesystem::exists(dir + "/r.json"));
  } else {
    ASSERT_EQ(r.status, 0) << r.out;
    const json j = testing::load_json(dir + "/r.json")["recurrence"];
    EXPECT_EQ(j["identical_to_cpu"], true);
    EXPECT_EQ(j["o_values_checked"], 6 * 100 * 13);
    EXPECT_EQ(j["o_values_differing"], 0);
    EXPECT_EQ(j["pass_ms"].size(), 2u);
    EXPECT_GT(j["token_heads_per_s"].get<double>(), 0.0);
  }
  if (gpu::unavailable_reason().empty())  // version 2 of the kernel: the same bits, checked the same way
    for (const int version : {2}) {
      const auto rv = testing::run_chunkinv_in(
          dir, small.substr(0, small.find(" -o ")) + fmt::format(" --kernel-version {} -o rv.json", version));
      ASSERT_EQ(rv.status, 0) << rv.out;
      const json j = testing::load_json(dir + "/rv.json")["recurrence"];
      EXPECT_EQ(j["kernel_version"], version);
      EXPECT_EQ(j["identical_to_cpu"], true);
      EXPECT_EQ(j["o_values_differing"], 0);
    }
  for (const char* bad : {"bench --recurrence --key-dim 24", "bench --recurrence --gating head", "bench --batch 4",
                          "bench --recurrence -a chunk=16", "bench --recurrence --kernel-version 3",
                          "bench --kernel-version 2"}) {
    const auto b = testing::run_chunkinv_in(dir, std::string(bad) + " -o bad.json");
    EXPECT_EQ(b.status, 2) << bad << ": " << b.out;
    EXPECT_EQ(std::count(b.out.begin(), b.out.end(), '\n'), 1) << bad << ": " << b.out;
    EXPECT_FALSE(std::filesystem::exists(dir + "/bad.json")) << bad;
  }
}

// bench --backward: the GPU's chunked backward against the host's, every
// value checked; without a GPU one line, exit 2, nothing written; bad
// options one line, exit 2.
TEST(DownstreamCli, BenchBackwardChecksThenTimes) {
  const std::string dir = testing::test_dir("bench-backward");
  const auto r = testing::run_chunkinv_in(
      dir, "bench --backward --seq-len 96 --chunk 16 --key-dim 16 --value-dim 13 --variants 3 --repeat 2 "
           "--initial-state random --threads 2 -o r.json");
  if (!gpu::unavailable_reason().empty()) {
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
    EXPECT_HAS(r.out, "no CUDA GPU");
    EXPECT_FALSE(std::filesystem::exists(dir + "/r.json"));
  } else {
    ASSERT_EQ(r.status, 0) << r.out;
    const json j = testing::load_json(dir + "/r.json")["backward"];
    EXPECT_EQ(j["identical_to_host"], true);
    // per variant: dq, dk (16), dv (13), dg (16), dbeta (1) of 96 tokens, and the state gradient (16 x 13)
    EXPECT_EQ(j["values_checked"], 3 * (96 * (16 + 16 + 13 + 16 + 1) + 16 * 13));
    EXPECT_EQ(j["values_differing"], 0);
    EXPECT_EQ(j["gpu_pass_ms"].size(), 2u);
    EXPECT_GT(j["gpu_token_variants_per_s"].get<double>(), 0.0);
  }
  for (const char* bad : {"bench --backward --chunk 65", "bench --backward --seq-len 100 --chunk 16",
                          "bench --backward --storage nope", "bench --backward --gating head", "bench --chunk 16",
                          "bench --recurrence --backward", "bench --backward --batch 4"}) {
    const auto b = testing::run_chunkinv_in(dir, std::string(bad) + " -o bad.json");
    EXPECT_EQ(b.status, 2) << bad << ": " << b.out;
    EXPECT_EQ(std::count(b.out.begin(), b.out.end(), '\n'), 1) << bad << ": " << b.out;
    EXPECT_FALSE(std::filesystem::exists(dir + "/bad.json")) << bad;
  }
}

// seq --pipeline device: the recurrence, the chunked forwards and the
// backwards on the GPU, the host's report (every entry, bit for bit; two
// blocks of chunks, so the backward steps back from a checkpoint); without a
// GPU one line, exit 2, nothing written.
TEST(DownstreamCli, SeqPipelineDeviceIsTheHostsReport) {
  const std::string dir = testing::test_dir("seq-device");
  const std::string run = "seq -a seq_len=4160 -a chunk=16 -a dim=32 -a value_dim=24 -a gating=channel "
                          "-a initial_state=random -a method=neumann -a backward=[none,stored] --samples 2 --threads 2 -q";
  const auto dev = testing::run_chunkinv_in(dir, run + " --pipeline device -o device.json");
  if (!gpu::unavailable_reason().empty()) {
    EXPECT_EQ(dev.status, 2) << dev.out;
    EXPECT_EQ(std::count(dev.out.begin(), dev.out.end(), '\n'), 1) << dev.out;
    EXPECT_HAS(dev.out, "--pipeline device");
    EXPECT_FALSE(std::filesystem::exists(dir + "/device.json"));
  } else {
    ASSERT_EQ(dev.status, 0) << dev.out;
    const auto host = testing::run_chunkinv_in(dir, run + " --pipeline host -o host.json");
    ASSERT_EQ(host.status, 0) << host.out;
    const json d = testing::load_json(dir + "/device.json"), h = testing::load_json(dir + "/host.json");
    EXPECT_EQ(d["results"], h["results"]);
    EXPECT_EQ(d["meta"]["downstream"]["reference_pipeline"], "device");
  }
  const auto bad = testing::run_chunkinv_in(dir, "seq -a dim=24 -a seq_len=64 -a chunk=16 --pipeline device -o bad.json");
  EXPECT_EQ(bad.status, 2) << bad.out;
  EXPECT_EQ(std::count(bad.out.begin(), bad.out.end(), '\n'), 1) << bad.out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/bad.json"));
}

TEST(DownstreamCli, WritesAReportAndRefusesBadInput) {
  const std::string dir = testing::test_dir("seq");
  const auto ok = testing::run_chunkinv_in(
      dir, "seq -a seq_len=256 -a chunk=16 -a dim=16 -a value_dim=16 -a method=fwdsub_fp32 --samples 2 --threads 2 -q -o r.json");
  ASSERT_EQ(ok.status, 0) << ok.out;
  const json r = testing::load_json(dir + "/r.json");
  EXPECT_EQ(r["results"].size(), 2u);  // gold and emulated
  EXPECT_EQ(r["results"][0]["axes"]["storage"], "fla_chunk_kda");
  const auto table = testing::run_chunkinv_in(dir, "table r.json --preset downstream");
  EXPECT_EQ(table.status, 0) << table.out;
  EXPECT_HAS(table.out, "Inverse share median");
  const auto bad = testing::run_chunkinv_in(dir, "seq -a seq_len=100 -a chunk=16 -o bad.json");
  EXPECT_EQ(bad.status, 2);
  EXPECT_EQ(std::count(bad.out.begin(), bad.out.end(), '\n'), 1) << bad.out;
  EXPECT_HAS(bad.out, "seq_len = 100");
  EXPECT_FALSE(std::filesystem::exists(dir + "/bad.json"));
}

Tensor tensor(std::vector<int64_t> shape, std::vector<double> values) {
  Tensor t;
  t.dtype = DType::kF32;
  t.shape = std::move(shape);
  t.values = std::move(values);
  return t;
}

// Two generated sequences (heads of one batch row) written in fla's layout,
// read back as the same sequences; a candidate o = the recurrence's times
// (1 + e) and ht = the recurrence's scores e through the command line;
// sequences that are not whole chunks are one line.
TEST(DownstreamCli, ScoresAKernelsOutputsInFlasLayout) {
  const std::string dir = testing::test_dir("seq-inputs");
  const int T = 128, H = 2, K = 8, V = 8;
  SeqConfig c = config("model_like", T, 16, K, V);
  c.initial_state = "random";
  std::vector<Sequence> heads;
  for (int h = 0; h < H; ++h) heads.push_back(find_source(c.family).make(c, 3, h));
  std::vector<double> q, k, v, g, beta, h0, o, ht;
  const double e = 1e-3;
  std::vector<Trace> refs;
  for (int h = 0; h < H; ++h) refs.push_back(recurrent_forward(heads[h], 16, default_scale(heads[h])));
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
  for (int h = 0; h < H; ++h) {
    h0.insert(h0.end(), heads[h].h0.begin(), heads[h].h0.end());
    for (Eigen::Index i = 0; i < refs[h].final_state.size(); ++i) ht.push_back(refs[h].final_state.data()[i] * (1 + e));
  }
  // f32 holds the BF16 inputs exactly; g, beta and the candidate's o and ht in f64.
  const auto f64 = [](Tensor t) {
    t.dtype = DType::kF64;
    return t;
  };
  write_npz(dir + "/in.npz", {{"q", tensor({1, T, H, K}, q)}, {"k", tensor({1, T, H, K}, k)},
                              {"v", tensor({1, T, H, V}, v)}, {"g", f64(tensor({1, T, H}, g))},
                              {"beta", f64(tensor({1, T, H}, beta))}, {"initial_state", tensor({1, H, K, V}, h0)}});
  write_npz(dir + "/out.npz", {{"o", f64(tensor({1, T, H, V}, o))}, {"ht", f64(tensor({1, H, K, V}, ht))}});
  const SequenceSet set = load_sequences(dir + "/in.npz");
  ASSERT_EQ(set.sequences.size(), 2u);
  EXPECT_EQ(set.sequences[1].q, heads[1].q);
  EXPECT_EQ(set.sequences[1].h0, heads[1].h0);
  const auto r = testing::run_chunkinv_in(dir, "seq --inputs in.npz --candidate out.npz -a chunk=16 -a method=fla_solve_tril -q -o s.json");
  ASSERT_EQ(r.status, 0) << r.out;
  const json j = testing::load_json(dir + "/s.json");
  ASSERT_EQ(j["results"].size(), 1u);
  const json& m = j["results"][0]["metrics"];
  EXPECT_NEAR(m["o_rel_rmse"]["max"].get<double>(), e, 1e-9);
  EXPECT_NEAR(m["ht_rel_rmse"]["min"].get<double>(), e, 1e-9);
  EXPECT_EQ(j["results"][0]["axes"]["path"], "candidate");
  EXPECT_EQ(j["results"][0]["samples"], 2);
  // The same sequences through gold and emulated: the file's sequences, not the family's.
  const auto run = testing::run_chunkinv_in(dir, "seq --inputs in.npz -a chunk=16 -q -o m.json");
  ASSERT_EQ(run.status, 0) << run.out;
  const auto bad = testing::run_chunkinv_in(dir, "seq --inputs in.npz -a chunk=48 -o bad.json");
  EXPECT_EQ(bad.status, 2);
  EXPECT_HAS(bad.out, "sequence 0 (head 0) has 128 tokens, not a whole number of chunks of 48");
  EXPECT_FALSE(std::filesystem::exists(dir + "/bad.json"));
}

}  // namespace
}  // namespace chunkinv
