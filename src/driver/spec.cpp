#include "driver/spec.hpp"

#include <algorithm>
#include <charconv>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/json_read.hpp"
#include "core/limits.hpp"
#include "metrics/metrics.hpp"
#include "report/report.hpp"  // kMaxSamples

namespace chunkinv {

using nlohmann::json;

namespace {

const std::vector<std::string> kConfigKeys{"name", "description", "seed", "samples", "paths", "metrics", "experiments"};
// Axes every family takes.
const std::vector<std::string> kCommonAxes{"family", "chunk", "dim", "method"};

// Configurations of one run (every grid, family and method, before
// duplicates are removed), counted before anything is expanded.
constexpr uint64_t kDefaultMaxConfigurations = 100'000;
constexpr const char* kConfigurationsVariable = "CHUNKINV_MAX_CONFIGURATIONS";
// The integer axes, as Family::validate checks them (checked here as well,
// so that a value is never narrowed into an int before it is checked).
constexpr int64_t kChunkMin = 2, kChunkMax = 64, kDimMin = 1, kDimMax = 4096;

uint64_t max_configurations() {
  const char* env = std::getenv(kConfigurationsVariable);
  return env && *env ? parse_count(kConfigurationsVariable, env, 1, UINT64_MAX) : kDefaultMaxConfigurations;
}

std::string raise_hint() { return fmt::format("raise the limit with {}=N", kConfigurationsVariable); }

uint64_t saturating_mul(uint64_t a, uint64_t b) { return b != 0 && a > UINT64_MAX / b ? UINT64_MAX : a * b; }
uint64_t saturating_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }
std::string count_text(uint64_t n) { return n == UINT64_MAX ? "more than 10^19" : std::to_string(n); }

bool is_common_axis(const std::string& name) {
  return std::find(kCommonAxes.begin(), kCommonAxes.end(), name) != kCommonAxes.end();
}

bool family_takes(const Family& f, const std::string& axis) {
  if (is_common_axis(axis)) return true;
  for (const auto& p : f.params())
    if (p.name == axis) return true;
  return false;
}

// Every axis name some family takes, plus the common ones.
std::vector<std::string> known_axes() {
  std::vector<std::string> a = kCommonAxes;
  for (const auto& f : family_names())
    for (const auto& p : find_family(f).params())
      if (std::find(a.begin(), a.end(), p.name) == a.end()) a.push_back(p.name);
  return a;
}

void check_axis_name(const std::string& name, const std::string& where) {
  const auto axes = known_axes();
  if (std::find(axes.begin(), axes.end(), name) != axes.end()) return;
  const std::string near = nearest_of(name, axes);
  throw UsageError(near.empty() ? fmt::format("{}unknown axis \"{}\"", where, name)
                                : fmt::format("{}unknown axis \"{}\" (did you mean \"{}\"?)", where, name, near));
}

json as_list(const json& v) { return v.is_array() ? v : json::array({v}); }

// An axis holds a value or a non-empty list of values; a value is a
// number, a string or null (real_gates' decay_floor: no clamp).
void check_axis_value(const std::string& name, const json& v, const std::string& where) {
  const auto scalar = [](const json& x) { return x.is_number() || x.is_string() || x.is_null(); };
  if (v.is_array()) {
    if (v.empty()) throw UsageError(fmt::format("{}axis {} = [] has no values", where, name));
    for (const auto& x : v)
      if (!scalar(x))
        throw UsageError(fmt::format("{}axis {}: {} is not a value (a number, a string or null; lists do not nest)",
                                     where, name, json_excerpt(x)));
    // A value twice would run its configurations twice, and the report
    // would hold each twice (refused by table and check): -5 and -5.0 are one.
    std::map<double, size_t> numbers;
    std::map<std::string, size_t> words;
    std::optional<size_t> null_at;
    for (size_t i = 0; i < v.size(); ++i) {
      const json& x = v[i];
      std::optional<size_t> before;
      if (x.is_number()) {
        if (const auto [it, fresh] = numbers.emplace(x.get<double>(), i); !fresh) before = it->second;
      } else if (x.is_string()) {
        if (const auto [it, fresh] = words.emplace(x.get<std::string>(), i); !fresh) before = it->second;
      } else if (null_at) {
        before = null_at;
      } else {
        null_at = i;
      }
      if (before)
        throw UsageError(fmt::format("{}axis {}: {} appears twice in the list (items {} and {}); give each value once",
                                     where, name, json_excerpt(x), *before, i));
    }
  } else if (!scalar(v)) {
    throw UsageError(fmt::format("{}axis {} = {} is not a value: give a number, a string, null or a list of them",
                                 where, name, json_excerpt(v)));
  }
}

// The families a grid names (default floor), each looked up.
std::vector<const Family*> grid_families(const json& grid, const std::string& where) {
  std::vector<const Family*> out;
  for (const auto& f : as_list(grid.value("family", json("floor")))) {
    if (!f.is_string()) throw UsageError(fmt::format("{}axis family = {} must be a name", where, json_excerpt(f)));
    try {
      out.push_back(&find_family(f.get<std::string>()));
    } catch (const UsageError& e) {
      throw UsageError(where + e.what());
    }
  }
  if (out.empty()) throw UsageError(fmt::format("{}axis family = [] has no values", where));
  return out;
}

// "floor takes decay_floor; weak_decay_correlated takes log_decay, beta"
std::string family_axes_text(const std::vector<const Family*>& fams) {
  std::string s;
  for (const Family* f : fams) {
    std::string axes;
    for (const auto& p : f->params()) axes += (axes.empty() ? "" : ", ") + p.name;
    s += fmt::format("{}{} takes {}", s.empty() ? "" : "; ", f->name(), axes.empty() ? "no axis of its own" : axes);
  }
  return s;
}

std::string owners_of(const std::string& axis) {
  std::string s;
  for (const auto& n : family_names())
    if (family_takes(find_family(n), axis)) s += (s.empty() ? "" : ", ") + n;
  return s;
}

// A grid of a config: an object of known axes, each a value or a list of
// values, every axis taken by some family of the grid.
void check_grid(const json& g, const std::string& where) {
  if (!g.is_object()) throw UsageError(where + "must be an object mapping axis names to values");
  for (const auto& [k, v] : g.items()) {
    check_axis_name(k, where);
    check_axis_value(k, v, where);
  }
  const auto fams = grid_families(g, where);
  for (const auto& item : g.items()) {
    const std::string& k = item.key();  // (clang 14 cannot capture a structured binding)
    if (std::none_of(fams.begin(), fams.end(), [&](const Family* f) { return family_takes(*f, k); }))
      throw UsageError(fmt::format("{}axis {} is taken by no family of this grid ({}); it is an axis of {}", where, k,
                                   family_axes_text(fams), owners_of(k)));
  }
}

std::string trim(std::string s) {
  s.erase(0, s.find_first_not_of(" \t"));
  s.erase(s.find_last_not_of(" \t") + 1);
  return s;
}

// A number of a range, all of it: "8", "-0.5", "1e3"; nothing else.
double range_number(const std::string& name, const std::string& field, const std::string& text) {
  const std::string f = trim(field);
  double v = 0;
  const char* begin = f.data() + (f.size() > 1 && f[0] == '+' && f[1] != '-' ? 1 : 0);
  const char* end = f.data() + f.size();
  const auto [ptr, ec] = std::from_chars(begin, end, v);
  if (f.empty() || ec != std::errc() || ptr != end || !std::isfinite(v))
    throw UsageError(fmt::format("axis {}: range \"{}\": \"{}\" is not a finite number", name, text, f));
  return v;
}

// nvbench-style inclusive range [start:stop] or [start:stop:step].
json parse_range(const std::string& name, const std::string& text, const std::string& inner) {
  std::vector<std::string> fields;
  for (size_t pos = 0;;) {
    const size_t end = inner.find(':', pos);
    fields.push_back(inner.substr(pos, end == std::string::npos ? std::string::npos : end - pos));
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  if (fields.size() < 2 || fields.size() > 3)
    throw UsageError(fmt::format("axis {}: range \"{}\" has {} fields; a range is [start:stop] or [start:stop:step]",
                                 name, text, fields.size()));
  const double start = range_number(name, fields[0], text), stop = range_number(name, fields[1], text);
  const double step = fields.size() == 3 ? range_number(name, fields[2], text) : 1.0;
  const double span = (stop - start) / step;
  if (step == 0 || !(span >= 0))
    throw UsageError(fmt::format("axis {}: range \"{}\" is empty (the step must be non-zero and lead from start to stop)",
                                 name, text));
  // The values, counted before any is made. What is allowed for is the
  // rounding of stop - start and of the division, a few ulps of the
  // operands ([0:0.3:0.1] and [1000:1000.3:0.1] hold 4), not a stop short
  // of the last step ([-2:-1.0000000000001:0.5] holds 2).
  const double slack = 8 * DBL_EPSILON * (std::fabs(start) + std::fabs(stop) + std::fabs(step)) / std::fabs(step);
  const double count = std::floor(span + slack) + 1;
  const uint64_t limit = max_configurations();
  if (!std::isfinite(count) || count > static_cast<double>(limit))
    throw UsageError(fmt::format("axis {}: range \"{}\" holds {} values, more than the {} configurations a run may "
                                 "have; {}", name, text, std::isfinite(count) ? fmt::format("{:.0f}", count) : "too many",
                                 limit, raise_hint()));
  json list = json::array();
  for (uint64_t k = 0; k < static_cast<uint64_t>(count); ++k) {
    const double x = start + static_cast<double>(k) * step;
    if (x == std::floor(x) && std::fabs(x) < 1e15) list.push_back(static_cast<long long>(x)); else list.push_back(x);
  }
  return list;
}

// One value: JSON when it is a JSON number, string or null; else the text
// itself as a string (a bare word: floor, Qwen3-Next, a path).
json parse_scalar(const std::string& name, const std::string& item, const std::string& text) {
  if (item.empty()) throw UsageError(fmt::format("axis {}: empty value in \"{}\"", name, text));
  json v;
  try {
    v = parse_json_strict(item, fmt::format("axis {}", name));
  } catch (const UsageError&) {
    if (item.front() == '"')
      throw UsageError(fmt::format("axis {}: {} is not a complete JSON string", name, item));
    v = item;
  }
  try {
    (void)v.dump();  // a bare word must be text (UTF-8), as every report holds it
  } catch (const json::exception&) {
    throw UsageError(fmt::format("axis {}: the value in \"{}\" is not UTF-8 text", name, json_excerpt(json(text))));
  }
  return v;
}

// A value of -a name=value (docs/configs.md): a value, a list [v1,v2,...]
// (JSON or bare words) or a range [start:stop:step]; anything else is an
// error naming the text.
json parse_value(const std::string& name, const std::string& text) {
  if (text.empty()) throw UsageError(fmt::format("axis {} has no value (name=value)", name));
  if (text.front() != '[') return parse_scalar(name, text, text);
  if (text.back() != ']' || text.size() < 2)
    throw UsageError(fmt::format("axis {}: \"{}\" has no closing ']'", name, text));
  const std::string inner = text.substr(1, text.size() - 2);
  if (trim(inner).empty()) throw UsageError(fmt::format("axis {} = {} has no values", name, text));
  if (inner.find_first_of("[]") != std::string::npos)
    throw UsageError(fmt::format("axis {}: \"{}\": lists do not nest, and brackets must balance", name, text));
  const std::string first = trim(inner);
  if (inner.find(':') != std::string::npos && inner.find(',') == std::string::npos &&
      std::string("+-.0123456789").find(first.front()) != std::string::npos)
    return parse_range(name, text, inner);
  std::optional<json> parsed;  // a JSON list: [8, 16], ["floor", "model_like"]
  try {
    parsed = parse_json_strict(text, fmt::format("axis {}", name));
  } catch (const UsageError&) {
  }
  if (parsed) {
    check_axis_value(name, *parsed, "");
    return *parsed;
  }
  json list = json::array();  // a list of bare words: [floor,model_like]
  for (size_t pos = 0;;) {
    const size_t end = inner.find(',', pos);
    const std::string item = trim(inner.substr(pos, end == std::string::npos ? std::string::npos : end - pos));
    if (item.empty())
      throw UsageError(fmt::format("axis {}: \"{}\" has an empty item (a list is [v1,v2,...], no trailing comma)", name,
                                   text));
    list.push_back(parse_scalar(name, item, text));
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  check_axis_value(name, list, "");
  return list;
}

int as_int(const json& v, const char* axis, int64_t lo, int64_t hi) {
  return static_cast<int>(require_integer(v, lo, hi, fmt::format("axis {}", axis)));
}

// Axes given with -a: each must be taken by some family of some grid
// (a config's axes are checked against their own grid when it is read).
void check_cli_axes(const ExperimentSpec& spec) {
  std::vector<const Family*> all;
  for (const auto& g : spec.grids)
    for (const Family* f : grid_families(g, ""))
      if (std::find(all.begin(), all.end(), f) == all.end()) all.push_back(f);
  for (const auto& axis : spec.cli_axes)
    if (std::none_of(all.begin(), all.end(), [&](const Family* f) { return family_takes(*f, axis); }))
      throw UsageError(fmt::format("axis {} (-a) is taken by no family of this run ({}); it is an axis of {}", axis,
                                   family_axes_text(all), owners_of(axis)));
}

}  // namespace

ExperimentSpec parse_config(std::string_view text, const std::string& file) {
  const std::string where = fmt::format("config {}: ", file);
  const json j = parse_json_strict(text, "config " + file);
  if (!j.is_object()) throw UsageError(where + "must be a JSON object");
  for (const auto& [k, v] : j.items()) {
    if (std::find(kConfigKeys.begin(), kConfigKeys.end(), k) == kConfigKeys.end()) {
      const std::string near = nearest_of(k, kConfigKeys);
      throw UsageError(near.empty() ? fmt::format("{}unknown key \"{}\"", where, k)
                                    : fmt::format("{}unknown key \"{}\" (did you mean \"{}\"?)", where, k, near));
    }
  }
  ExperimentSpec spec;
  const std::string stem = file.substr(file.find_last_of('/') + 1);
  spec.name = stem.substr(0, stem.rfind('.'));
  for (const char* key : {"name", "description"})
    if (j.contains(key) && !j[key].is_string())
      throw UsageError(fmt::format("{}\"{}\" = {} must be a string", where, key, json_excerpt(j[key])));
  if (j.contains("name")) spec.name = j["name"].get<std::string>();
  if (j.contains("seed")) spec.seed = require_unsigned(j["seed"], 0, UINT64_MAX, where + "\"seed\"");
  if (j.contains("samples")) spec.samples = require_unsigned(j["samples"], 1, kMaxSamples, where + "\"samples\"");
  // A key that holds a non-empty list of names, joined by commas as the command line gives them.
  auto name_list = [&](const char* key, const char* what) {
    const json& v = j[key];
    if (!v.is_array() || v.empty() || !std::all_of(v.begin(), v.end(), [](const json& x) { return x.is_string(); }))
      throw UsageError(fmt::format("{}\"{}\" = {} must be a non-empty list of {}", where, key, json_excerpt(v), what));
    std::string list;
    for (const auto& x : v) {
      if (!list.empty()) list += ',';
      list += x.get<std::string>();
    }
    return list;
  };
  if (j.contains("paths")) spec.paths = name_list("paths", "path names (\"gold\", \"emulated\", ...)");
  if (j.contains("metrics")) {
    spec.metrics = parse_metric_list(name_list("metrics", "metric names (\"inv_finite\", ...)"), where + "\"metrics\" =");
  }
  if (!j.contains("experiments") || !j["experiments"].is_array() || j["experiments"].empty())
    throw UsageError(where + "\"experiments\" must be a non-empty list of axis objects");
  size_t i = 0;
  for (const auto& g : j["experiments"]) {
    check_grid(g, fmt::format("{}experiments[{}]: ", where, i++));
    spec.grids.push_back(g);
  }
  return spec;
}

ExperimentSpec load_config(const std::string& file) {
  return parse_config(read_text_file(file, config_source("config " + file)), file);
}

void apply_axis(ExperimentSpec& spec, const std::string& assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw UsageError(fmt::format("axis \"{}\" must be name=value or name=[v1,v2,...]", assignment));
  const std::string name = assignment.substr(0, eq);
  check_axis_name(name, "");
  const std::string text = assignment.substr(eq + 1);
  // `-a chunk=16,32` is one value "16,32"; say how a list is written (a path may hold a comma).
  if (name != "inputs" && !text.empty() && text.front() != '[' && text.find(',') != std::string::npos)
    throw UsageError(fmt::format("axis {}: \"{}\" is not a value; a list is written in brackets: -a '{}=[{}]'", name,
                                 text, name, text));
  const json value = parse_value(name, text);
  check_axis_value(name, value, "");
  if (spec.grids.empty()) spec.grids.push_back(json::object());
  for (auto& g : spec.grids) g[name] = value;
  if (!is_common_axis(name)) spec.cli_axes.insert(name);
}

json parse_axis_value(const std::string& name, const std::string& text) {
  const json value = parse_value(name, text);
  check_axis_value(name, value, "");
  return value;
}

std::vector<Point> expand(const ExperimentSpec& spec) {
  if (spec.grids.empty())
    throw UsageError("nothing to run: give a config file, axes (-a name=value) or --inputs");
  check_cli_axes(spec);
  // Count first, with saturating arithmetic (a grid of a few lists can name
  // more than 2^64 configurations), and refuse before expanding anything.
  uint64_t total = 0;
  for (const auto& grid : spec.grids) {
    for (const auto& [k, v] : grid.items()) check_axis_value(k, v, "");
    const uint64_t methods = as_list(grid.value("method", json(nullptr))).size();
    for (const Family* fam : grid_families(grid, "")) {
      uint64_t n = methods;
      for (const char* a : {"chunk", "dim"})
        if (grid.contains(a)) n = saturating_mul(n, as_list(grid[a]).size());
      for (const auto& p : fam->params())
        if (grid.contains(p.name)) n = saturating_mul(n, as_list(grid[p.name]).size());
      total = saturating_add(total, n);
    }
  }
  if (const uint64_t limit = max_configurations(); total > limit)
    throw UsageError(fmt::format("the experiment names {} configurations (the product of its axes' lengths), more than "
                                 "the {} a run may have; {}", count_text(total), limit, raise_hint()));
  std::vector<Point> out;
  std::set<std::string> seen;
  for (const auto& grid : spec.grids) {
    for (const Family* fam_ptr : grid_families(grid, "")) {
      const Family& fam = *fam_ptr;
      // The axes this family takes, each a list of values.
      std::vector<std::pair<std::string, json>> axes{{"chunk", as_list(grid.value("chunk", json(16)))},
                                                     {"dim", as_list(grid.value("dim", json(128)))}};
      for (const auto& p : fam.params()) axes.emplace_back(p.name, as_list(grid.value(p.name, p.default_value)));
      for (const auto& [n, v] : axes)
        if (v.empty()) throw UsageError(fmt::format("axis {} has no values", n));
      std::vector<Method> methods;
      for (const auto& m : as_list(grid.value("method", json(std::string(default_method().name))))) {
        if (!m.is_string()) throw UsageError(fmt::format("axis method = {} must be a name", json_excerpt(m)));
        methods.push_back(parse_method(m.get<std::string>()));
      }
      if (methods.empty()) throw UsageError("axis method has no values");
      // Cartesian product, first axis slowest.
      std::vector<size_t> idx(axes.size(), 0);
      while (true) {
        Configuration c;
        c.family = fam.name();
        for (size_t a = 0; a < axes.size(); ++a) {
          const json& v = axes[a].second[idx[a]];
          if (axes[a].first == "chunk") c.chunk = as_int(v, "chunk", kChunkMin, kChunkMax);
          else if (axes[a].first == "dim") c.dim = as_int(v, "dim", kDimMin, kDimMax);
          else c.params[axes[a].first] = v;
        }
        fam.complete(c);
        fam.validate(c);
        for (const Method& m : methods) {
          json key = c.axes();
          key["method"] = m.label();
          if (seen.insert(key.dump()).second) out.push_back({c, m});
        }
        size_t a = axes.size();
        while (a > 0) {
          --a;
          if (++idx[a] < axes[a].second.size()) break;
          idx[a] = 0;
          if (a == 0) { a = SIZE_MAX; break; }
        }
        if (a == SIZE_MAX || axes.empty()) break;
      }
    }
  }
  if (out.empty()) throw UsageError("the experiment has no configuration to run");
  return out;
}

}  // namespace chunkinv
