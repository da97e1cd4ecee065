// chunkinv score, run as the user runs it (the binary, through popen): the
// L, INV and decays that `inspect --export --export-path emulated` writes,
// scored as a candidate, give the emulated path's metrics exactly, per
// sample and aggregated; a candidate in the fla layout [B, T, H, C] is cut
// like its inputs; INV alone is scored with the L it inverts; a bad
// candidate is one line and exit 2.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>

#include "core/fp.hpp"
#include "inputs/tensor_set.hpp"
#include "io/zip.hpp"
#include "methods/method.hpp"
#include "paths/path.hpp"
#include "paths/gold/gold.hpp"
#include "core/thread_pool.hpp"
#include "report/report.hpp"
#include "support/shell.hpp"

using namespace chunkinv;
namespace fs = std::filesystem;

namespace {

struct Result {
  int status = -1;
  std::string out;
};

Result chunkinv_cli(const std::string& args) {
  const auto r = chunkinv::testing::run_shell(chunkinv::testing::binary() + " " + args + " 2>&1");
  return {r.status, r.out};
}

std::string temp_dir() { return chunkinv::testing::test_dir("score"); }

const ReportEntry& entry(const Report& r, const std::string& path, const std::string& method) {
  for (const ReportEntry& e : r.results)
    if (e.axes["path"] == path && e.axes["method"] == method) return e;
  ADD_FAILURE() << "no entry " << path << "/" << method;
  static const ReportEntry none;
  return none;
}

bool same(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

// Every statistic and every per-sample value of two entries, bit for bit.
void expect_same_metrics(const ReportEntry& a, const ReportEntry& b) {
  ASSERT_EQ(a.metrics.size(), b.metrics.size());
  EXPECT_EQ(a.samples, b.samples);
  for (const auto& [name, s] : a.metrics) {
    ASSERT_TRUE(b.metrics.count(name)) << name;
    const Stats& t = b.metrics.at(name);
    for (const std::string& stat : stat_names()) EXPECT_TRUE(same(stat_value(s, stat), stat_value(t, stat))) << name << " " << stat;
    ASSERT_TRUE(a.per_sample.count(name) && b.per_sample.count(name)) << name;
    const auto& x = a.per_sample.at(name);
    const auto& y = b.per_sample.at(name);
    ASSERT_EQ(x.size(), y.size());
    for (size_t i = 0; i < x.size(); ++i) EXPECT_TRUE(same(x[i], y[i])) << name << " sample " << i;
  }
}

}  // namespace

TEST(ScoreCli, ExportedEmulatedInverseReproducesTheEmulatedPathsMetrics) {
  const std::string dir = temp_dir();
  // model_like: finite everywhere; floor -5 at C = 20: decays underflow, inverse decays overflow.
  const std::vector<std::pair<std::string, std::string>> cases{
      {"--family model_like -a chunk=16 -a dim=64 --count 40", "ml"},
      {"--family floor -a chunk=20 -a dim=32 -a decay_floor=-5 --count 12", "floor"},
      {"--family model_like -a chunk=24 -a dim=32 -a method=fwdsub_fp32 --count 16", "fwdsub"},
  };
  for (const auto& [family, name] : cases) {
    SCOPED_TRACE(name);
    const std::string x = dir + "/" + name + ".npz";
    const std::string method = name == "fwdsub" ? " -a method=fwdsub_fp32" : "";
    Result r = chunkinv_cli("inspect " + family + " --seed 3 --export " + x + " --export-path emulated");
    ASSERT_EQ(r.status, 0) << r.out;
    r = chunkinv_cli("run --inputs " + x + method + " --paths gold,emulated --per-sample -q -o " + dir + "/run.json");
    ASSERT_EQ(r.status, 0) << r.out;
    r = chunkinv_cli("score --inputs " + x + " --candidate " + x + method + " --per-sample -q -o " + dir + "/score.json");
    ASSERT_EQ(r.status, 0) << r.out;
    const Report run = read_report(dir + "/run.json");
    const Report score = read_report(dir + "/score.json");
    const std::string m = name == "fwdsub" ? "fwdsub_fp32" : "neumann";
    const ReportEntry& emulated = entry(run, "emulated", m);
    const ReportEntry& candidate = entry(score, "candidate", m);
    expect_same_metrics(emulated, candidate);
    expect_same_metrics(entry(run, "gold", "exact"), entry(score, "gold", "exact"));
    // Not a comparison of constants: the errors differ between samples, and
    // the floor case holds non-finite inverses and lost decays.
    const auto& err = candidate.per_sample.at("inv_total_rel_rmse");
    if (name != "floor") {
      EXPECT_NE(*std::min_element(err.begin(), err.end()), *std::max_element(err.begin(), err.end()));
    }
    if (name == "floor") {
      EXPECT_LT(candidate.metrics.at("inv_finite").mean, 1.0);
      EXPECT_GT(candidate.metrics.at("decay_zeros").max, 0.0);
    }
  }
}

TEST(ScoreCli, TokenLayoutCandidateIsCutLikeItsInputs) {
  // fla's layout: keys [1, T, H, K] with cu_seqlens; the candidate's L and INV
  // [1, T, H, C] hold each token's row of its chunk, as fla's A does.
  const std::string dir = temp_dir();
  const int64_t t = 45, h = 2, k = 16;
  const int c = 16;
  TensorMap m;
  m["keys"] = {DType::kBF16, {1, t, h, k}, {}};
  m["g"] = {DType::kF32, {1, t, h}, {}};
  m["beta"] = {DType::kF32, {1, t, h}, {}};
  m["cu_seqlens"] = {DType::kI64, {3}, {0, 21, 45}};
  for (int64_t i = 0; i < t * h * k; ++i) m["keys"].values.push_back(bf16(std::cos(0.3 + i * 0.77) * 0.25));
  for (int64_t i = 0; i < t * h; ++i) {
    m["g"].values.push_back(i == 7 ? -0.0 : -0.02 - 0.4 * (1 + std::sin(i * 2.1)));
    m["beta"].values.push_back(0.3 + 0.5 * std::fabs(std::sin(i * 0.37)));
  }
  const std::string x = dir + "/in.npz";
  write_npz(x, m);
  // The emulated path's L and INV of every chunk, written at their tokens.
  const TensorSet set = load_tensor_set(x);
  const auto chunks = chunk_tokens(set, c, Tail::kPad);
  ASSERT_EQ(chunks.size(), 2u * (2 + 2));  // 21 -> 16 + 5 padded, 24 -> 16 + 8 padded
  std::vector<Sample> samples;
  std::vector<GoldOutput> gold;
  for (const TokenChunk& ch : chunks) samples.push_back(chunk_sample(set, ch, c)), gold.push_back(compute_gold(samples.back()));
  const PathChoice emulated = parse_paths("emulated")[0];
  auto path = make_path(emulated);
  const Method neumann = method_of(default_method());
  const Method* ms[] = {&neumann};
  std::vector<PathOutput> out(samples.size());
  ThreadPool pool(1);
  path->run_batch({samples, gold, 0}, ms, out, pool, false);
  TensorMap cand;
  cand["L"] = {DType::kF32, {1, t, h, c}, std::vector<double>(t * h * c, 0.0)};
  cand["INV"] = {DType::kF32, {1, t, h, c}, std::vector<double>(t * h * c, 0.0)};
  for (size_t i = 0; i < chunks.size(); ++i)
    for (int r = 0; r < chunks[i].valid; ++r)
      for (int col = 0; col < c; ++col) {
        const size_t at = ((chunks[i].first + r) * h + chunks[i].head) * c + col;
        cand["L"].values[at] = out[i].l.L(r, col);
        cand["INV"].values[at] = out[i].on_path_l.inv(r, col);
      }
  write_npz(dir + "/cand.npz", cand);
  Result r = chunkinv_cli("run --inputs " + x + " --paths gold,emulated --per-sample -q -o " + dir + "/run.json");
  ASSERT_EQ(r.status, 0) << r.out;
  r = chunkinv_cli("score --inputs " + x + " --candidate " + dir + "/cand.npz --per-sample -q -o " + dir + "/score.json");
  ASSERT_EQ(r.status, 0) << r.out;
  const Report run = read_report(dir + "/run.json");
  const Report score = read_report(dir + "/score.json");
  ReportEntry want = entry(run, "emulated", "neumann");
  ReportEntry got = entry(score, "candidate", "neumann");
  EXPECT_EQ(got.samples, 8u);
  // The candidate file has no decays: compare everything else.
  for (const char* n : {"decay_zeros", "inv_decay_nonfinite"}) want.metrics.erase(n), got.metrics.erase(n);
  expect_same_metrics(want, got);
  // A candidate row changed at one token changes that chunk's figures only.
  cand["INV"].values[((20 * h + 1) * c) + 3] += 0.5;  // token 20 (chunk 1 of sequence 0, row 4), head 1, column 3
  write_npz(dir + "/cand2.npz", cand);
  r = chunkinv_cli("score --inputs " + x + " --candidate " + dir + "/cand2.npz --per-sample -q -o " + dir + "/score2.json");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto& e1 = entry(score, "candidate", "neumann").per_sample.at("inv_total_rel_rmse");
  const Report score2 = read_report(dir + "/score2.json");
  const auto& e2 = entry(score2, "candidate", "neumann").per_sample.at("inv_total_rel_rmse");
  for (size_t i = 0; i < e1.size(); ++i) EXPECT_EQ(e1[i] != e2[i], i == 3) << i;  // sequence 0, chunk 1, head 1
}

TEST(ScoreCli, InverseAloneIsScoredWithTheLItInverts) {
  const std::string dir = temp_dir();
  const std::string x = dir + "/g.npz";
  Result r = chunkinv_cli("inspect --family model_like -a chunk=16 -a dim=32 --count 10 --export " + x + " --export-path gold");
  ASSERT_EQ(r.status, 0) << r.out;
  // Keep INV only: the gold's own inverse, in FP64.
  TensorMap t = read_npz(x);
  ASSERT_EQ(t.at("INV").dtype, DType::kF64);
  t.erase("L");
  write_npz(dir + "/inv.npz", t);
  r = chunkinv_cli("score --inputs " + x + " --candidate " + dir + "/inv.npz -a method=exact --per-sample -q -o " + dir + "/s.json");
  ASSERT_EQ(r.status, 0) << r.out;
  const Report report = read_report(dir + "/s.json");
  const ReportEntry& e = entry(report, "candidate", "exact");
  EXPECT_EQ(e.metrics.at("inv_total_rel_rmse").max, 0.0);
  // The implied L is the gold L up to the FP64 solve's rounding: a backward error near 1e-16.
  EXPECT_LT(e.metrics.at("l_rel_rmse").max, 1e-13);
  EXPECT_EQ(e.metrics.at("l_finite").min, 1.0);
}

TEST(ScoreCli, BadCandidatesAreOneLine) {
  const std::string dir = temp_dir();
  const std::string x = dir + "/x.npz";
  ASSERT_EQ(chunkinv_cli("inspect --family model_like -a chunk=8 -a dim=16 --count 5 --export " + x).status, 0);
  auto fails = [&](const std::string& args, const std::string& want) {
    const Result r = chunkinv_cli("score --inputs " + x + " " + args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find(want), std::string::npos) << args << "\n" << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  };
  fails("--candidate " + x, "holds neither L nor INV (found: beta, g, keys)");
  TensorMap t;
  t["INV"] = {DType::kF32, {5, 8, 7}, std::vector<double>(5 * 8 * 7, 0.0)};
  write_npz(dir + "/shape.npz", t);
  fails("--candidate " + dir + "/shape.npz", "shape.npz[INV]: shape (5, 8, 7) is not [N, C, C] = (5, 8, 8)");
  t["INV"] = {DType::kF32, {4, 8, 8}, std::vector<double>(4 * 64, 0.0)};
  write_npz(dir + "/few.npz", t);
  fails("--candidate " + dir + "/few.npz", "few.npz[INV]: shape (4, 8, 8) is not [N, C, C] = (5, 8, 8)");
  fails("--candidate " + dir + "/none.npz", "none.npz: no such file or directory");
  fails("--candidate " + x + " -a family=floor", "axis family is not for score");
}

TEST(InspectCli, ExportPathWritesThePathsMatricesBesideTheSamples) {
  const std::string dir = temp_dir();
  const std::string x = dir + "/e";
  Result r = chunkinv_cli("inspect --family model_like -a chunk=16 -a dim=32 --count 3 --export " + x + " --export-path emulated");
  ASSERT_EQ(r.status, 0) << r.out;
  for (const char* n : {"keys", "g", "beta", "L", "INV", "decay", "inv_decay"}) EXPECT_TRUE(fs::exists(x + "/" + n + ".npy")) << n;
  // The samples still read back as the inputs, and inspect shows the same L.
  r = chunkinv_cli("inspect --inputs " + x + " --index 2 --paths emulated --format json");
  ASSERT_EQ(r.status, 0) << r.out;
  r = chunkinv_cli("inspect --family model_like -a chunk=16 --export-path emulated");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("--export-path goes with --export"), std::string::npos) << r.out;
  r = chunkinv_cli("inspect --family model_like -a chunk=16 -a 'method=[neumann,fwdsub_fp32]' --export " + dir + "/m.npz --export-path emulated");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("give one method"), std::string::npos) << r.out;
}
