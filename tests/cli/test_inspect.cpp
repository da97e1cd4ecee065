// chunkinv inspect, run as the user runs it (the binary, through popen): the
// gold inverse it shows for an imported sample against an independent
// computation, its JSON against the in-process path, non-finite entries as
// strings, and its errors.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "inputs/family.hpp"
#include "inputs/tensor_set.hpp"
#include "methods/method.hpp"
#include "metrics/metrics.hpp"
#include "paths/path.hpp"
#include "paths/emulated/emulated.hpp"
#include "paths/gold/gold.hpp"
#include "support/shell.hpp"

using namespace chunkinv;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

struct Result {
  int status = -1;
  std::string out;
};

// Runs the binary with `args`; stdout only, or stdout and stderr.
Result run_chunkinv(const std::string& args, bool with_stderr = false) {
  const auto r = chunkinv::testing::run_shell(chunkinv::testing::binary() + " " + args +
                                              (with_stderr ? " 2>&1" : " 2>/dev/null"));
  return {r.status, r.out};
}

std::string temp_dir() { return chunkinv::testing::test_dir("inspect"); }

double number(const json& j) {
  if (j.is_number()) return j.get<double>();
  const std::string s = j.get<std::string>();
  if (s == "inf") return INFINITY;
  if (s == "-inf") return -INFINITY;
  if (s == "nan") return NAN;
  ADD_FAILURE() << "not a number: " << j.dump();
  return NAN;
}

// The exact inverse, independently: L from its definition (SPEC §1) with
// the decay exp(G_i - G_j) in long double, then (I + L)^-1 column by column
// by forward substitution in long double.
std::vector<std::vector<long double>> reference_inverse(const Sample& s) {
  const int c = s.chunk;
  std::vector<long double> big_g(c);
  long double acc = 0;
  for (int t = 0; t < c; ++t) big_g[t] = acc += s.g[t];
  std::vector<std::vector<long double>> l(c, std::vector<long double>(c, 0));
  for (int i = 0; i < c; ++i)
    for (int j = 0; j < i; ++j) {
      long double dot = 0;
      for (int k = 0; k < s.dim; ++k) dot += static_cast<long double>(s.key(i, k)) * s.key(j, k);
      l[i][j] = s.beta[i] * dot * std::exp(big_g[i] - big_g[j]);
    }
  std::vector<std::vector<long double>> x(c, std::vector<long double>(c, 0));
  for (int col = 0; col < c; ++col)
    for (int i = 0; i < c; ++i) {
      long double v = (i == col) ? 1 : 0;
      for (int j = 0; j < i; ++j) v -= l[i][j] * x[j][col];
      x[i][col] = v;
    }
  return x;
}

std::vector<Sample> model_like_samples(int n, int chunk, int dim, uint64_t seed) {
  Configuration c;
  c.family = "model_like";
  c.chunk = chunk;
  c.dim = dim;
  c.params = {{"decay_floor", -5.0}};
  std::vector<Sample> v;
  for (int i = 0; i < n; ++i) v.push_back(find_family("model_like").make(c, seed, i));
  return v;
}

}  // namespace

