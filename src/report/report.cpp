#include "report/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <new>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/json_read.hpp"
#include "metrics/metrics.hpp"
#include "paths/path.hpp"
#include "report/table.hpp"

namespace chunkinv {

using nlohmann::json;

json json_number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

double number_from_json(const json& j) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const auto s = j.get<std::string>();
    if (s == "inf") return INFINITY;
    if (s == "-inf") return -INFINITY;
    if (s == "nan") return NAN;
  }
  throw UsageError(fmt::format("expected a number or \"inf\"/\"-inf\"/\"nan\", got {}", j.dump()));
}

json stats_to_json(const Stats& s) {
  json j = json::object();
  for (const auto& name : stat_names()) {
    if (!has_stat(s, name)) continue;
    if (name == "finite_count") {
      j[name] = s.finite_count;
    } else {
      j[name] = json_number(stat_value(s, name));
    }
  }
  if (s.has_wilson) {
    j["wilson_low"] = json_number(s.wilson_low);
    j["wilson_high"] = json_number(s.wilson_high);
  }
  return j;
}

namespace {

// Statistics that no set of values has are refused: every metric value is
// finite or +inf (docs/report-schema.md), so the order statistics rise
// from min to max, never -inf; max is +inf exactly when some value is not
// finite; the mean, of the finite values, lies between min and max and is
// NaN exactly when there is none; a 0/1 metric's mean (the share of 1s) is
// inside its Wilson interval. A relative 1e-9 allows for the rounding of
// an interpolated quantile or of a mean.
void check_consistent(const Stats& s, bool counted) {
  const auto at_most = [](double a, double b) { return a <= b || a - b <= 1e-9 * std::max(std::fabs(a), std::fabs(b)); };
  const std::pair<const char*, double> order[] = {{"min", s.min},        {"p10", s.p10},   {"median", s.median},
                                                  {"p90", s.p90},        {"p99", s.p99},   {"p999", s.p999},
                                                  {"p999999", s.p999999}, {"max", s.max}};
  const char* last = nullptr;
  double before = 0;
  for (const auto& [name, v] : order) {
    if (!s.has_tail && (name == std::string_view("p999") || name == std::string_view("p999999"))) continue;
    if (v == -INFINITY) throw UsageError(fmt::format("statistic \"{}\" is -inf; a metric's value never is", name));
    if (last && !at_most(before, v))
      throw UsageError(fmt::format("statistic \"{}\" = {} is above \"{}\" = {}; no values have such statistics", last,
                                   before, name, v));
    last = name;
    before = v;
  }
  if (counted && (s.max == INFINITY) != (s.finite_count < s.count))
    throw UsageError(fmt::format("max {} does not fit finite_count {} of {} samples (max is inf exactly when a value is not "
                                 "finite)",
                                 s.max, s.finite_count, s.count));
  if (s.finite_count == 0 && s.min != INFINITY)
    throw UsageError(fmt::format("min {} with finite_count 0 (every value +inf, so min is too)", s.min));
  if (std::isnan(s.mean) != (s.finite_count == 0))
    throw UsageError(fmt::format("mean {} does not fit finite_count {} (the mean of the finite values is NaN exactly when "
                                 "there is none)",
                                 s.mean, s.finite_count));
  if (s.finite_count && !(at_most(s.min, s.mean) && at_most(s.mean, s.max)))
    throw UsageError(fmt::format("mean {} is outside min {} and max {}", s.mean, s.min, s.max));
  if (s.has_wilson && !(s.min >= 0 && s.max <= 1 && at_most(s.wilson_low, s.mean) && at_most(s.mean, s.wilson_high)))
    throw UsageError(fmt::format("a 0/1 metric's mean {} (min {}, max {}) is not inside its Wilson interval [{}, {}]", s.mean,
                                 s.min, s.max, s.wilson_low, s.wilson_high));
}

}  // namespace

