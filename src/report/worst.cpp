#include "report/worst.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/json_read.hpp"
#include "core/limits.hpp"
#include "core/text.hpp"
#include "metrics/metrics.hpp"
#include "report/report.hpp"
#include "report/table.hpp"

namespace chunkinv {

using nlohmann::json;

namespace {

// A 0/1 flag (or a metric declared better higher) is worst at its smallest;
// every other metric (errors, counts, powers) at its largest.
bool lower_is_worse(const std::string& metric) {
  const MetricInfo* m = find_metric(metric);
  return m && higher_is_better(*m);
}

}  // namespace

size_t parse_worst(const std::string& n, std::string& by) {
  if (n.empty()) {
    if (!by.empty()) throw UsageError(fmt::format("--by {} goes with --worst N", by));
    return 0;
  }
  const size_t count = parse_count("--worst", n, 1, 1000);
  if (by.empty()) by = kDefaultWorstMetric;
  if (!find_metric(by)) {
    const std::string near = nearest_of(by, all_metric_names());
    throw UsageError(fmt::format("--by {}: no such metric{}; --list-metrics lists them", by,
                                 near.empty() ? "" : fmt::format(" (did you mean {}?)", near)));
  }
  by = canonical_metric_name(by);
  return count;
}

bool worse_sample(const std::string& by, double a, uint64_t ia, double b, uint64_t ib) {
  const bool fa = std::isfinite(a), fb = std::isfinite(b);
  if (fa != fb) return !fa;
  if (fa && a != b) return lower_is_worse(by) ? a < b : a > b;
  return ia < ib;  // equal values, or both non-finite
}

void WorstHeap::push(Item item) {
  // The front is the least bad kept: the one a worse sample replaces.
  const auto less_bad_first = [this](const Item& x, const Item& y) {
    return worse_sample(by_, x.value, x.index, y.value, y.index);
  };
  heap_.push_back(std::move(item));
  std::push_heap(heap_.begin(), heap_.end(), less_bad_first);
  if (heap_.size() > n_) {
    std::pop_heap(heap_.begin(), heap_.end(), less_bad_first);
    heap_.pop_back();
  }
}

void WorstHeap::add(const WorstSamples& w) {
  for (const WorstSample& s : w.samples) {
    const auto it = s.values.find(by_);
    if (it == s.values.end()) throw UsageError(fmt::format("worst samples: sample {} has no value of {}", s.index, by_));
    offer(s.index, it->second, [&] { return s.values; });
  }
}

WorstSamples WorstHeap::result() const {
  std::vector<Item> items = heap_;
  std::sort(items.begin(), items.end(),
            [this](const Item& x, const Item& y) { return worse_sample(by_, x.value, x.index, y.value, y.index); });
  WorstSamples w{by_, n_, {}};
  for (Item& i : items) w.samples.push_back({i.index, std::move(i.values)});
  return w;
}

WorstSamples worst_from_per_sample(const std::map<std::string, std::vector<double>>& per_sample, const std::string& by,
                                   size_t n) {
  WorstHeap heap(by, n);
  const auto it = per_sample.find(by);
  if (it == per_sample.end()) return heap.result();
  for (size_t i = 0; i < it->second.size(); ++i)
    heap.offer(i, it->second[i], [&] {
      std::map<std::string, double> v;
      for (const auto& [name, values] : per_sample) v[name] = values.at(i);
      return v;
    });
  return heap.result();
}

json worst_to_json(const WorstSamples& w) {
  json samples = json::array();
  for (const WorstSample& s : w.samples) {
    json v = json::object();
    for (const auto& [name, x] : s.values) v[name] = json_number(x);
    samples.push_back({{"index", s.index}, {"values", v}});
  }
  return {{"by", w.by}, {"n", w.n}, {"samples", samples}};
}

WorstSamples worst_from_json(const json& j, uint64_t samples) {
  if (!j.is_object()) throw UsageError("\"worst\" is not an object");
  for (const auto& [k, v] : j.items())
    if (k != "by" && k != "n" && k != "samples") throw UsageError(fmt::format("\"worst\" has an unknown key \"{}\"", k));
  if (!j.contains("by") || !j["by"].is_string()) throw UsageError("worst.by is missing or not a metric name");
  WorstSamples w;
  w.by = canonical_metric_name(j["by"].get<std::string>());
  if (!j.contains("n")) throw UsageError("worst.n is missing");
  w.n = require_unsigned(j["n"], 1, kMaxSamples, "worst.n");
  if (!j.contains("samples") || !j["samples"].is_array()) throw UsageError("worst.samples is missing or not a list");
  if (j["samples"].size() > std::min<uint64_t>(w.n, samples))
    throw UsageError(fmt::format("worst.samples holds {} samples, more than worst.n {} or the entry's {}",
                                 j["samples"].size(), w.n, samples));
  std::set<uint64_t> seen;
  for (const json& s : j["samples"]) {
    if (!s.is_object() || !s.contains("index") || !s.contains("values") || !s["values"].is_object() || s.size() != 2)
      throw UsageError("worst.samples[] must be {\"index\", \"values\"}");
    WorstSample ws;
    ws.index = require_unsigned(s["index"], 0, UINT64_MAX, "worst.samples[].index");
    if (!seen.insert(ws.index).second) throw UsageError(fmt::format("worst.samples: sample {} twice", ws.index));
    for (const auto& [name, x] : s["values"].items()) ws.values[canonical_metric_name(name)] = number_from_json(x);
    if (!ws.values.count(w.by)) throw UsageError(fmt::format("worst.samples: sample {} has no value of {}", ws.index, w.by));
    if (!w.samples.empty()) {
      const WorstSample& p = w.samples.back();
      if (!worse_sample(w.by, p.values.at(w.by), p.index, ws.values.at(w.by), ws.index))
        throw UsageError(fmt::format("worst.samples: sample {} comes after sample {} but is worse (the list is worst first)",
                                     ws.index, p.index));
    }
    w.samples.push_back(std::move(ws));
  }
  return w;
}

std::string shell_command(const std::vector<std::string>& argv) {
  std::string s;
  for (const std::string& a : argv) {
    const bool plain = !a.empty() && a.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                                          "-_./=:,+@%") == std::string::npos;
    std::string q = "'";
    for (char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    q += "'";
    if (!is_plain_text(a)) {  // a newline or bytes not UTF-8: $'...' keeps the command one line of text
      std::string e;
      for (char c : a) e += c == '\\' ? "\\\\" : c == '\'' ? "\\'" : std::string(1, c);
      q = "$'" + printable(e) + "'";  // printable writes such bytes \xNN, which $'...' reads back
    }
    s += (s.empty() ? "" : " ") + (plain ? a : q);
  }
  return s;
}

std::vector<std::string> inspect_argv(const json& axes, uint64_t seed, uint64_t index, const std::string& candidate) {
  std::vector<std::string> v{"chunkinv", "inspect"};
  const std::string family = axes.contains("family") ? axis_value_text(axes["family"]) : "";
  const bool file = family == "file";
  if (file && axes.contains("inputs")) {
    v.insert(v.end(), {"--inputs", axis_value_text(axes["inputs"])});
  } else if (!file) {
    v.insert(v.end(), {"--family", family});
  }
  if (!candidate.empty()) v.insert(v.end(), {"--candidate", candidate});
  // Every other axis as run gave it (full precision: the same configuration).
  for (const auto& [k, x] : axes.items()) {
    // A tensor set's dim is its own; `inputs` is given above.
    if (k == "family" || k == "path" || (file && (k == "inputs" || k == "dim")) || x.is_null()) continue;
    v.insert(v.end(), {"-a", k + "=" + axis_value_text(x)});
  }
  const std::string path = axes.contains("path") ? axis_value_text(axes["path"]) : "";
  if (candidate.empty() && !path.empty()) v.insert(v.end(), {"--paths", path});
  if (!file) v.insert(v.end(), {"--seed", fmt::format("{}", seed)});
  v.insert(v.end(), {"--sample", fmt::format("{}", index), "--brief"});
  return v;
}

namespace {

// The figures a line shows: the ranking metric, then the errors a reader
// looks at next, where the entry has them.
std::string figures_text(const WorstSample& s, const std::string& by) {
  std::string out;
  std::vector<std::string> names{by};
  for (const char* m : {"inv_total_rel_rmse", "l_rel_rmse", "inv_method_only_rel_rmse", "inv_gold_l_rel_rmse", "inv_finite"})
    if (m != by) names.push_back(m);
  for (const auto& n : names) {
    const auto it = s.values.find(n);
    if (it == s.values.end()) continue;
    const MetricInfo* info = find_metric(n);
    const bool integral = info && (info->kind == MetricKind::kFlag || info->kind == MetricKind::kCount);
    out += fmt::format("{}{} {}", out.empty() ? "" : ", ", n,
                       integral && std::isfinite(it->second) ? fmt::format("{}", it->second) : format_sig3(it->second));
  }
  return out;
}

}  // namespace

std::string worst_text(const std::vector<NamedReport>& reports, size_t n, const std::string& by) {
  std::string out;
  for (const NamedReport& r : reports) {
    std::string candidate;
    if (const json& c = r.report.meta.value("candidate", json()); c.is_object() && c.contains("file") && c["file"].is_string())
      candidate = c["file"].get<std::string>();
    for (const ReportEntry& e : r.report.results) {
      WorstSamples w;
      if (!e.per_sample.empty() && (!e.worst || e.worst->by != by || (n && n > e.worst->n))) {
        w = worst_from_per_sample(e.per_sample, by, n ? n : 5);
      } else if (e.worst && e.worst->by == by) {
        w = *e.worst;
        if (n && w.samples.size() > n) w.samples.resize(n);
      } else {
        continue;
      }
      if (w.samples.empty()) continue;
      const std::string path = axis_value_text(e.axes.value("path", json("")));
      out += fmt::format("{}, path {} ({} samples): the {} worst by {}\n", printable(axes_label(e.axes)), path, e.samples,
                         w.samples.size(), by);
      for (const WorstSample& s : w.samples) {
        out += fmt::format("  sample {}: {}\n", s.index, figures_text(s, by));
        out += "    " + shell_command(inspect_argv(e.axes, e.seed, s.index, path == "candidate" ? candidate : "")) + "\n";
      }
    }
  }
  return out;
}

}  // namespace chunkinv