TEST(Inspect, JsonShowsTheGoldInverseOfAnImportedSample) {
  const auto samples = model_like_samples(5, 16, 64, 3);
  const std::string dir = temp_dir() + "/set";
  write_tensor_set(dir, samples);
  const Result r = run_chunkinv("inspect --inputs '" + dir + "' --index 2 --format json --paths gold,emulated");
  ASSERT_EQ(r.status, 0) << r.out;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["sample"]["axes"]["family"], "file");
  EXPECT_EQ(j["sample"]["axes"]["chunk"], 16);
  EXPECT_EQ(j["sample"]["axes"]["dim"], 64);
  EXPECT_EQ(j["sample"]["index"], 2);
  const Sample& s = samples[2];
  // The inputs shown are sample 2's.
  for (int t = 0; t < 16; ++t) {
    EXPECT_EQ(number(j["g"][t]), s.g[t]);
    EXPECT_EQ(number(j["beta"][t]), s.beta[t]);
    EXPECT_EQ(number(j["keys"]["values"][t][5]), s.key(t, 5));
  }
  // The gold inverse against the independent one.
  const auto want = reference_inverse(s);
  const json& inv = j["gold"]["INV"];
  ASSERT_EQ(inv.size(), 16u);
  double worst = 0, biggest_off_diagonal = 0;
  for (int i = 0; i < 16; ++i) {
    ASSERT_EQ(inv[i].size(), 16u);
    for (int k = 0; k < 16; ++k) {
      const double got = number(inv[i][k]);
      worst = std::max(worst, static_cast<double>(std::fabs(got - want[i][k])));
      if (i != k) biggest_off_diagonal = std::max(biggest_off_diagonal, std::fabs(got));
    }
  }
  EXPECT_LT(worst, 1e-14);
  EXPECT_GT(biggest_off_diagonal, 1e-4);  // a comparison of more than the identity
  // The path's part equals the same path and method run in this process.
  const GoldOutput gold = compute_gold(s);
  const Method neumann = method_of(find_method("neumann"));
  PathOutput out;
  emulated::decays(s, out.l.decay, out.l.inv_decay);
  out.l.L = emulated::kernel_l(s, out.l.decay, out.l.inv_decay);
  out.on_path_l = neumann.invert(out.l.L, true);
  out.on_gold_l = neumann.invert(gold.L, true);
  const json& p = j["paths"]["emulated"];
  ASSERT_TRUE(p.is_object());
  const json& pm = p["methods"]["neumann"];
  for (int i = 0; i < 16; ++i)
    for (int k = 0; k < 16; ++k) {
      EXPECT_EQ(number(p["L"][i][k]), out.l.L(i, k));
      EXPECT_EQ(number(pm["INV"][i][k]), out.on_path_l.inv(i, k));
      EXPECT_EQ(number(pm["gold_l"]["INV"][i][k]), out.on_gold_l.inv(i, k));
      // Neumann on the gold path's L is the emulated path's run on the gold L.
      EXPECT_EQ(number(j["paths"]["gold"]["methods"]["neumann"]["INV"][i][k]), out.on_gold_l.inv(i, k));
    }
  EXPECT_EQ(pm["diagnostics"]["highest_power"], 8);
  ASSERT_EQ(pm["intermediates"].size(), 4u);  // L, L^2, L^4, L^8
  EXPECT_EQ(pm["intermediates"][3]["label"], "L^8");
  const MetricSet& set = method_metrics(*neumann.spec);
  std::vector<double> m(set.size());
  evaluate(*neumann.spec, gold, out, m.data());
  for (size_t k = 0; k < set.size(); ++k)
    EXPECT_EQ(number(pm["metrics"][set.infos[k].name]), m[k]) << set.infos[k].name;
  EXPECT_GT(number(pm["metrics"]["inv_total_rel_rmse"]), 0.0);
  EXPECT_EQ(number(j["gold"]["metrics"]["inv_finite"]), 1.0);
}

TEST(Inspect, NonFiniteEntriesAreStrings) {
  // floor -5 at C=19: two reciprocal decays overflow (SPEC §5's table).
  const Result r = run_chunkinv("inspect --family floor -a chunk=19 -a dim=32 --seed 1 --sample 0 --format json --paths emulated");
  ASSERT_EQ(r.status, 0) << r.out;
  const json j = json::parse(r.out);
  const json& p = j["paths"]["emulated"];
  int inf_decays = 0;
  for (const json& v : p["inv_decay"]) inf_decays += v.is_string() && v == "inf";
  EXPECT_EQ(inf_decays, 2);
  const json& pm = p["methods"]["neumann"];
  EXPECT_EQ(number(pm["metrics"]["inv_finite"]), 0.0);
  int strings = 0;
  for (const json& row : pm["INV"])
    for (const json& v : row) strings += v.is_string();
  EXPECT_GT(strings, 0);
  EXPECT_EQ(pm["metrics"]["inv_total_rel_rmse"], "inf");
}

TEST(Inspect, TextIsAligned) {
  const Result r = run_chunkinv("inspect --family floor -a chunk=19 -a dim=16 --paths emulated");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("inf"), std::string::npos);
  EXPECT_NE(r.out.find("path emulated"), std::string::npos);
  EXPECT_NE(r.out.find("inv_total_rel_rmse"), std::string::npos);
  // Every row of every matrix ("  NN: ...") has the same width.
  size_t width = 0, rows = 0, pos = 0;
  while (pos < r.out.size()) {
    const size_t end = r.out.find('\n', pos);
    const std::string line = r.out.substr(pos, end - pos);
    pos = end == std::string::npos ? r.out.size() : end + 1;
    if (line.size() > 6 && line.compare(0, 2, "  ") == 0 && line[5] == ':' && std::isdigit(static_cast<unsigned char>(line[4]))) {
      if (width == 0) width = line.size();
      EXPECT_EQ(line.size(), width) << line;
      ++rows;
    }
  }
  EXPECT_GE(rows, 19u * 4);  // gold L and INV, the path's L and INV at least
}

