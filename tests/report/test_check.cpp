// The comparison of two reports and the check command's output and exit status.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <sstream>

#include "core/error.hpp"
#include "report/compare.hpp"
#include "report/report_fixtures.hpp"

namespace chunkinv {
namespace {

using testing::EntrySpec;
using testing::make_entry;
using testing::make_gold_entry;
using testing::run_chunkinv;
using testing::TempDir;
using testing::write_report;
using testing::write_text;

// A small sweep: floor at three chunks, gold and emulated.
Report sweep(const std::function<void(EntrySpec&)>& change = {}) {
  Report r;
  for (int c : {8, 16, 17}) {
    r.results.push_back(make_gold_entry("floor", c));
    EntrySpec s;
    s.chunk = c;
    if (change) change(s);
    r.results.push_back(make_entry(s));
  }
  return r;
}

const Comparison* find_figure(const CheckResult& r, const std::string& metric, const std::string& stat, int chunk,
                              const std::string& path = "emulated") {
  for (const auto& f : r.figures) {
    if (f.metric == metric && f.statistic == stat && f.path == path && f.axes.value("chunk", 0) == chunk) return &f;
  }
  return nullptr;
}

TEST(Compare, IdenticalReportsPass) {
  const CheckResult r = compare_reports(sweep(), sweep(), default_check_rules());
  EXPECT_FALSE(r.failed());
  EXPECT_EQ(r.configurations, 6u);
  EXPECT_EQ(r.worse + r.better + r.changed + r.missing, 0u);
  EXPECT_GT(r.same, 6u * 4u);
  // The default rules compare the medians and p99 of every error, the finite
  // shares and the non-finite counts.
  EXPECT_NE(find_figure(r, "inv_total_rel_rmse", "median", 16), nullptr);
  EXPECT_NE(find_figure(r, "inv_total_rel_rmse", "p99", 16), nullptr);
  EXPECT_NE(find_figure(r, "inv_finite", "mean", 16), nullptr);
  EXPECT_NE(find_figure(r, "decay_zeros", "max", 16), nullptr);
  EXPECT_NE(find_figure(r, "inverse_residual", "median", 16, "gold"), nullptr);
  EXPECT_EQ(find_figure(r, "power_max", "median", 16), nullptr);
}

TEST(Compare, TenfoldErrorIsWorseAndAWithinToleranceChangeIsNot) {
  const auto worse = compare_reports(sweep(), sweep([](EntrySpec& s) { s.inv_total_median *= 10; }),
                                     default_check_rules());
  EXPECT_TRUE(worse.failed());
  const Comparison* f = find_figure(worse, "inv_total_rel_rmse", "median", 16);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->verdict, Verdict::kWorse);
  EXPECT_NEAR(f->ratio, 10.0, 1e-9);

  const auto close = compare_reports(sweep(), sweep([](EntrySpec& s) { s.inv_total_median *= 1.05; }),
                                     default_check_rules());
  EXPECT_FALSE(close.failed());
  EXPECT_EQ(find_figure(close, "inv_total_rel_rmse", "median", 16)->verdict, Verdict::kSame);