Stats stats_from_json(const json& j, std::optional<uint64_t> samples) {
  if (!j.is_object()) throw UsageError(fmt::format("statistics must be an object, not {}", json_excerpt(j)));
  Stats s;
  // Order statistics of values that are finite or +inf (docs/report-schema.md)
  // cannot be NaN; a mean can (no finite value), and overflow to inf.
  auto get = [&](const char* k, bool nan_allowed) {
    if (!j.contains(k)) throw UsageError(fmt::format("statistic \"{}\" is missing", k));
    double v = 0;
    try {
      v = number_from_json(j.at(k));
    } catch (const UsageError& e) {
      throw UsageError(fmt::format("statistic \"{}\": {}", k, e.what()));
    }
    if (std::isnan(v) && !nan_allowed)
      throw UsageError(fmt::format("statistic \"{}\" is \"nan\"; only \"mean\" may be (a mean of no finite value)", k));
    return v;
  };
  s.median = get("median", false);
  s.mean = get("mean", true);
  s.p10 = get("p10", false);
  s.p90 = get("p90", false);
  s.p99 = get("p99", false);
  // The tail came later: a report without it still loads (without it).
  s.has_tail = j.contains("p999") || j.contains("p999999");
  if (s.has_tail) {
    s.p999 = get("p999", false);
    s.p999999 = get("p999999", false);
  }
  s.min = get("min", false);
  s.max = get("max", false);
  if (!j.contains("finite_count")) throw UsageError("statistic \"finite_count\" is missing");
  const uint64_t most = samples.value_or(UINT64_MAX);
  if (const auto n = json_unsigned(j.at("finite_count"), 0, most)) {
    s.finite_count = *n;
  } else {
    throw UsageError(fmt::format("statistic \"finite_count\" = {} must be a whole number from 0 to {}{}",
                                 json_excerpt(j.at("finite_count")), most, samples ? " (the samples)" : ""));
  }
  if (samples) s.count = *samples;
  if (j.contains("wilson_low") || j.contains("wilson_high")) {
    s.has_wilson = true;
    s.wilson_low = get("wilson_low", false);
    s.wilson_high = get("wilson_high", false);
    if (!(s.wilson_low >= 0 && s.wilson_low <= s.wilson_high && s.wilson_high <= 1))
      throw UsageError(fmt::format("wilson_low {} and wilson_high {} must satisfy 0 <= low <= high <= 1", s.wilson_low,
                                   s.wilson_high));
  }
  check_consistent(s, samples.has_value());
  return s;
}

namespace {

// Buckets as [key, count, key step, count, ...]: keys ascending, so each
// step after the first key is positive and short.
json buckets_to_json(const std::vector<SketchBucket>& b) {
  json a = json::array();
  int32_t last = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    a.push_back(i ? b[i].key - last : b[i].key);
    a.push_back(b[i].count);
    last = b[i].key;
  }
  return a;
}

// The buckets of `j`; their counts are added to `total`, which may not pass `most`.
std::vector<SketchBucket> buckets_from_json(const json& j, const char* name, uint64_t most, uint64_t& total) {
  if (!j.is_array() || j.size() % 2)
    throw UsageError(fmt::format("\"{}\" must be a list [key, count, key step, count, ...]", name));
  if (j.size() / 2 > uint64_t(kSketchKeyMax) - uint64_t(int64_t(kSketchKeyMin)) + 1)
    throw UsageError(fmt::format("\"{}\" holds more buckets than there are keys", name));
  std::vector<SketchBucket> out;
  out.reserve(j.size() / 2);
  int64_t key = 0;
  for (size_t i = 0; i < j.size(); i += 2) {
    const int64_t lo = i ? 1 : kSketchKeyMin;
    const auto step = json_integer(j[i], lo, int64_t(kSketchKeyMax) - (i ? key : 0));
    if (!step)
      throw UsageError(fmt::format("\"{}\"[{}] = {}: {} from {} to {}", name, i, json_excerpt(j[i]),
                                   i ? "a key step must be a whole number" : "the first key must be a whole number", lo,
                                   int64_t(kSketchKeyMax) - (i ? key : 0)));
    key = i ? key + *step : *step;
    const auto count = json_unsigned(j[i + 1], 1, most - total);
    if (!count)
      throw UsageError(fmt::format("\"{}\"[{}] = {}: a bucket's count must be a whole number from 1, and the counts "
                                   "may not add up to more than the samples ({})",
                                   name, i + 1, json_excerpt(j[i + 1]), most));
    total += *count;
    out.push_back({int32_t(key), *count});
  }
  return out;
}

}  // namespace

