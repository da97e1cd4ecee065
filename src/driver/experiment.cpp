#include "driver/experiment.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <unistd.h>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/thread_pool.hpp"
#include "metrics/metrics.hpp"
#include "paths/gold/gold.hpp"

namespace chunkinv {

using nlohmann::json;

namespace {

const std::vector<std::string> kConfigKeys{"name", "description", "seed", "samples", "paths", "experiments"};

// Every axis name some family takes, plus the common ones.
std::vector<std::string> known_axes() {
  std::vector<std::string> a{"family", "chunk", "dim"};
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
    if (j.contains("paths")) spec.paths = j["paths"].get<std::vector<std::string>>();
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

std::vector<Configuration> expand(const ExperimentSpec& spec) {
  std::vector<Configuration> out;
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
        if (seen.insert(c.axes().dump()).second) out.push_back(c);
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

std::vector<std::string> parse_paths(const std::string& list) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t end = list.find(',', pos);
    if (end == std::string::npos) end = list.size();
    const std::string p = list.substr(pos, end - pos);
    pos = end + 1;
    if (p.empty()) continue;
    if (p == "all") {
      for (const auto& u : path_names_usable())
        if (std::find(out.begin(), out.end(), u) == out.end()) out.push_back(u);
      continue;
    }
    if (p != "gold" && p != "emulated" && p != "kernel" && p != "cublas") make_path(p);  // throws with a suggestion
    if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  }
  if (out.empty()) throw UsageError("no path given (paths: gold, emulated, kernel, cublas, all)");
  return out;
}

std::vector<ReportEntry> run_experiment(const std::vector<Configuration>& configs,
                                        const std::vector<std::string>& paths, uint64_t samples, uint64_t seed,
                                        const RunOptions& opt) {
  ThreadPool pool(opt.threads);
  // Approximate paths, created once (GPU paths keep their buffers).
  std::vector<std::unique_ptr<Path>> approx;
  for (const auto& p : paths)
    if (p != "gold") approx.push_back(make_path(p));
  const bool with_gold = std::find(paths.begin(), paths.end(), "gold") != paths.end();
  const bool progress = opt.progress && ::isatty(STDERR_FILENO);
  const auto t0 = std::chrono::steady_clock::now();
  auto last = t0;

  std::vector<ReportEntry> entries;
  for (size_t ci = 0; ci < configs.size(); ++ci) {
    const Configuration& cfg = configs[ci];
    const Family& fam = find_family(cfg.family);
    uint64_t n = samples;
    if (const auto avail = fam.available_samples(cfg); avail && opt.first_sample + n > *avail)
      throw UsageError(fmt::format("family {} holds {} samples; asked for {} from sample {}", cfg.family, *avail, n,
                                   opt.first_sample));
    // values[path][metric][sample]
    const size_t np = approx.size();
    std::vector<std::vector<std::vector<double>>> values(np);
    for (auto& v : values) v.assign(path_metrics().size(), std::vector<double>(n));
    std::vector<std::vector<double>> gold_values(gold_metrics().size(), std::vector<double>(with_gold ? n : 0));

    for (uint64_t b0 = 0; b0 < n; b0 += opt.batch) {
      const uint64_t bn = std::min<uint64_t>(opt.batch, n - b0);
      std::vector<Sample> batch(bn);
      std::vector<GoldOutput> gold(bn);
      pool.parallel_for(bn, [&](size_t i) {
        batch[i] = fam.make(cfg, seed, opt.first_sample + b0 + i);
        gold[i] = compute_gold(batch[i]);
        if (with_gold) {
          const auto g = evaluate_gold(gold[i]);
          for (size_t m = 0; m < g.size(); ++m) gold_values[m][b0 + i] = g[m];
        }
      });
      for (size_t p = 0; p < np; ++p) {
        std::vector<PathOutput> out(bn);
        approx[p]->run_batch(batch, gold, out, pool, false);
        pool.parallel_for(bn, [&](size_t i) {
          const auto v = evaluate_path(gold[i], out[i]);
          for (size_t m = 0; m < v.size(); ++m) values[p][m][b0 + i] = v[m];
        });
      }
      const auto now = std::chrono::steady_clock::now();
      if (progress && now - last > std::chrono::milliseconds(200)) {
        last = now;
        std::fprintf(stderr, "\r\033[K[%zu/%zu] %s C=%d: %llu/%llu samples, %.1f s", ci + 1, configs.size(),
                     cfg.family.c_str(), cfg.chunk, static_cast<unsigned long long>(b0 + bn),
                     static_cast<unsigned long long>(n),
                     std::chrono::duration<double>(now - t0).count());
      }
    }
    auto make_entry = [&](const std::string& path, const std::vector<MetricInfo>& infos,
                          std::vector<std::vector<double>>& vals) {
      ReportEntry e;
      e.axes = cfg.axes();
      e.axes["path"] = path;
      e.samples = n;
      e.seed = seed;
      for (size_t m = 0; m < infos.size(); ++m) {
        if (opt.per_sample) e.per_sample[infos[m].name] = vals[m];
        e.metrics[infos[m].name] = aggregate(vals[m], infos[m].kind == MetricKind::kFlag);
      }
      entries.push_back(std::move(e));
    };
    if (with_gold) make_entry("gold", gold_metrics(), gold_values);
    for (size_t p = 0; p < np; ++p) make_entry(approx[p]->name(), path_metrics(), values[p]);
  }
  if (progress) std::fprintf(stderr, "\r\033[K");
  return entries;
}

}  // namespace chunkinv
