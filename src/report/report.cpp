#include "report/report.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include <fmt/format.h>

#include "core/error.hpp"
#include "metrics/metrics.hpp"
#include "paths/path.hpp"

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

Stats stats_from_json(const json& j) {
  if (!j.is_object()) throw UsageError("statistics must be an object");
  Stats s;
  auto get = [&](const char* k) {
    if (!j.contains(k)) throw UsageError(fmt::format("statistic \"{}\" is missing", k));
    return number_from_json(j.at(k));
  };
  s.median = get("median");
  s.mean = get("mean");
  s.p10 = get("p10");
  s.p90 = get("p90");
  s.p99 = get("p99");
  s.min = get("min");
  s.max = get("max");
  s.finite_count = static_cast<uint64_t>(get("finite_count"));
  if (j.contains("wilson_low")) {
    s.has_wilson = true;
    s.wilson_low = get("wilson_low");
    s.wilson_high = get("wilson_high");
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

Report read_report(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError(fmt::format("report {}: cannot be opened", path));
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    throw UsageError(fmt::format("report {}: not valid JSON ({})", path, e.what()));
  }
  try {
    const std::string schema = j.is_object() && j.contains("schema") && j["schema"].is_string()
                                   ? j["schema"].get<std::string>() : std::string();
    if (schema != kReportSchema && schema != kReportSchemaV1) {
      throw UsageError(fmt::format("schema is not \"{}\" (nor the older \"{}\")", kReportSchema, kReportSchemaV1));
    }
    Report r;
    r.meta = j.value("meta", json::object());
    if (!j.contains("results") || !j["results"].is_array()) throw UsageError("\"results\" is missing or not an array");
    size_t i = 0;
    for (const auto& e : j["results"]) {
      try {
        ReportEntry entry;
        if (!e.contains("axes") || !e["axes"].is_object()) throw UsageError("\"axes\" is missing");
        entry.axes = e["axes"];
        if (!entry.axes.contains("path")) throw UsageError("axes.path is missing");
        if (!entry.axes.contains("method")) {  // schema /1: the gold's own entry, or Neumann
          const PathSpec* p = entry.axes["path"].is_string() ? find_path_or_null(entry.axes["path"].get<std::string>())
                                                              : nullptr;
          entry.axes["method"] = std::string(p && p->reference ? exact_method().name : default_method().name);
        }
        entry.samples = e.at("samples").get<uint64_t>();
        entry.seed = e.value("seed", uint64_t{0});
        for (const auto& [name, sj] : e.at("metrics").items()) {
          try {
            entry.metrics[canonical_metric_name(name)] = stats_from_json(sj);
          } catch (const UsageError& err) {
            throw UsageError(fmt::format("metric {}: {}", name, err.what()));
          }
        }
        if (e.contains("per_sample")) {
          for (const auto& [name, arr] : e["per_sample"].items()) {
            std::vector<double> v;
            for (const auto& x : arr) v.push_back(number_from_json(x));
            entry.per_sample[canonical_metric_name(name)] = std::move(v);
          }
        }
        r.results.push_back(std::move(entry));
      } catch (const UsageError& err) {
        throw UsageError(fmt::format("results[{}]: {}", i, err.what()));
      } catch (const json::exception& err) {
        throw UsageError(fmt::format("results[{}]: {}", i, err.what()));
      }
      ++i;
    }
    return r;
  } catch (const UsageError& err) {
    throw UsageError(fmt::format("report {}: {}", path, err.what()));
  }
}

}  // namespace chunkinv