  const auto better = compare_reports(sweep(), sweep([](EntrySpec& s) { s.inv_total_median /= 2; }),
                                      default_check_rules());
  EXPECT_FALSE(better.failed());
  EXPECT_EQ(find_figure(better, "inv_total_rel_rmse", "median", 16)->verdict, Verdict::kBetter);
}

TEST(Compare, FiniteShareDropIsWorseWhenTheSamplesAreTheSame) {
  // Same seed and sample count: the same samples, so one lost is a regression.
  const auto r = compare_reports(sweep(), sweep([](EntrySpec& s) { s.inv_finite = s.chunk == 17 ? 99 : 100; }),
                                 default_check_rules());
  EXPECT_TRUE(r.failed());
  EXPECT_EQ(find_figure(r, "inv_finite", "mean", 17)->verdict, Verdict::kWorse);
  EXPECT_EQ(find_figure(r, "inv_finite", "mean", 16)->verdict, Verdict::kSame);
  EXPECT_EQ(find_figure(r, "inv_total_rel_rmse", "finite_count", 17)->verdict, Verdict::kWorse);
}

TEST(Compare, FiniteShareWithOtherSamplesUsesTheTwoProportionTest) {
  // Another seed: 99/100 vs 100/100 is noise; 80/100 is not (z = -4.7).
  const auto noise = compare_reports(sweep(), sweep([](EntrySpec& s) {
                                       s.seed = 7;
                                       s.inv_finite = 99;
                                     }),
                                     default_check_rules());
  EXPECT_EQ(find_figure(noise, "inv_finite", "mean", 16)->verdict, Verdict::kSame);
  const auto drop = compare_reports(sweep(), sweep([](EntrySpec& s) {
                                      s.seed = 7;
                                      s.inv_finite = 80;
                                    }),
                                    default_check_rules());
  EXPECT_EQ(find_figure(drop, "inv_finite", "mean", 16)->verdict, Verdict::kWorse);
}

TEST(Compare, NonFiniteCountMustNotGrow) {
  const auto r = compare_reports(sweep(), sweep([](EntrySpec& s) { s.decay_zeros = s.chunk == 17 ? 1 : 0; }),
                                 default_check_rules());
  EXPECT_TRUE(r.failed());
  EXPECT_EQ(find_figure(r, "decay_zeros", "max", 17)->verdict, Verdict::kWorse);
  EXPECT_EQ(find_figure(r, "inv_decay_nonfinite", "max", 17)->verdict, Verdict::kWorse);
}

TEST(Compare, WorstSampleOfMoreSamplesIsNotARegression) {
  // Twice the samples may reach a worse worst case by themselves; fewer may not.
  const auto more = compare_reports(sweep(), sweep([](EntrySpec& s) {
                                      s.samples = 200;
                                      s.inv_finite = 200;
                                      s.decay_zeros = 1;
                                    }),
                                    default_check_rules());
  EXPECT_EQ(find_figure(more, "decay_zeros", "max", 16)->verdict, Verdict::kSame);
  EXPECT_EQ(more.sampling_differs, 3u);  // the emulated entries; the gold keeps its 100
  const auto fewer = compare_reports(sweep(), sweep([](EntrySpec& s) {
                                       s.samples = 50;
                                       s.inv_finite = 50;
                                       s.decay_zeros = 1;
                                     }),
                                     default_check_rules());
  EXPECT_EQ(find_figure(fewer, "decay_zeros", "max", 16)->verdict, Verdict::kWorse);
  EXPECT_NE(check_markdown(fewer, true).find("note: 3 of 6 configurations differ"), std::string::npos);
}

TEST(Compare, MissingInNewIsWorseMissingInBaselineIsNot) {
  Report fewer = sweep();
  fewer.results.pop_back();  // emulated chunk 17
  const auto lost = compare_reports(sweep(), fewer, default_check_rules());
  EXPECT_TRUE(lost.failed());
  EXPECT_EQ(lost.only_in_baseline, 1u);
  const auto gained = compare_reports(fewer, sweep(), default_check_rules());
  EXPECT_FALSE(gained.failed());
  EXPECT_EQ(gained.only_in_new, 1u);
  EXPECT_EQ(gained.missing, 1u);

  CheckRules lenient = default_check_rules();
  lenient.missing_in_new_is_worse = false;
  EXPECT_FALSE(compare_reports(sweep(), fewer, lenient).failed());
}

TEST(Compare, IntegerAndFloatAxesAreTheSameConfiguration) {
  Report a = sweep(), b = sweep();
  for (auto& e : b.results) e.axes["decay_floor"] = -5.0;
  EXPECT_EQ(compare_reports(a, b, default_check_rules()).configurations, 6u);
}

TEST(Compare, BitExactFlagsAnyChange) {
  Report b = sweep();
  b.results[1].metrics["power_max"].p10 = std::nextafter(b.results[1].metrics["power_max"].p10, 1.0);
  EXPECT_FALSE(compare_reports(sweep(), b, default_check_rules()).failed());
  CheckRules exact = default_check_rules();
  exact.bit_exact = true;
  const auto r = compare_reports(sweep(), b, exact);
  EXPECT_TRUE(r.failed());
  EXPECT_EQ(r.changed, 1u);
  EXPECT_EQ(find_figure(r, "power_max", "p10", 8)->verdict, Verdict::kChanged);
  EXPECT_FALSE(compare_reports(sweep(), sweep(), exact).failed());
}

TEST(Compare, RulesOverrideTheDefaults) {
  const auto rules = check_rules_from_json(nlohmann::json::parse(R"({
    "rules": [{"metric": "inv_total_rel_rmse", "statistic": "median", "tolerance": 20},
              {"metric": "inv_total_rel_rmse", "statistic": "p99", "check": "ignore"}]})"));
  const auto r = compare_reports(sweep(), sweep([](EntrySpec& s) { s.inv_total_median *= 10; }), rules);
  EXPECT_FALSE(r.failed());
  EXPECT_EQ(find_figure(r, "inv_total_rel_rmse", "p99", 16), nullptr);

  const auto no_defaults =
      check_rules_from_json(nlohmann::json::parse(R"({"defaults": false, "rules": [{"metric": "power_max", "statistic": "max"}]})"));
  const auto only = compare_reports(sweep(), sweep(), no_defaults);
  EXPECT_EQ(only.figures.size(), 3u);  // power_max max of the 3 emulated entries
}

TEST(Compare, ToleranceAndCountRulesKnowWhichWayIsBetter) {
  // A finite count or a finite share falling is worse even under a tolerance rule.
  const auto rules = check_rules_from_json(nlohmann::json::parse(R"({"defaults": false, "rules": [
    {"metric": "inv_total_rel_rmse", "statistic": "finite_count", "tolerance": 0.01},
    {"metric": "inv_finite", "statistic": "min", "check": "count"}]})"));
  const auto r = compare_reports(sweep(), sweep([](EntrySpec& s) { s.inv_finite = s.chunk == 8 ? 90 : 100; }), rules);
  EXPECT_EQ(find_figure(r, "inv_total_rel_rmse", "finite_count", 8)->verdict, Verdict::kWorse);
  EXPECT_EQ(find_figure(r, "inv_finite", "min", 8)->verdict, Verdict::kWorse);
  EXPECT_EQ(find_figure(r, "inv_finite", "min", 16)->verdict, Verdict::kSame);
  const auto back = compare_reports(sweep([](EntrySpec& s) { s.inv_finite = 90; }), sweep(), rules);
  EXPECT_FALSE(back.failed());
  EXPECT_EQ(find_figure(back, "inv_total_rel_rmse", "finite_count", 8)->verdict, Verdict::kBetter);
}