json state_to_json(const SketchState& s) {
  return json{{"count", s.count},       {"nan", s.nan},        {"neg_inf", s.neg_inf},
              {"pos_inf", s.pos_inf},   {"zeros", s.zeros},    {"min", json_number(s.min)},
              {"max", json_number(s.max)}, {"sum", s.sum.to_hex()}, {"neg", buckets_to_json(s.neg)},
              {"pos", buckets_to_json(s.pos)}};
}

SketchState state_from_json(const json& j, uint64_t samples) {
  if (!j.is_object()) throw UsageError(fmt::format("a state must be an object, not {}", json_excerpt(j)));
  static const char* const kKeys[] = {"count", "nan", "neg_inf", "pos_inf", "zeros", "min", "max", "sum", "neg", "pos"};
  for (const auto& [k, v] : j.items())
    if (std::find(std::begin(kKeys), std::end(kKeys), k) == std::end(kKeys))
      throw UsageError(fmt::format("unknown key \"{}\" in a state", k.size() > 40 ? k.substr(0, 37) + "..." : k));
  for (const char* k : kKeys)
    if (!j.contains(k)) throw UsageError(fmt::format("\"{}\" is missing from a state", k));
  SketchState s;
  s.count = require_unsigned(j["count"], samples, samples, "\"count\" (the samples)");
  uint64_t total = 0;
  const std::pair<const char*, uint64_t*> counts[] = {{"nan", &s.nan}, {"neg_inf", &s.neg_inf}, {"pos_inf", &s.pos_inf},
                                                      {"zeros", &s.zeros}};
  for (const auto& [k, field] : counts) {
    *field = require_unsigned(j[k], 0, samples - total, fmt::format("\"{}\" (with the counts before it, at most the samples)", k));
    total += *field;
  }
  s.neg = buckets_from_json(j["neg"], "neg", samples, total);
  s.pos = buckets_from_json(j["pos"], "pos", samples, total);
  if (total != samples)
    throw UsageError(fmt::format("the state's counts add up to {}, not to the samples ({})", total, samples));
  if (!j["sum"].is_string()) throw UsageError("\"sum\" must be a string of hexadecimal digits");
  s.sum = ExactSum::from_hex(j["sum"].get<std::string>());
  try {
    s.min = number_from_json(j["min"]);
    s.max = number_from_json(j["max"]);
  } catch (const UsageError& e) {
    throw UsageError(fmt::format("min or max: {}", e.what()));
  }
  check_state_bounds(s);
  return s;
}

void check_state_bounds(const SketchState& s) {
  const bool none = s.nan == s.count;  // no value to order
  if (std::isnan(s.min) != none || std::isnan(s.max) != none || (!none && !(s.min <= s.max)))
    throw UsageError(fmt::format("min {} and max {} do not fit the counts (NaN exactly when every value is NaN; min <= max)",
                                 s.min, s.max));
  if ((s.neg_inf > 0) != (s.min == -INFINITY) || (s.pos_inf > 0) != (s.max == INFINITY))
    throw UsageError(fmt::format("min {} and max {} do not fit the counts of -inf and +inf", s.min, s.max));
}

json entry_to_json(const ReportEntry& e) {
  json m = json::object();
  for (const auto& [name, st] : e.metrics) m[name] = stats_to_json(st);
  json entry = {{"axes", e.axes}, {"samples", e.samples}, {"seed", e.seed}, {"metrics", m}};
  if (e.sketch) entry["quantiles"] = "sketch";
  if (!e.per_sample.empty()) {
    json ps = json::object();
    for (const auto& [name, values] : e.per_sample) {
      json arr = json::array();
      for (double v : values) arr.push_back(json_number(v));
      ps[name] = arr;
    }
    entry["per_sample"] = ps;
  }
  if (!e.state.empty()) {
    json st = json::object();
    for (const auto& [name, s] : e.state) st[name] = state_to_json(s);
    entry["state"] = {{"format", kSketchFormat}, {"metrics", st}};
  }
  if (e.worst) entry["worst"] = worst_to_json(*e.worst);
  return entry;
}