TEST(Inspect, ErrorsNameTheCulprit) {
  const auto samples = model_like_samples(3, 8, 16, 0);
  const std::string dir = temp_dir() + "/s.npz";
  write_tensor_set(dir, samples);
  Result r = run_chunkinv("inspect --inputs '" + dir + "' --index 3", true);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("holds 3 samples"), std::string::npos) << r.out;
  r = run_chunkinv("inspect --family flor", true);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("did you mean \"floor\""), std::string::npos) << r.out;
  r = run_chunkinv("inspect --family floor -a chunk=[8,16]", true);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("several configurations"), std::string::npos) << r.out;
  r = run_chunkinv("inspect --family floor -a method=neuman", true);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("did you mean \"neumann\""), std::string::npos) << r.out;
  r = run_chunkinv("inspect --inputs '" + dir + "' --format yaml", true);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("yaml"), std::string::npos) << r.out;
  // Gates looked for where CHUNKINV_DATA says.
  r = run_chunkinv("inspect --family real_gates", true);
  EXPECT_EQ(r.status, 0) << r.out;
  const std::string env = "CHUNKINV_DATA='" + temp_dir() + "' ";
  const auto [st, out] = chunkinv::testing::run_shell(env + chunkinv::testing::binary() + " inspect --family real_gates 2>&1");
  EXPECT_EQ(st, 2) << out;
  EXPECT_NE(out.find("gdn-gates/Qwen3-Next/g.npy not found"), std::string::npos) << out;
  EXPECT_NE(out.find("CHUNKINV_DATA"), std::string::npos) << out;
}

TEST(Inspect, DefaultPathsAreEveryUsableOne) {
  // On a GPU machine this takes kernel and cublas through inspect too.
  const Result r = run_chunkinv("inspect --family model_like -a chunk=24 -a dim=32 --sample 4 --format json");
  ASSERT_EQ(r.status, 0) << r.out;
  const json j = json::parse(r.out);
  std::vector<std::string> want = path_names_usable();  // the gold's L too: neumann runs on it
  std::vector<std::string> got;
  for (const auto& [name, v] : j["paths"].items()) got.push_back(name);
  std::sort(want.begin(), want.end());
  EXPECT_EQ(got, want);
  ASSERT_FALSE(got.empty());
  for (const auto& [name, p] : j["paths"].items()) {
    const json& pm = p["methods"]["neumann"];
    EXPECT_EQ(p["L"].size(), 24u) << name;
    EXPECT_EQ(pm["INV"].size(), 24u) << name;
    EXPECT_EQ(pm["INV"][23].size(), 24u) << name;
    EXPECT_EQ(pm["diagnostics"]["highest_power"], 16) << name;
    EXPECT_EQ(pm["intermediates"].size(), 5u) << name;  // L .. L^16
    if (!find_path(name).reference) {
      EXPECT_EQ(p["decay"].size(), 24u) << name;
    }
    EXPECT_EQ(number(pm["metrics"]["inv_finite"]), 1.0) << name;
    EXPECT_LT(number(pm["metrics"]["inv_total_rel_rmse"]), 1e-3) << name;
  }
}

TEST(Inspect, ExportWritesSamplesThatInspectReadsBack) {
  const std::string dir = temp_dir();
  for (const std::string ext : {"", ".npz", ".safetensors"}) {
    const std::string p = dir + "/exp" + ext;
    Result r = run_chunkinv("inspect --family real_gates -a chunk=8 -a dim=16 --seed 5 --index 10 --count 4 --export '" + p + "'", true);
    ASSERT_EQ(r.status, 0) << r.out;
    EXPECT_NE(r.out.find("wrote samples 10..13"), std::string::npos) << r.out;
    const TensorSet set = load_tensor_set(p);
    ASSERT_EQ(set.count, 4u);
    const json from_family = json::parse(run_chunkinv("inspect --family real_gates -a chunk=8 -a dim=16 --seed 5 --index 12 --format json --paths emulated").out);
    const json from_file = json::parse(run_chunkinv("inspect --inputs '" + p + "' --index 2 --format json --paths emulated").out);
    EXPECT_EQ(from_file["keys"], from_family["keys"]) << p;
    EXPECT_EQ(from_file["g"], from_family["g"]) << p;
    EXPECT_EQ(from_file["gold"], from_family["gold"]) << p;
    EXPECT_EQ(from_file["paths"], from_family["paths"]) << p;
  }
}
