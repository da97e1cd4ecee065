// The JSON report: reports of the older schema load with today's axes and
// metric names, so that baselines and tables made before the method axis
// keep their meaning.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "core/error.hpp"
#include "report/report.hpp"
#include "support/usage_error.hpp"

using namespace chunkinv;

TEST(Report, SchemaOneLoadsWithTheMethodAxisAndTodaysMetricNames) {
  const auto file = std::filesystem::temp_directory_path() / ("chunkinv_v1_" + std::to_string(::getpid()) + ".json");
  const char* stats = R"({"median": 1e-7, "mean": 1e-7, "p10": 1e-7, "p90": 1e-7, "p99": 1e-7, "min": 1e-7,
                          "max": 1e-7, "finite_count": 3})";
  std::ofstream(file) << R"({"schema": "chunkinv.report/1", "meta": {}, "results": [
    {"axes": {"family": "floor", "chunk": 8, "dim": 128, "path": "gold"}, "samples": 3, "seed": 0,
     "metrics": {"inverse_residual": )" << stats << R"(}},
    {"axes": {"family": "floor", "chunk": 8, "dim": 128, "path": "emulated"}, "samples": 3, "seed": 0,
     "metrics": {"inv_stable_l_rel_rmse": )" << stats << R"(, "stable_l_power_max": )" << stats
                       << R"(, "inv_neumann_only_rel_rmse": )" << stats << R"(}, "per_sample": {"stable_l_highest_power": [8, 8, 8]}}]})";
  const Report r = read_report(file.string());
  ASSERT_EQ(r.results.size(), 2u);
  EXPECT_EQ(r.results[0].axes["method"], "exact");  // the gold's own entry
  EXPECT_EQ(r.results[1].axes["method"], "neumann");
  EXPECT_TRUE(r.results[1].metrics.count("inv_gold_l_rel_rmse"));
  EXPECT_TRUE(r.results[1].metrics.count("gold_l_power_max"));
  EXPECT_TRUE(r.results[1].metrics.count("inv_method_only_rel_rmse"));
  EXPECT_FALSE(r.results[1].metrics.count("inv_stable_l_rel_rmse"));
  EXPECT_EQ(r.results[1].per_sample.at("gold_l_highest_power").size(), 3u);
  // Today's schema is written; a foreign one is refused by name.
  EXPECT_EQ(report_to_json(r)["schema"], kReportSchema);
  std::ofstream(file) << R"({"schema": "chunkinv.report/9", "results": []})";
  try {
    read_report(file.string());
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("chunkinv.report/2"), std::string::npos) << e.what();
  }
  std::filesystem::remove(file);
}

// ---------------------------------------------------------------------------
// Hostile reports: every impossible value is one UsageError naming the entry
// and what is allowed, at load, before table or check looks at it.

namespace {

using chunkinv::testing::usage_error;

// A valid /2 report of one entry whose `field` (in its statistics of
// inv_total_rel_rmse, or of the entry itself) is replaced by `value`.
std::string report_text(const std::string& entry_fields, const std::string& stats_fields = "") {
  const std::string stats = R"({"median": 1e-6, "mean": 1e-6, "p10": 1e-7, "p90": "inf", "p99": "inf", "min": 1e-7,
                                "max": "inf", "finite_count": 3)" + stats_fields + "}";
  return R"({"schema": "chunkinv.report/2", "meta": {}, "results": [{"axes": {"family": "floor", "chunk": 16,
            "dim": 128, "decay_floor": -5, "path": "emulated", "method": "neumann"}, "samples": 4, "seed": 0,
            "metrics": {"inv_total_rel_rmse": )" + stats + "}" + entry_fields + "}]}";
}

std::string load_error(const std::string& text) {
  return usage_error([&] { parse_report(text, "r.json"); });
}

// `text` with the first occurrence of `from` replaced by `to`.
std::string with(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? text : text.replace(at, from.size(), to);
}

}  // namespace