json report_to_json(const Report& r) {
  json results = json::array();
  for (const auto& e : r.results) results.push_back(entry_to_json(e));
  return json{{"schema", kReportSchema}, {"meta", r.meta}, {"results", results}};
}

ReportEntry entry_from_json(const json& e) {
  if (!e.is_object()) throw UsageError(fmt::format("must be an object, not {}", json_excerpt(e)));
  ReportEntry entry;
  if (!e.contains("axes") || !e["axes"].is_object()) throw UsageError("\"axes\" is missing or not an object");
  entry.axes = e["axes"];
  for (const auto& [k, v] : entry.axes.items())
    if (!v.is_number() && !v.is_string() && !v.is_null())
      throw UsageError(fmt::format("axes.{} = {} is not an axis value (a number, a string or null)", k, json_excerpt(v)));
  for (const char* k : {"family", "path"})
    if (!entry.axes.contains(k) || !entry.axes[k].is_string())
      throw UsageError(fmt::format("axes.{} is missing or not a string", k));
  if (!entry.axes.contains("method")) {  // schema /1: the gold's own entry, or Neumann
    const PathSpec* p = find_path_or_null(entry.axes["path"].get<std::string>());
    entry.axes["method"] = std::string(p && p->reference ? exact_method().name : default_method().name);
  }
  if (!entry.axes["method"].is_string()) throw UsageError("axes.method is not a string");
  if (!e.contains("samples")) throw UsageError("\"samples\" is missing");
  entry.samples = require_unsigned(e["samples"], 1, kMaxSamples, "\"samples\"");
  if (e.contains("seed")) entry.seed = require_unsigned(e["seed"], 0, UINT64_MAX, "\"seed\"");
  if (!e.contains("metrics") || !e["metrics"].is_object()) throw UsageError("\"metrics\" is missing or not an object");
  // A metric under its old and its new name would be one metric twice.
  const auto canonical = [](const std::map<std::string, std::string>& seen, const std::string& name) {
    const std::string c = canonical_metric_name(name);
    if (const auto it = seen.find(c); it != seen.end())
      throw UsageError(fmt::format("metric {} appears twice (as \"{}\" and \"{}\")", c, it->second, name));
    return c;
  };
  std::map<std::string, std::string> seen;
  for (const auto& [name, sj] : e["metrics"].items()) {
    const std::string c = canonical(seen, name);
    try {
      entry.metrics[c] = stats_from_json(sj, entry.samples);
    } catch (const UsageError& err) {
      throw UsageError(fmt::format("metric {}: {}", name, err.what()));
    }
    seen[c] = name;
  }
  if (e.contains("per_sample")) {
    if (!e["per_sample"].is_object()) throw UsageError("\"per_sample\" is not an object");
    seen.clear();
    for (const auto& [name, arr] : e["per_sample"].items()) {
      const std::string c = canonical(seen, name);
      if (!arr.is_array() || arr.size() != entry.samples)
        throw UsageError(fmt::format("per_sample.{} must be a list of {} values (one per sample)", name, entry.samples));
      std::vector<double> v;
      v.reserve(arr.size());
      for (const auto& x : arr) {
        const double d = number_from_json(x);
        if (std::isnan(d)) throw UsageError(fmt::format("per_sample.{} holds \"nan\"; a metric's value never is", name));
        v.push_back(d);
      }
      entry.per_sample[c] = std::move(v);
      seen[c] = name;
    }
  }
  if (e.contains("quantiles")) {
    if (e["quantiles"] != "sketch" && e["quantiles"] != "exact")
      throw UsageError(fmt::format("\"quantiles\" = {} must be \"exact\" or \"sketch\"", json_excerpt(e["quantiles"])));
    entry.sketch = e["quantiles"] == "sketch";
  }
  if (e.contains("state")) {
    const json& st = e["state"];
    if (!st.is_object() || !st.contains("format") || !st.contains("metrics") || !st["metrics"].is_object())
      throw UsageError("\"state\" must be an object with \"format\" and \"metrics\"");
    if (st["format"] != kSketchFormat)
      throw UsageError(fmt::format("state format {} is not \"{}\"", json_excerpt(st["format"]), kSketchFormat));
    seen.clear();
    for (const auto& [name, sj] : st["metrics"].items()) {
      const std::string c = canonical(seen, name);
      if (!entry.metrics.count(c)) throw UsageError(fmt::format("state.{}: a state of a metric the entry does not report", name));
      try {
        entry.state[c] = state_from_json(sj, entry.samples);
      } catch (const UsageError& err) {
        throw UsageError(fmt::format("state.{}: {}", name, err.what()));
      }
      seen[c] = name;
    }
    if (entry.state.size() != entry.metrics.size())
      throw UsageError(fmt::format("\"state\" holds {} metrics, the entry reports {}; a state covers every metric",
                                   entry.state.size(), entry.metrics.size()));
  }
  if (e.contains("worst")) entry.worst = worst_from_json(e["worst"], entry.samples);
  return entry;
}

