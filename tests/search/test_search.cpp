// chunkinv search: the optimiser on functions with a known maximum, the
// parametrisation's validity, determinism over thread counts, the witness
// replaying its objective through `run --inputs` bit for bit, the structure
// summary, the committed witness's regression check, and the errors.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "inputs/family.hpp"
#include "inputs/tensor_set.hpp"
#include "inputs/witness_summary.hpp"
#include "search/cmaes.hpp"
#include "search/objective.hpp"
#include "search/search.hpp"
#include "search/space.hpp"
#include "support/shell.hpp"

using namespace chunkinv;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::string temp_dir() { return chunkinv::testing::test_dir("search"); }

chunkinv::testing::ShellResult chunkinv_cli(const std::string& args, bool with_stderr = false) {
  return chunkinv::testing::run_shell(chunkinv::testing::binary() + " " + args + (with_stderr ? " 2>&1" : " 2>/dev/null"));
}

json read_json(const std::string& path) {
  std::ifstream f(path);
  return json::parse(f);
}

double number(const json& j) {
  if (j.is_number()) return j.get<double>();
  const std::string s = j.get<std::string>();
  return s == "inf" ? INFINITY : s == "-inf" ? -INFINITY : NAN;
}

uint64_t bits(double x) {
  uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

// Runs one SepCmaes to its stop or `gens` generations, maximising f.
template <class F>
double maximise(F f, std::vector<double> x0, int gens, CmaesStop* why = nullptr) {
  SepCmaes es(std::move(x0), {.lambda = 0, .sigma0 = 1.0, .seed = 7, .stream = 0});
  double best = -INFINITY;
  std::vector<double> v(es.lambda());
  for (int g = 0; g < gens && es.stopped() == CmaesStop::kNone; ++g) {
    const auto& pop = es.ask();
    for (int k = 0; k < es.lambda(); ++k) {
      v[k] = f(std::span<const double>(pop.data() + k * es.dimension(), es.dimension()));
      best = std::max(best, v[k]);
    }
    es.tell(v);
  }
  if (why) *why = es.stopped();
  return best;
}

SearchOptions small_options() {
  SearchOptions o;
  o.space.chunk = 8;
  o.space.dim = 16;
  o.space.decay_floor = -5;
  o.budget = 600;
  o.lanes = 3;
  o.seed = 11;
  return o;
}

Configuration config_of(const SearchSpace& s) {
  Configuration c;
  c.family = "model_like";
  c.chunk = s.chunk;
  c.dim = s.dim;
  c.params = {{"decay_floor", s.decay_floor}};
  return c;
}

}  // namespace

TEST(SepCmaes, FindsTheMaximumOfAShiftedEllipsoid) {
  // f(x) = -sum_i 10^(3 i / (n-1)) (x_i - i/n)^2: separable, condition 10^3,
  // maximum 0 at x_i = i/n. sep-CMA-ES learns the diagonal.
  const int n = 20;
  auto f = [&](std::span<const double> x) {
    double s = 0;
    for (int i = 0; i < n; ++i) s += std::pow(10.0, 3.0 * i / (n - 1)) * (x[i] - double(i) / n) * (x[i] - double(i) / n);
    return -s;
  };
  CmaesStop why;
  const double best = maximise(f, std::vector<double>(n, 3.0), 3000, &why);
  EXPECT_GT(best, -1e-9);
  EXPECT_NE(why, CmaesStop::kNone);  // it stopped by itself (tolfun/tolx), before 3000 generations
}

TEST(SepCmaes, SameSeedSamePopulationsOtherSeedOthers) {
  auto run = [](uint64_t seed) {
    SepCmaes es(std::vector<double>(5, 0.0), {.lambda = 6, .sigma0 = 0.5, .seed = seed, .stream = 3});
    std::vector<double> all;
    for (int g = 0; g < 5; ++g) {
      const auto& pop = es.ask();
      all.insert(all.end(), pop.begin(), pop.end());
      std::vector<double> v;
      for (int k = 0; k < 6; ++k) v.push_back(-std::fabs(pop[k * 5]));
      es.tell(v);
    }
    return all;
  };
  EXPECT_EQ(run(1), run(1));
  EXPECT_NE(run(1), run(2));
}

