#include "driver/spec.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>

#include <fmt/format.h>

#include "core/error.hpp"

namespace chunkinv {

using nlohmann::json;

namespace {

const std::vector<std::string> kConfigKeys{"name", "description", "seed", "samples", "paths", "experiments"};

// Every axis name some family takes, plus the common ones.
std::vector<std::string> known_axes() {
  std::vector<std::string> a{"family", "chunk", "dim", "method"};
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

// A value of -a name=value: JSON when it parses (numbers, lists), else a string.
json parse_value(const std::string& name, const std::string& text) {
  // nvbench-style range [start:stop:step], inclusive.
  if (text.size() > 2 && text.front() == '[' && text.back() == ']' && text.find(':') != std::string::npos) {
    double v[3] = {0, 0, 1};
    int n = 0;
    size_t pos = 1;
    while (n < 3 && pos < text.size()) {
      size_t end = text.find_first_of(":]", pos);
      try {
        size_t used = 0;
        v[n++] = std::stod(text.substr(pos, end - pos), &used);
      } catch (...) {
        throw UsageError(fmt::format("axis {}: cannot read range \"{}\"", name, text));
      }
      pos = end + 1;
    }
    if (n < 2 || v[2] == 0 || (v[1] - v[0]) / v[2] < 0 || (v[1] - v[0]) / v[2] > 100000)
      throw UsageError(fmt::format("axis {}: range \"{}\" is empty or too long", name, text));
    json list = json::array();
    const long steps = std::lround(std::floor((v[1] - v[0]) / v[2] + 1e-9));
    for (long k = 0; k <= steps; ++k) {
      const double x = v[0] + k * v[2];
      if (x == std::floor(x) && std::fabs(x) < 1e15) list.push_back(static_cast<long long>(x)); else list.push_back(x);
    }
    return list;
  }
  try {
    return json::parse(text);
  } catch (const json::exception&) {
    if (!text.empty() && text.front() == '[') {  // a list of bare words: [floor,model_like]
      json list = json::array();
      std::string inner = text.substr(1, text.size() - 2);
      size_t pos = 0;
      while (pos <= inner.size()) {
        size_t end = inner.find(',', pos);
        if (end == std::string::npos) end = inner.size();
        std::string item = inner.substr(pos, end - pos);
        item.erase(0, item.find_first_not_of(' '));
        item.erase(item.find_last_not_of(' ') + 1);
        try { list.push_back(json::parse(item)); } catch (const json::exception&) { list.push_back(item); }
        pos = end + 1;
      }
      return list;
    }
    return text;
  }
}

int as_int(const json& v, const char* axis) {
  if (!v.is_number() || v.get<double>() != std::floor(v.get<double>()))
    throw UsageError(fmt::format("axis {} = {} must be an integer", axis, v.dump()));
  return v.get<int>();
}

}  // namespace

ExperimentSpec load_config(const std::string& file) {
  std::ifstream in(file);
  if (!in) throw UsageError(fmt::format("config {}: cannot be opened", file));
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    throw UsageError(fmt::format("config {}: not valid JSON ({})", file, e.what()));
  }
  const std::string where = fmt::format("config {}: ", file);
  if (!j.is_object()) throw UsageError(where + "must be a JSON object");
  for (const auto& [k, v] : j.items()) {
    if (std::find(kConfigKeys.begin(), kConfigKeys.end(), k) == kConfigKeys.end()) {
      const std::string near = nearest_of(k, kConfigKeys);
      throw UsageError(near.empty() ? fmt::format("{}unknown key \"{}\"", where, k)
                                    : fmt::format("{}unknown key \"{}\" (did you mean \"{}\"?)", where, k, near));
    }
  }
  ExperimentSpec spec;
  std::string stem = file.substr(file.find_last_of('/') + 1);
  spec.name = j.value("name", stem.substr(0, stem.rfind('.')));
  try {
    if (j.contains("seed")) spec.seed = j["seed"].get<uint64_t>();
    if (j.contains("samples")) spec.samples = j["samples"].get<uint64_t>();
    if (j.contains("paths")) {
      std::string list;
      for (const auto& p : j["paths"].get<std::vector<std::string>>()) list += (list.empty() ? "" : ",") + p;
      spec.paths = list;
    }
  } catch (const json::exception& e) {
    throw UsageError(fmt::format("{}seed and samples must be non-negative integers, paths a list of names ({})", where, e.what()));
  }
  if (!j.contains("experiments") || !j["experiments"].is_array() || j["experiments"].empty())
    throw UsageError(where + "\"experiments\" must be a non-empty list of axis objects");
  size_t i = 0;
  for (const auto& g : j["experiments"]) {
    const std::string w = fmt::format("{}experiments[{}]: ", where, i++);
    if (!g.is_object()) throw UsageError(w + "must be an object mapping axis names to values");
    for (const auto& [k, v] : g.items()) check_axis_name(k, w);
    spec.grids.push_back(g);
  }
  return spec;
}

void apply_axis(ExperimentSpec& spec, const std::string& assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw UsageError(fmt::format("axis \"{}\" must be name=value or name=[v1,v2,...]", assignment));
  const std::string name = assignment.substr(0, eq);
  check_axis_name(name, "");
  const json value = parse_value(name, assignment.substr(eq + 1));
  if (spec.grids.empty()) spec.grids.push_back(json::object());
  for (auto& g : spec.grids) g[name] = value;
}

std::vector<Point> expand(const ExperimentSpec& spec) {
  std::vector<Point> out;
  std::set<std::string> seen;
  for (const auto& grid : spec.grids) {
    const json families = as_list(grid.value("family", json("floor")));
    for (const auto& fam_name : families) {
      if (!fam_name.is_string()) throw UsageError(fmt::format("axis family = {} must be a name", fam_name.dump()));
      const Family& fam = find_family(fam_name.get<std::string>());
      // The axes this family takes, each a list of values.
      std::vector<std::pair<std::string, json>> axes{{"chunk", as_list(grid.value("chunk", json(16)))},
                                                     {"dim", as_list(grid.value("dim", json(128)))}};
      for (const auto& p : fam.params()) axes.emplace_back(p.name, as_list(grid.value(p.name, p.default_value)));
      for (const auto& [n, v] : axes)
        if (v.empty()) throw UsageError(fmt::format("axis {} has no values", n));
      std::vector<Method> methods;
      for (const auto& m : as_list(grid.value("method", json(std::string(default_method().name))))) {
        if (!m.is_string()) throw UsageError(fmt::format("axis method = {} must be a name", m.dump()));
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
          if (axes[a].first == "chunk") c.chunk = as_int(v, "chunk");
          else if (axes[a].first == "dim") c.dim = as_int(v, "dim");
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
  return out;
}

}  // namespace chunkinv