TEST(Compare, BadRulesNameTheNearest) {
  auto message = [](const char* text) {
    try {
      check_rules_from_json(nlohmann::json::parse(text));
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(R"({"rules": [{"metric": "inv_total_rel_rmse", "statistic": "q99"}]})").find("\"p99\""),
            std::string::npos);
  EXPECT_NE(message(R"({"rules": [{"metric": "inv_totl_rel_rmse"}]})").find("\"inv_total_rel_rmse\""),
            std::string::npos);
  EXPECT_NE(message(R"({"mode": "bitexact"})").find("\"bit-exact\""), std::string::npos);
  EXPECT_NE(message(R"({"tolerence": 1})").find("unknown key"), std::string::npos);
}

// A value of the wrong type: one line naming the file, the key and what it
// must be (once `"defaults": "yes"` showed the JSON library's type_error).
TEST(Compare, RulesOfTheWrongTypeNameTheFileTheKeyAndWhatItMustBe) {
  TempDir dir;
  struct Case {
    const char* text;
    const char* says;
  };
  for (const Case& c : {Case{R"({"defaults": "yes"})", R"("defaults" must be true or false, not "yes")"},
                        Case{R"({"defaults": 1})", R"("defaults" must be true or false, not 1)"},
                        Case{R"({"confidence": "0.9"})", R"("confidence" must be a number, not "0.9")"},
                        Case{R"({"mode": 5})", R"("mode" must be a string, not 5)"},
                        Case{R"({"description": [1]})", R"("description" must be a string, not [1])"},
                        Case{R"({"rules": [{"metric": "l_rel_rmse", "absolute": [1]}]})",
                             R"(rules[0]: "absolute" must be a number, not [1])"}}) {
    const std::string path = write_text(dir, "rules.json", c.text);
    try {
      read_check_rules(path);
      ADD_FAILURE() << c.text << " was accepted";
    } catch (const UsageError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("rules " + path + ": "), std::string::npos) << m;
      EXPECT_NE(m.find(c.says), std::string::npos) << m;
      EXPECT_EQ(m.find("json.exception"), std::string::npos) << m;
    }
  }
}

TEST(Compare, RepeatedConfigurationOrNothingInCommonCannotBeCompared) {
  Report twice = sweep();
  twice.results.push_back(twice.results.back());
  EXPECT_THROW(compare_reports(sweep(), twice, default_check_rules()), UsageError);
  Report other;
  EntrySpec s;
  s.family = "model_like";
  other.results.push_back(make_entry(s));
  EXPECT_THROW(compare_reports(sweep(), other, default_check_rules()), UsageError);
}

TEST(Compare, NormalQuantile) {
  EXPECT_NEAR(normal_quantile(0.95), 1.6448536, 1e-6);
  EXPECT_NEAR(normal_quantile(0.999), 3.0902323, 1e-6);
}

// ---------------------------------------------------------------- the binary

TEST(CheckCommand, IdenticalReportsExitZero) {
  TempDir dir;
  const std::string base = write_report(dir, "base.json", sweep());
  const std::string fresh = write_report(dir, "new.json", sweep());
  const auto r = run_chunkinv("check '" + fresh + "' --baseline '" + base + "'", dir);
  EXPECT_EQ(r.status, 0) << r.output << r.errors;
  EXPECT_NE(r.output.find("| configuration"), std::string::npos);
  EXPECT_NE(r.output.find("PASS"), std::string::npos) << r.output;
}

