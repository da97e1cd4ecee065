// Comparison of two reports for `chunkinv check` (docs/check.md): every
// configuration present in both is compared figure by figure under a set of
// rules; the result says which figures got worse, so that the exit code can.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/report.hpp"

namespace chunkinv {

enum class CheckKind {
  kIgnore,     // not compared
  kTolerance,  // lower is better; worse when new > baseline * (1 + tolerance) + absolute
  kShare,      // a share of samples (mean of a 0/1 metric, or finite_count / samples); higher is better
  kCount,      // a count that must not grow (max of a non-finite count); compared exactly
  kExact,      // any change is CHANGED, which counts as worse
};

struct CheckRule {
  std::string metric;     // a metric name, or a pattern with '*'
  std::string statistic;  // a statistic name (median, p99, ..., wilson_low), or "*"
  CheckKind kind = CheckKind::kTolerance;
  double tolerance = 0.10;  // kTolerance: relative growth allowed
  double absolute = 0.0;    // kTolerance: absolute growth allowed on top
};

struct CheckRules {
  bool bit_exact = false;         // every statistic of every metric must be identical
  double confidence = 0.999;      // one-sided level of the two-proportion test on shares
  bool missing_in_new_is_worse = true;
  std::vector<CheckRule> rules;   // the last rule that matches a figure decides
};

CheckRules default_check_rules();
// Parses a rules object (docs/check.md); UsageError for unknown keys or names.
CheckRules check_rules_from_json(const nlohmann::json& j);
// Reads a rules file; UsageError naming the file.
CheckRules read_check_rules(const std::string& path);

enum class Verdict { kSame, kBetter, kWorse, kChanged, kMissing };
const char* verdict_name(Verdict v);

struct Comparison {
  nlohmann::json axes;        // the configuration, path included
  std::string configuration;  // axes_label(axes): family, chunk and the other axes but path
  std::string path;
  std::string metric;         // "-" for a whole configuration that is missing
  std::string statistic;
  bool has_baseline = false, has_new = false;
  double baseline = 0, fresh = 0, ratio = 0;
  bool integral = false;      // baseline and new are counts
  bool share = false;         // baseline and new are shares (shown as percentages)
  Verdict verdict = Verdict::kSame;
  bool worse = false;         // counts towards the exit status
  std::string rule;           // how it was judged, in words
};

struct CheckResult {
  std::vector<Comparison> figures;
  size_t configurations = 0;  // compared (present in both)
  size_t only_in_baseline = 0, only_in_new = 0;
  size_t sampling_differs = 0;  // compared configurations whose seed or sample count differ
  size_t same = 0, better = 0, worse = 0, changed = 0, missing = 0;
  size_t failing = 0;  // figures with worse == true
  bool failed() const { return failing > 0; }
};

// UsageError when the reports cannot be compared: a configuration repeated
// within one report, or no configuration in common.
CheckResult compare_reports(const Report& baseline, const Report& fresh, const CheckRules& rules);

// A Markdown table of the figures (all, or only those not SAME) and a summary line.
std::string check_markdown(const CheckResult& r, bool changes_only);
std::string check_summary(const CheckResult& r);
nlohmann::json check_json(const CheckResult& r, const CheckRules& rules);
// JUnit XML, as CI systems read it: a testsuite of one testcase per compared
// figure (classname the configuration and path, name metric.statistic), a
// <failure> with the baseline and new value where the figure counts as worse.
std::string check_junit(const CheckResult& r, const std::string& baseline, const std::string& fresh);
// GitHub Actions workflow commands: an `::error` line per figure that counts
// as worse, a `::notice` with the summary.
std::string check_github(const CheckResult& r, const std::string& baseline, const std::string& fresh);

// The one-sided upper quantile of the standard normal: P(Z > z) = 1 - confidence.
double normal_quantile(double confidence);

}  // namespace chunkinv