TEST(SearchSpace, EveryPointIsAValidSample) {
  SearchSpace s;
  s.chunk = 16;
  s.dim = 32;
  s.decay_floor = -5;
  const std::vector<double> fills = {0.0, 1e-300, -1e6, 1e6, 37.0, -745.0, 1e300};
  for (double fill : fills) {
    std::vector<double> x(s.size(), fill);
    for (size_t i = 0; i < x.size(); i += 3) x[i] = -fill;  // mixed signs
    const Sample smp = s.decode(x);
    ASSERT_EQ(smp.keys.size(), s.key_size());
    for (int r = 0; r < s.chunk; ++r) {
      double n2 = 0;
      for (int c = 0; c < s.dim; ++c) n2 += smp.key(r, c) * smp.key(r, c);
      EXPECT_NEAR(std::sqrt(n2), 1.0, 0.01) << "fill " << fill << " row " << r;
    }
    for (int t = 0; t < s.chunk; ++t) {
      EXPECT_LT(smp.g[t], 0.0) << fill;
      EXPECT_GE(smp.g[t], s.decay_floor) << fill;
      EXPECT_GT(smp.beta[t], 0.0) << fill;
      EXPECT_LT(smp.beta[t], 1.0) << fill;
    }
  }
  // The tensor-set reader, which refuses any invalid entry, takes them.
  const std::string dir = temp_dir();
  std::vector<Sample> v = {s.decode(std::vector<double>(s.size(), 1e6)), s.decode(std::vector<double>(s.size(), -1e6))};
  write_tensor_set(dir + "/w.safetensors", v);
  EXPECT_NO_THROW(load_tensor_set(dir + "/w.safetensors"));
}

TEST(SearchSpace, PlannedFormsAreRefusedWithTheirReason) {
  EXPECT_THROW(parse_key_form("raw"), UsageError);
  EXPECT_THROW(parse_gate_form("per_channel"), UsageError);
  EXPECT_EQ(parse_key_form("normalised"), KeyForm::kNormalised);
}

TEST(Search, ResultIsTheSameForEveryThreadCount) {
  SearchOptions o = small_options();
  const Method m = parse_method("neumann");
  const Objective obj = parse_objective("inv_total_rel_rmse", *m.spec);
  const PathChoice path = parse_paths("emulated")[0];
  Evaluator one(config_of(o.space), path, m, obj, 1), two(config_of(o.space), path, m, obj, 2);
  const SearchResult a = run_search(o, one), b = run_search(o, two);
  ASSERT_EQ(a.witnesses.size(), 3u);
  ASSERT_EQ(a.witnesses.size(), b.witnesses.size());
  EXPECT_EQ(a.evaluations, b.evaluations);
  EXPECT_LE(a.evaluations, o.budget);
  EXPECT_EQ(a.trace.best, b.trace.best);
  EXPECT_EQ(a.trace.evaluations, b.trace.evaluations);
  for (size_t i = 0; i < a.witnesses.size(); ++i) {
    EXPECT_EQ(bits(a.witnesses[i].value), bits(b.witnesses[i].value));
    EXPECT_EQ(a.witnesses[i].sample.keys, b.witnesses[i].sample.keys);
    EXPECT_EQ(a.witnesses[i].sample.g, b.witnesses[i].sample.g);
    EXPECT_EQ(a.witnesses[i].sample.beta, b.witnesses[i].sample.beta);
  }
  // The trace is the best so far: it never falls, and ends at the best witness.
  EXPECT_TRUE(std::is_sorted(a.trace.best.begin(), a.trace.best.end()));
  EXPECT_EQ(bits(a.trace.best.back()), bits(a.witnesses[0].value));
  // Another seed searches elsewhere.
  o.seed = 12;
  const SearchResult c = run_search(o, one);
  EXPECT_NE(c.witnesses[0].sample.keys, a.witnesses[0].sample.keys);
}