TEST(CheckCommand, TenfoldWorseMediansExitOneAndNameTheFigure) {
  TempDir dir;
  const std::string base = write_report(dir, "base.json", sweep());
  const std::string fresh =
      write_report(dir, "new.json", sweep([](EntrySpec& s) { s.inv_total_median *= 10; }));
  const auto r = run_chunkinv("check '" + fresh + "' --baseline '" + base + "' --changes-only", dir);
  EXPECT_EQ(r.status, 1) << r.output << r.errors;
  // The row of the worse figure: configuration, path, metric, statistic, ..., verdict.
  bool found = false;
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("floor chunk=16 decay_floor=-5 dim=128") != std::string::npos &&
        line.find("| emulated") != std::string::npos && line.find("| inv_total_rel_rmse") != std::string::npos &&
        line.find("| median") != std::string::npos && line.find("| WORSE") != std::string::npos) {
      found = true;
    }
  }
  EXPECT_TRUE(found) << r.output;
  EXPECT_NE(r.output.find("FAIL"), std::string::npos);

  const auto j = run_chunkinv("check '" + fresh + "' --baseline '" + base + "' --format json", dir);
  EXPECT_EQ(j.status, 1);
  const auto parsed = nlohmann::json::parse(j.output);
  EXPECT_EQ(parsed["passed"], false);
  EXPECT_EQ(parsed["summary"]["worse"], 3 * 2);  // median and p99 at three chunks
}

TEST(CheckCommand, FiniteShareDropExitsOne) {
  TempDir dir;
  const std::string base = write_report(dir, "base.json", sweep());
  const std::string fresh = write_report(dir, "new.json", sweep([](EntrySpec& s) { s.inv_finite = 97; }));
  const auto r = run_chunkinv("check '" + fresh + "' --baseline '" + base + "'", dir);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("inv_finite"), std::string::npos);
}

TEST(CheckCommand, ExactFlagAndRulesFile) {
  TempDir dir;
  Report changed = sweep();
  changed.results[1].metrics["power_max"].p10 *= 1.0000001;
  const std::string base = write_report(dir, "base.json", sweep());
  const std::string fresh = write_report(dir, "new.json", changed);
  EXPECT_EQ(run_chunkinv("check '" + fresh + "' --baseline '" + base + "'", dir).status, 0);
  EXPECT_EQ(run_chunkinv("check '" + fresh + "' --baseline '" + base + "' --exact", dir).status, 1);
  const std::string rules = write_text(dir, "rules.json", R"({"mode": "bit-exact"})");
  const auto r = run_chunkinv("check '" + fresh + "' --baseline '" + base + "' --rules '" + rules + "'", dir);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("CHANGED"), std::string::npos);
}

TEST(CheckCommand, CannotCompareExitsTwo) {
  TempDir dir;
  const std::string base = write_report(dir, "base.json", sweep());
  const auto missing = run_chunkinv("check '" + dir.file("absent.json") + "' --baseline '" + base + "'", dir);
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.errors.find("absent.json"), std::string::npos) << missing.errors;

  const std::string broken = write_text(dir, "broken.json", "{\"schema\": \"chunkinv.report/1\", \"results\": [");
  const auto malformed = run_chunkinv("check '" + broken + "' --baseline '" + base + "'", dir);
  EXPECT_EQ(malformed.status, 2);
  EXPECT_NE(malformed.errors.find("not valid JSON"), std::string::npos) << malformed.errors;

  const std::string no_metrics =
      write_text(dir, "nometrics.json",
                 R"({"schema": "chunkinv.report/1", "results": [{"axes": {"path": "gold"}, "samples": 1}]})");
  EXPECT_EQ(run_chunkinv("check '" + no_metrics + "' --baseline '" + base + "'", dir).status, 2);

  Report other;
  EntrySpec s;
  s.family = "model_like";
  other.results.push_back(make_entry(s));
  const std::string disjoint = write_report(dir, "other.json", other);
  const auto none = run_chunkinv("check '" + disjoint + "' --baseline '" + base + "'", dir);
  EXPECT_EQ(none.status, 2);
  EXPECT_NE(none.errors.find("nothing to compare"), std::string::npos) << none.errors;

  const std::string bad_rules = write_text(dir, "rules.json", R"({"rules": [{"metric": "inv_total_rel_rmse", "statistic": "q99"}]})");
  const auto rules = run_chunkinv("check '" + base + "' --baseline '" + base + "' --rules '" + bad_rules + "'", dir);
  EXPECT_EQ(rules.status, 2);
  EXPECT_NE(rules.errors.find("did you mean \"p99\""), std::string::npos) << rules.errors;
}

}  // namespace
}  // namespace chunkinv