TEST(Report, AValidReportLoadsWithItsNonFiniteStatistics) {
  // A 0/1-like metric: every value finite, in [0, 1], its mean inside the interval.
  const Report r = parse_report(with(with(report_text("", R"(, "wilson_low": 0, "wilson_high": 0.6)"),
                                          R"("p90": "inf", "p99": "inf")", R"("p90": 1, "p99": 1)"),
                                     R"("max": "inf", "finite_count": 3)", R"("max": 1, "finite_count": 4)"),
                                "r.json");
  ASSERT_EQ(r.results.size(), 1u);
  const Stats& s = r.results[0].metrics.at("inv_total_rel_rmse");
  EXPECT_EQ(s.finite_count, 4u);
  EXPECT_EQ(s.count, 4u);
  EXPECT_TRUE(s.has_wilson);
  EXPECT_TRUE(std::isinf(parse_report(report_text(""), "r.json").results[0].metrics.at("inv_total_rel_rmse").max));
  // A mean over no finite sample is "nan" (every value +inf); written and read back the same.
  std::string none = with(with(report_text(""), R"("median": 1e-6, "mean": 1e-6, "p10": 1e-7)",
                               R"("median": "inf", "mean": "nan", "p10": "inf")"),
                          R"("min": 1e-7)", R"("min": "inf")");
  none = with(none, R"("finite_count": 3)", R"("finite_count": 0)");
  const Report n = parse_report(none, "r.json");
  EXPECT_TRUE(std::isnan(n.results[0].metrics.at("inv_total_rel_rmse").mean));
  EXPECT_EQ(report_to_json(parse_report(report_to_json(r).dump(), "again")).dump(), report_to_json(r).dump());
}

TEST(Report, ImpossibleCountsAreRefused) {
  const std::string fc = R"("finite_count": 3)";
  for (const char* bad : {"\"nan\"", "1e30", "-5", "3.7", "5", "18446744073709551616", "null", "\"3\""})
    EXPECT_HAS(load_error(with(report_text(""), fc, std::string("\"finite_count\": ") + bad)),
               "report r.json: results[0]: metric inv_total_rel_rmse: statistic \"finite_count\" = ");
  EXPECT_HAS(load_error(with(report_text(""), fc, R"("finite_count": 5)")),
             "\"finite_count\" = 5 must be a whole number from 0 to 4 (the samples)");
  const std::string samples = R"("samples": 4)";
  for (const char* bad : {"-1", "2.5", "0", "1e30", "\"4\"", "1e16"})
    EXPECT_HAS(load_error(with(report_text(""), samples, std::string("\"samples\": ") + bad)),
               "report r.json: results[0]: \"samples\" = ");
  EXPECT_HAS(load_error(with(report_text(""), samples, R"("samples": 2.5)")),
             "\"samples\" = 2.5 must be a whole number from 1 to 1000000000000000");
  EXPECT_HAS(load_error(with(report_text(""), R"("seed": 0)", R"("seed": -1)")), "\"seed\" = -1 must be a whole number");
  EXPECT_HAS(load_error(with(report_text(""), R"("seed": 0)", R"("seed": 1e30)")), "\"seed\" = 1e+30");
}