TEST(Search, BeatsAsManyRandomSamplesOfModelLike) {
  // The same number of evaluations: random model_like samples against the
  // search (the search's first generation is model_like-distributed).
  SearchOptions o = small_options();
  o.space.chunk = 16;
  o.budget = 3000;
  const Method m = parse_method("neumann");
  const Objective obj = parse_objective("inv_total_rel_rmse", *m.spec);
  Evaluator ev(config_of(o.space), parse_paths("emulated")[0], m, obj, 0);
  const SearchResult r = run_search(o, ev);
  const Family& fam = find_family("model_like");
  std::vector<Sample> random;
  for (uint64_t i = 0; i < o.budget; ++i) random.push_back(fam.make(config_of(o.space), 0, i));
  std::vector<double> values;
  ev.evaluate(random, values);
  const double random_max = *std::max_element(values.begin(), values.end());
  EXPECT_GT(r.witnesses[0].value, 3 * random_max) << "random max " << random_max;
}

TEST(WitnessSummary, NamesCollinearKeysWeakDecayAndBetaNearOne) {
  Sample s;
  s.chunk = 16;
  s.dim = 8;
  s.keys.assign(16 * 8, 0.0);
  for (int r = 0; r < 16; ++r) s.keys[r * 8] = (r % 2 ? -1.0 : 1.0);  // one key and its negation
  s.g.assign(16, -0.001);
  s.beta.assign(16, 0.999);
  // g_0 cancels out of L and beta_0 multiplies its empty row 0: neither counts.
  s.g[0] = -5.0;
  s.beta[0] = 1e-6;
  const WitnessSummary w = summarise_witness(s, -5.0);
  ASSERT_GE(w.findings.size(), 3u);
  EXPECT_NE(w.findings[0].find("near-collinear keys"), std::string::npos) << w.findings[0];
  EXPECT_NE(w.findings[0].find("negated"), std::string::npos) << w.findings[0];
  EXPECT_EQ(w.collinear_pairs, 120);
  EXPECT_EQ(w.g_weak, 15);
  EXPECT_EQ(w.g_strong, 0);
  EXPECT_EQ(w.beta_high, 15);
  EXPECT_EQ(w.beta_low, 0);
  const std::string text = witness_summary_text(w);
  EXPECT_NE(text.find("weak decay"), std::string::npos) << text;
  EXPECT_NE(text.find("beta -> 1"), std::string::npos) << text;

  // A random model_like sample: spread keys, mixed gates and beta.
  Configuration c;
  c.family = "model_like";
  c.params = {{"decay_floor", -5.0}};
  const WitnessSummary r = summarise_witness(find_family("model_like").make(c, 0, 0), -5.0);
  EXPECT_NE(r.findings[0].find("keys spread"), std::string::npos) << r.findings[0];
  EXPECT_EQ(r.collinear_pairs, 0);
  // At the bound: strong decay.
  s.g.assign(16, -5.0);
  EXPECT_EQ(summarise_witness(s, -5.0).g_strong, 15);
  EXPECT_NE(witness_summary_text(summarise_witness(s, -5.0)).find("strong decay"), std::string::npos);
}

TEST(SearchCli, WitnessReplaysTheObjectiveBitForBit) {
  const std::string dir = temp_dir();
  for (const std::string method : {"neumann", "fwdsub_fp32"}) {
    const std::string rep = dir + "/s-" + method + ".json", wit = dir + "/w-" + method + ".safetensors";
    const auto s = chunkinv_cli("search -a chunk=16 -a dim=16 -a decay_floor=-5 --path emulated --method " + method +
                                " --budget 400 --restarts 2 --seed 3 -q -o " + rep + " --witness " + wit, true);
    ASSERT_EQ(s.status, 0) << s.out;
    const json j = read_json(rep);
    EXPECT_EQ(j["schema"], "chunkinv.search/1");
    EXPECT_LE(j["evaluations"].get<uint64_t>(), 400u);
    ASSERT_EQ(j["witnesses"]["samples"].size(), 2u);
    // Every witness, through run --inputs: the same inv_total_rel_rmse, bit for bit.
    const std::string out = dir + "/r-" + method + ".json";
    const auto r = chunkinv_cli("run --inputs " + wit + " --paths emulated -a method=" + method +
                                " --per-sample -q -o " + out, true);
    ASSERT_EQ(r.status, 0) << r.out;
    const json rr = read_json(out);
    const json* entry = nullptr;
    for (const auto& e : rr["results"])
      if (e["axes"]["path"] == "emulated" && e["axes"]["method"] == method) entry = &e;
    ASSERT_NE(entry, nullptr);
    const json& per = (*entry)["per_sample"]["inv_total_rel_rmse"];
    ASSERT_EQ(per.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      const double searched = number(j["witnesses"]["samples"][i]["objective"]);
      EXPECT_EQ(bits(number(per[i])), bits(searched)) << method << " witness " << i;
    }
    EXPECT_EQ(bits(number(j["best"])), bits(number(per[0])));
    // The best first.
    EXPECT_GE(number(per[0]), number(per[1]));
  }
}

