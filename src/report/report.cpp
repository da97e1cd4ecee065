#include "report/report.hpp"

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
  return s;
}

json report_to_json(const Report& r) {
  json results = json::array();
  for (const auto& e : r.results) {
    json m = json::object();
    for (const auto& [name, st] : e.metrics) {
      json sj = stats_to_json(st);
      m[name] = sj;
    }
    json entry = {{"axes", e.axes}, {"samples", e.samples}, {"seed", e.seed}, {"metrics", m}};
    if (!e.per_sample.empty()) {
      json ps = json::object();
      for (const auto& [name, values] : e.per_sample) {
        json arr = json::array();
        for (double v : values) arr.push_back(json_number(v));
        ps[name] = arr;
      }
      entry["per_sample"] = ps;
    }
    results.push_back(entry);
  }
  return json{{"schema", kReportSchema}, {"meta", r.meta}, {"results", results}};
}

namespace {

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
  return entry;
}

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
