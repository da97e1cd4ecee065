// The JSON report (schema "chunkinv.report/2", docs/report-schema.md):
// written atomically, read back with validation by table, check and plots.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/output_file.hpp"
#include "metrics/sketch.hpp"
#include "metrics/stats.hpp"
#include "report/worst.hpp"

namespace chunkinv {

// /2 added the `method` axis and renamed four metrics; /1 reports still load
// (read_report fills in the method and today's names).
inline constexpr const char* kReportSchema = "chunkinv.report/2";
inline constexpr const char* kReportSchemaV1 = "chunkinv.report/1";

// Finite numbers as JSON numbers; non-finite as the strings "inf", "-inf", "nan".
nlohmann::json json_number(double v);
// The inverse; throws UsageError on anything else.
double number_from_json(const nlohmann::json& j);

nlohmann::json stats_to_json(const Stats& s);
// Refuses a missing statistic, NaN where only a mean may be NaN, a
// finite_count that is not a whole number (at most `samples` when given),
// a Wilson interval outside [0, 1], and statistics no values can have
// (min above max, a quantile out of order, -inf, a mean outside them).
Stats stats_from_json(const nlohmann::json& j, std::optional<uint64_t> samples = std::nullopt);

// The most samples one configuration may have: 10^15, so that a sample
// index or count stays exact in a double.
inline constexpr uint64_t kMaxSamples = 1'000'000'000'000'000;

struct ReportEntry {
  nlohmann::json axes;  // {"family", "chunk", "dim", "path", "method", <family params>...}
  uint64_t samples = 0;
  uint64_t seed = 0;
  std::map<std::string, Stats> metrics;
  // The quantiles come from the sketch (metrics/sketch.hpp; "quantiles":
  // "sketch"), not from every value sorted.
  bool sketch = false;
  // Optional: metric name -> one value per sample (run --per-sample).
  std::map<std::string, std::vector<double>> per_sample;
  // Optional: metric name -> the mergeable state of its values (run --shard, --until).
  std::map<std::string, SketchState> state;
  // Optional: the N worst samples by a metric (run/score --worst; report/worst.hpp).
  std::optional<WorstSamples> worst;
};

// The format of an entry's "state" (docs/report-schema.md).
inline constexpr const char* kSketchFormat = "chunkinv.sketch/1";
nlohmann::json state_to_json(const SketchState& s);
// Refuses counts that do not add up to `samples`, keys out of range or not
// ascending, a malformed sum, min > max, unknown keys.
SketchState state_from_json(const nlohmann::json& j, uint64_t samples);
// Refuses a min and max that do not fit the counts (NaN exactly when every
// value is NaN, min <= max, -inf and +inf exactly where counted).
void check_state_bounds(const SketchState& s);

struct Report {
  nlohmann::json meta = nlohmann::json::object();
  std::vector<ReportEntry> results;
};

nlohmann::json report_to_json(const Report& r);
nlohmann::json entry_to_json(const ReportEntry& e);
// One entry, checked as read_report checks it (the checkpoint's finished
// configurations are read back with it); UsageError naming what is wrong.
ReportEntry entry_from_json(const nlohmann::json& e);
// Throws UsageError("report FILE: <what is wrong>") for an unreadable,
// malformed or foreign file: more than 2 GiB ($CHUNKINV_MAX_REPORT_BYTES
// raises it), JSON nested deeper than 64, a duplicate key, bytes after the
// report, "samples" not a whole number from 1 to kMaxSamples, a statistic
// that cannot be (above), one configuration twice.
Report read_report(const std::string& path);
// The same from the file's text (`path` names it in messages).
Report parse_report(std::string_view text, const std::string& path);

// A report is written all at once or not at all, to a file, a device or
// stdout ("-"); the destination is checked before any work (core/output_file.hpp).
using AtomicFile = OutputFile;

}  // namespace chunkinv