TEST(SearchCli, OverflowMarginIsPowerMaxOverTheLargestFp16) {
  const std::string dir = temp_dir();
  const auto s = chunkinv_cli("search -a chunk=16 -a dim=16 --objective overflow_margin --budget 200 --restarts 1 -q -o " +
                              dir + "/s.json", true);
  ASSERT_EQ(s.status, 0) << s.out;
  const json j = read_json(dir + "/s.json");
  EXPECT_TRUE(fs::exists(dir + "/s.safetensors"));
  const json& w = j["witnesses"]["samples"][0];
  EXPECT_EQ(bits(number(w["objective"])), bits(number(w["metrics"]["power_max"]) / 65504.0));
  ASSERT_FALSE(j["trace"]["best"].empty());
}

TEST(SearchCli, InspectOnAWitnessSaysWhatIsExtreme) {
  const std::string dir = temp_dir();
  const auto s = chunkinv_cli("search -a chunk=16 -a dim=16 --budget 300 --restarts 1 -q -o " + dir + "/s.json", true);
  ASSERT_EQ(s.status, 0) << s.out;
  const auto t = chunkinv_cli("inspect --inputs " + dir + "/s.safetensors --paths emulated", true);
  ASSERT_EQ(t.status, 0) << t.out;
  EXPECT_NE(t.out.find("structure:\n  - "), std::string::npos) << t.out.substr(0, 2000);
  EXPECT_NE(t.out.find("beta"), std::string::npos);
  const auto js = chunkinv_cli("inspect --inputs " + dir + "/s.safetensors --paths emulated --format json");
  ASSERT_EQ(js.status, 0);
  const json j = json::parse(js.out);
  EXPECT_FALSE(j["structure"]["findings"].empty());
  EXPECT_TRUE(j["structure"]["g"]["bound"].is_null());  // a file knows no bound
  // A family's sample is judged against its decay floor.
  const auto fam = chunkinv_cli("inspect --family model_like -a chunk=16 -a dim=16 --paths emulated --format json");
  ASSERT_EQ(fam.status, 0);
  EXPECT_EQ(json::parse(fam.out)["structure"]["g"]["bound"].get<double>(), -5.0);
}