// Statistics that no values have: every value is finite or +inf, so the
// order statistics rise from min to max and are never -inf, max is +inf
// exactly when a value is not finite, the mean lies between min and max,
// and a 0/1 metric's mean inside its Wilson interval (once graded BETTER by
// check, and shown by table as "150% [94.0, 100]").
TEST(Report, StatisticsNoValuesCanHaveAreRefused) {
  const std::string t = report_text("");
  EXPECT_HAS(load_error(with(with(t, R"("min": 1e-7)", R"("min": 2e-6)"), R"("p10": 1e-7)", R"("p10": 3e-6)")),
             "statistic \"p10\" = 3e-06 is above \"median\" = 1e-06; no values have such statistics");
  EXPECT_HAS(load_error(with(t, R"("min": 1e-7)", R"("min": 1e-5)")), "statistic \"min\" = 1e-05 is above \"p10\"");
  EXPECT_HAS(load_error(with(t, R"("median": 1e-6)", R"("median": "-inf")")), "statistic \"median\" is -inf");
  EXPECT_HAS(load_error(with(t, R"("finite_count": 3)", R"("finite_count": 4)")),
             "max inf does not fit finite_count 4 of 4 samples");
  EXPECT_HAS(load_error(with(t, R"("mean": 1e-6)", R"("mean": "nan")")), "mean nan does not fit finite_count 3");
  EXPECT_HAS(load_error(with(t, R"("mean": 1e-6)", R"("mean": 1e-8)")), "mean 1e-08 is outside min 1e-07");
  const std::string flag = with(with(t, R"("p90": "inf", "p99": "inf")", R"("p90": 1, "p99": 1)"),
                                R"("max": "inf", "finite_count": 3)", R"("max": 1, "finite_count": 4)");
  EXPECT_NO_THROW(parse_report(with(flag, "}}}]}", R"(, "wilson_low": 0, "wilson_high": 0.6}}}]})"), "r.json"));
  EXPECT_HAS(load_error(with(with(flag, R"("mean": 1e-6)", R"("mean": 1.5)"), "}}}]}",
                             R"(, "wilson_low": 0.94, "wilson_high": 1}}}]})")),
             "mean 1.5 is outside min 1e-07 and max 1");
  EXPECT_HAS(load_error(with(with(flag, R"("mean": 1e-6)", R"("mean": 0.7)"), "}}}]}",
                             R"(, "wilson_low": 0, "wilson_high": 0.6}}}]})")),
             "a 0/1 metric's mean 0.7 (min 1e-07, max 1) is not inside its Wilson interval [0, 0.6]");
  // Within a relative 1e-9 is rounding (of an interpolated quantile, of a mean).
  EXPECT_NO_THROW(parse_report(with(t, R"("p10": 1e-7)", R"("p10": 0.99999999999e-7)"), "r.json"));
}

TEST(Report, StatisticsAreNumbersOrTheNonFiniteWordsWhereTheyCanBe) {
  EXPECT_HAS(load_error(with(report_text(""), R"("median": 1e-6)", R"("median": "nan")")),
             "statistic \"median\" is \"nan\"; only \"mean\" may be");
  EXPECT_HAS(load_error(with(report_text(""), R"("median": 1e-6)", R"("median": "NaN")")),
             "statistic \"median\": expected a number or \"inf\"/\"-inf\"/\"nan\", got \"NaN\"");
  EXPECT_HAS(load_error(with(report_text(""), R"("p10": 1e-7)", R"("p10": [1])")), "statistic \"p10\": expected a number");
  EXPECT_HAS(load_error(with(report_text(""), R"("min": 1e-7,)", "")), "statistic \"min\" is missing");
  EXPECT_HAS(load_error(report_text("", R"(, "wilson_low": 0.5, "wilson_high": 0.4)")),
             "wilson_low 0.5 and wilson_high 0.4 must satisfy 0 <= low <= high <= 1");
  EXPECT_HAS(load_error(report_text("", R"(, "wilson_low": 0.5)")), "statistic \"wilson_high\" is missing");
  EXPECT_HAS(load_error(with(report_text(""), R"("inv_total_rel_rmse": {)", R"("inv_total_rel_rmse": 5, "x": {)")),
             "metric inv_total_rel_rmse: statistics must be an object, not 5");
  // One metric under its old and its new name.
  EXPECT_HAS(load_error(with(report_text(""), R"("inv_total_rel_rmse": {)",
                             R"("inv_stable_l_rel_rmse": {}, "inv_gold_l_rel_rmse": {)")),
             "metric inv_gold_l_rel_rmse appears twice");
  EXPECT_HAS(load_error(report_text(R"(, "per_sample": {"l_rel_rmse": [1, 2, "inf"]})")),
             "per_sample.l_rel_rmse must be a list of 4 values (one per sample)");
  EXPECT_HAS(load_error(report_text(R"(, "per_sample": {"l_rel_rmse": [1, 2, "inf", "nan"]})")),
             "per_sample.l_rel_rmse holds \"nan\"");
  EXPECT_EQ(parse_report(report_text(R"(, "per_sample": {"l_rel_rmse": [1, 2, "inf", 0]})"), "r")
                .results[0].per_sample.at("l_rel_rmse").size(), 4u);
}