namespace {

Report report_from_json(const json& j) {
  if (!j.is_object()) throw UsageError("not a report (a JSON object with \"schema\", \"meta\" and \"results\")");
  if (!j.contains("schema") || !j["schema"].is_string())
    throw UsageError(fmt::format("\"schema\" {}; a report has \"schema\": \"{}\"",
                                 j.contains("schema") ? "= " + json_excerpt(j["schema"]) + " is not a string" : "is missing",
                                 kReportSchema));
  const std::string schema = j["schema"].get<std::string>();
  if (schema != kReportSchema && schema != kReportSchemaV1)
    throw UsageError(fmt::format("schema is not \"{}\" (nor the older \"{}\")", kReportSchema, kReportSchemaV1));
  Report r;
  if (j.contains("meta")) {
    if (!j["meta"].is_object()) throw UsageError("\"meta\" is not an object");
    r.meta = j["meta"];
  }
  if (!j.contains("results") || !j["results"].is_array()) throw UsageError("\"results\" is missing or not an array");
  std::map<std::string, size_t> where;  // configuration -> its entry
  size_t i = 0;
  for (const auto& e : j["results"]) {
    try {
      ReportEntry entry = entry_from_json(e);
      const auto [it, fresh] = where.emplace(axes_key(entry.axes), i);
      if (!fresh)
        throw UsageError(fmt::format("configuration {} (path {}) appears twice (also results[{}])", axes_label(entry.axes),
                                     axis_value_text(entry.axes["path"]), it->second));
      r.results.push_back(std::move(entry));
    } catch (const UsageError& err) {
      throw UsageError(fmt::format("results[{}]: {}", i, err.what()));
    }
    ++i;
  }
  return r;
}

}  // namespace

Report parse_report(std::string_view text, const std::string& path) {
  const std::string what = "report " + path;
  json j = parse_json_strict(text, what);
  const JsonReleaser release(j);
  try {
    return report_from_json(j);
  } catch (const UsageError& err) {
    throw UsageError(fmt::format("{}: {}", what, err.what()));
  }
}

Report read_report(const std::string& path) {
  const std::string what = "report " + path;
  json j;
  const JsonReleaser release(j);  // a report's tree can be gigabytes (see release_json)
  {
    const std::string text = read_text_file(path, report_source(what));
    j = parse_json_strict(text, what);
  }  // the text goes before the entries are built
  try {
    return report_from_json(j);
  } catch (const UsageError& err) {
    throw UsageError(fmt::format("{}: {}", what, err.what()));
  } catch (const std::bad_alloc&) {
    release_json(j);  // memory for the message
    throw UsageError(fmt::format("{}: out of memory while reading its entries", what));
  }
}

}  // namespace chunkinv