TEST(SearchCli, BadOptionsAreOneLineAndExitTwo) {
  const std::string dir = temp_dir();
  const std::string o = " -o " + dir + "/s.json";
  const struct {
    std::string args, says;
  } cases[] = {
      {"--objective inv_total_rel_rmsee" + o, "did you mean inv_total_rel_rmse"},
      {"--method fwdsub_fp32 --objective power_max" + o, "not a metric of method fwdsub_fp32"},
      {"--gates per_channel" + o, "per-channel gates are not searchable yet"},
      {"--keys raw" + o, "raw (un-normalised) keys are not searchable yet"},
      {"-a chunk=99" + o, "chunk = 99"},
      {"-a family=floor" + o, "model_like"},
      {"--path emulated,gold" + o, "name one path"},
      {"--budget 0" + o, "--budget"},
      {"--budget 10", "give -o"},
      // Numbers read by the project's one parser: refused, never wrapped or saturated.
      {"--budget -1" + o, "--budget -1: must be a whole number from 4 to 1000000000000"},
      {"--budget 18446744073709551616" + o, "--budget 18446744073709551616: must be"},
      {"--seed=-1" + o, "--seed -1: must be a whole number from 0 to 18446744073709551615"},
      {"--seed 18446744073709551616" + o, "--seed 18446744073709551616: must be"},
      {"--restarts 0" + o, "--restarts 0: must be"},
      {"--threads -1" + o, "--threads -1: must be a whole number from 0 to 1024"},
      {"--population 2.5" + o, "--population 2.5: must be"},
      // A budget that pays for no generation of some restart (once 0 evaluations, then "no samples to write").
      {"--budget 50" + o, "--budget 50: too small for one generation of each of the 4 restarts"},
      // The two outputs: one file each, not the same, a witness beside a file.
      {"-o -", "search -o -: give --witness FILE.safetensors"},
      {"--witness " + dir + "/w" + o, "must end in .safetensors or .npz"},
      {"-o " + dir + "/w.npz --witness " + dir + "/../" + fs::path(dir).filename().string() + "/w.npz", "is the report"},
      {"-a decay_floor=1" + o, "decay_floor"},
  };
  for (const auto& c : cases) {
    const auto r = chunkinv_cli("search " + c.args, true);
    EXPECT_EQ(r.status, 2) << c.args << ": " << r.out;
    EXPECT_NE(r.out.find(c.says), std::string::npos) << c.args << ": " << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << c.args << ": " << r.out;
  }
  EXPECT_FALSE(fs::exists(dir + "/s.json"));
}

// The witness and the report go together: when the report cannot be
// written (a full device), the witness is not left either.
TEST(SearchCli, AReportThatCannotBeWrittenLeavesNoWitness) {
  const std::string dir = temp_dir();
  const auto r = chunkinv_cli("search -a chunk=8 -a dim=8 --budget 200 --restarts 1 -q -o /dev/full --witness " + dir +
                                  "/w.safetensors",
                              true);
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("output /dev/full: write failed"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::is_empty(dir)) << "no witness, no temporary";
}

TEST(SearchCli, CommittedWitnessPassesItsCheck) {
  // configs/witness_neumann_c16.json runs the worst input the search found
  // for neumann on emulated at C = 16 (docs/search.md, results/h200/search.md);
  // its baseline must reproduce bit for bit.
  const std::string src = CHUNKINV_SOURCE_DIR, dir = temp_dir();
  const std::string cd = "cd '" + src + "' && ";
  const auto r = chunkinv::testing::run_shell(cd + chunkinv::testing::binary() + " run configs/witness_neumann_c16.json -q -o " +
                                              dir + "/new.json 2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto c = chunkinv::testing::run_shell(cd + chunkinv::testing::binary() + " check " + dir +
                                              "/new.json --baseline configs/witnesses/neumann-c16-baseline.json --exact "
                                              "--changes-only 2>&1");
  EXPECT_EQ(c.status, 0) << c.out;

  // The witness still gives what its search recorded, through run --inputs.
  const json rep = read_json(src + "/configs/witnesses/neumann-c16.json");
  const auto p = chunkinv::testing::run_shell(cd + chunkinv::testing::binary() +
                                              " run --inputs configs/witnesses/neumann-c16.safetensors --paths emulated "
                                              "-a method=neumann --per-sample -q -o " + dir + "/replay.json 2>&1");
  ASSERT_EQ(p.status, 0) << p.out;
  const json replay = read_json(dir + "/replay.json");
  const json& per = replay["results"][0]["per_sample"]["inv_total_rel_rmse"];
  ASSERT_EQ(per.size(), rep["witnesses"]["samples"].size());
  for (size_t i = 0; i < per.size(); ++i)
    EXPECT_EQ(bits(number(per[i])), bits(number(rep["witnesses"]["samples"][i]["objective"]))) << "witness " << i;
  // At least 100x the largest of 10^6 random model_like samples (2.6487e-4,
  // measured: results/h200/search.md), or not finite.
  EXPECT_GE(number(per[0]), 100 * 2.6487e-4);
}
