// The JSON report: reports of the older schema load with today's axes and
// metric names, so that baselines and tables made before the method axis
// keep their meaning.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "report/report.hpp"

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