TEST(Report, ShapeSchemaAndAxesAreChecked) {
  for (const char* schema : {"5", "null", "{}", "[\"chunkinv.report/2\"]"})
    EXPECT_HAS(load_error(with(report_text(""), R"("schema": "chunkinv.report/2")", std::string("\"schema\": ") + schema)),
               std::string("report r.json: \"schema\" = ") + schema);
  EXPECT_HAS(load_error(with(report_text(""), R"("schema": "chunkinv.report/2", )", "")), "\"schema\" is missing");
  EXPECT_HAS(load_error("[1]"), "report r.json: not a report");
  EXPECT_HAS(load_error(with(report_text(""), R"("meta": {})", R"("meta": 7)")), "\"meta\" is not an object");
  EXPECT_HAS(load_error(with(report_text(""), R"("path": "emulated")", R"("path": 7)")),
             "results[0]: axes.path is missing or not a string");
  EXPECT_HAS(load_error(with(report_text(""), R"("decay_floor": -5)", R"("decay_floor": [-5])")),
             "axes.decay_floor = [-5] is not an axis value");
  EXPECT_HAS(load_error(with(report_text(""), R"("results": [)", R"("results": [7, )")), "results[0]: must be an object");
}

TEST(Report, OneConfigurationTwiceIsRefusedAtLoad) {
  std::string text = report_text("");
  const size_t entry = text.find(R"({"axes")");
  const std::string one = text.substr(entry, text.rfind("]}") - entry);
  text.insert(text.rfind("]}"), ", " + with(one, "\"decay_floor\": -5", "\"decay_floor\": -5.0"));
  EXPECT_HAS(load_error(text), "report r.json: results[1]: configuration floor chunk=16 ");
  EXPECT_HAS(load_error(text), "(path emulated) appears twice (also results[0])");
  // Another path or method is another entry.
  text = report_text("");
  text.insert(text.rfind("]}"), ", " + with(one, "\"method\": \"neumann\"", "\"method\": \"fwdsub_fp32\""));
  EXPECT_EQ(parse_report(text, "r").results.size(), 2u);
}

TEST(Report, HostileJsonIsRefusedBeforeItIsUsed) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_HAS(load_error(with(report_text(""), R"("meta": {})", "\"meta\": " + deep)), "nested deeper than 64 levels at meta");
  EXPECT_HAS(load_error(with(report_text(""), R"("chunk": 16)", "\"chunk\": " + deep)),
             "nested deeper than 64 levels at results[0].axes.chunk");
  EXPECT_HAS(load_error(with(report_text(""), R"("meta": {})", "\"table\": " + deep + R"(, "meta": {})")),
             "nested deeper than 64");
  EXPECT_HAS(load_error(with(report_text(""), R"("meta": {})", R"("meta": {}, "meta": {})")), "key \"meta\" appears twice");
  EXPECT_HAS(load_error(report_text("") + std::string(1, '\0') + "garbage"), "is a NUL byte");
  EXPECT_HAS(load_error(report_text("") + "]"), "not valid JSON");
  // Files: a directory, and one over the size limit (checked before reading).
  const auto dir = std::filesystem::temp_directory_path();
  EXPECT_HAS(usage_error([&] { read_report(dir.string()); }), "is a directory, not a JSON file");
  const auto file = dir / ("chunkinv_big_" + std::to_string(::getpid()) + ".json");
  std::ofstream(file) << report_text("");
  ::setenv("CHUNKINV_MAX_REPORT_BYTES", "100", 1);
  EXPECT_HAS(usage_error([&] { read_report(file.string()); }),
             "more than the 100 bytes limit (raise it with CHUNKINV_MAX_REPORT_BYTES=SIZE");
  ::unsetenv("CHUNKINV_MAX_REPORT_BYTES");
  EXPECT_EQ(read_report(file.string()).results.size(), 1u);
  std::filesystem::resize_file(file, (uint64_t{2} << 30) + 1);  // sparse
  EXPECT_HAS(usage_error([&] { read_report(file.string()); }), "2.0 GiB, more than the 2.0 GiB limit");
  std::filesystem::remove(file);
}
