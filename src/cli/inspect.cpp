// chunkinv inspect: one sample in full — its inputs, the gold, and for each
// path its decays, L, the powers the Neumann product form built, its
// inverse and its metrics. As aligned text or as JSON (docs/inputs.md).
#include <cmath>
#include <cstdio>
#include <iostream>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "core/thread_pool.hpp"
#include "driver/experiment.hpp"
#include "inputs/family.hpp"
#include "inputs/tensor_set.hpp"
#include "metrics/metrics.hpp"
#include "paths/gold/gold.hpp"
#include "paths/path.hpp"
#include "report/report.hpp"

namespace chunkinv::cli {
namespace {

using nlohmann::json;

struct InspectArgs {
  std::string inputs;
  std::string family;
  std::vector<std::string> axes;
  uint64_t seed = 0;
  uint64_t index = 0;
  std::string paths;
  std::string format = "text";
  std::string export_path;
  uint64_t count = 1;
};

// Everything shown for one approximate path.
struct Shown {
  std::string name;
  PathOutput out;
  std::vector<double> metrics;
};

struct KeySummary {
  std::vector<double> norms;
  double cos_min = NAN, cos_max = NAN;
  int min_i = -1, min_j = -1, max_i = -1, max_j = -1;
};

KeySummary summarise_keys(const Sample& s) {
  KeySummary k;
  for (int i = 0; i < s.chunk; ++i) {
    double n2 = 0;
    for (int c = 0; c < s.dim; ++c) n2 += s.key(i, c) * s.key(i, c);
    k.norms.push_back(std::sqrt(n2));
  }
  for (int i = 0; i < s.chunk; ++i) {
    for (int j = 0; j < i; ++j) {
      if (k.norms[i] == 0 || k.norms[j] == 0) continue;  // no direction
      double dot = 0;
      for (int c = 0; c < s.dim; ++c) dot += s.key(i, c) * s.key(j, c);
      const double cs = dot / (k.norms[i] * k.norms[j]);
      if (!(cs >= k.cos_min)) k.cos_min = cs, k.min_i = i, k.min_j = j;
      if (!(cs <= k.cos_max)) k.cos_max = cs, k.max_i = i, k.max_j = j;
    }
  }
  return k;
}

// --- JSON -------------------------------------------------------------------

json vec_json(const std::vector<double>& v) {
  json a = json::array();
  for (double x : v) a.push_back(json_number(x));
  return a;
}

json mat_json(const Mat& m) {
  json a = json::array();
  for (Eigen::Index i = 0; i < m.rows(); ++i) {
    json row = json::array();
    for (Eigen::Index j = 0; j < m.cols(); ++j) row.push_back(json_number(m(i, j)));
    a.push_back(std::move(row));
  }
  return a;
}

json metrics_json(const std::vector<MetricInfo>& infos, const std::vector<double>& v) {
  json o = json::object();
  for (size_t i = 0; i < infos.size(); ++i) o[infos[i].name] = json_number(v[i]);
  return o;
}

json run_json(const NeumannRun& r) {
  json powers = json::array();
  for (size_t k = 0; k < r.powers.size(); ++k) powers.push_back({{"power", 1 << k}, {"matrix", mat_json(r.powers[k])}});
  return {{"INV", mat_json(r.inv)},
          {"highest_power", r.highest_power},
          {"power_max", json_number(r.power_max)},
          {"powers", powers}};
}

// --- text -------------------------------------------------------------------

std::string num(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  if (x == 0) return "0";
  return fmt::format("{:.3e}", x);
}

std::string vec_text(const std::vector<double>& v) {
  std::string s;
  for (double x : v) s += fmt::format(" {:>10}", num(x));
  return s;
}

std::string mat_text(const Mat& m, const std::string& indent) {
  std::string s = indent + "    ";
  for (Eigen::Index j = 0; j < m.cols(); ++j) s += fmt::format(" {:>10}", j);
  s += "\n";
  for (Eigen::Index i = 0; i < m.rows(); ++i) {
    s += fmt::format("{}{:>3}:", indent, i);
    for (Eigen::Index j = 0; j < m.cols(); ++j) s += fmt::format(" {:>10}", num(m(i, j)));
    s += "\n";
  }
  return s;
}

std::string metrics_text(const std::vector<MetricInfo>& infos, const std::vector<double>& v, const std::string& indent) {
  std::string s;
  for (size_t i = 0; i < infos.size(); ++i) {
    const bool integral = std::isfinite(v[i]) && v[i] == std::floor(v[i]) && std::fabs(v[i]) < 1e15;
    s += fmt::format("{}{:<26} {}\n", indent, infos[i].name, integral ? fmt::format("{}", static_cast<long long>(v[i])) : num(v[i]));
  }
  return s;
}

// ---------------------------------------------------------------------------

void inspect(const InspectArgs& a) {
  if (a.format != "text" && a.format != "json")
    throw UsageError(fmt::format("--format {} is not text or json", a.format));
  if (!a.inputs.empty() && !a.family.empty() && a.family != "file")
    throw UsageError("give either --inputs PATH or --family NAME, not both");
  // The configuration, through the same axis machinery as `run`.
  ExperimentSpec spec;
  spec.grids.push_back(a.inputs.empty() ? json{{"family", a.family.empty() ? "model_like" : a.family}}
                                        : json{{"family", "file"}, {"inputs", a.inputs}});
  for (const auto& ax : a.axes) apply_axis(spec, ax);
  const auto configs = expand(spec);
  if (configs.size() != 1)
    throw UsageError(fmt::format("inspect shows one sample: the axes give {} configurations; give one value per axis",
                                 configs.size()));
  const Configuration& cfg = configs[0];
  const Family& fam = find_family(cfg.family);
  if (const auto n = fam.available_samples(cfg); n && a.index >= *n)
    throw UsageError(fmt::format("--index {}: family {} holds {} samples (0..{})", a.index, cfg.family, *n, *n - 1));

  if (!a.export_path.empty()) {  // samples [index, index + count) as a tensor set, nothing shown
    if (a.count == 0) throw UsageError("--count must be at least 1");
    if (const auto n = fam.available_samples(cfg); n && a.index + a.count > *n)
      throw UsageError(fmt::format("--count {} from --index {}: family {} holds {} samples", a.count, a.index, cfg.family, *n));
    std::vector<Sample> samples;
    for (uint64_t i = 0; i < a.count; ++i) samples.push_back(fam.make(cfg, a.seed, a.index + i));
    write_tensor_set(a.export_path, samples);
    std::fprintf(stderr, "wrote samples %llu..%llu (C = %d, d = %d) to %s\n", static_cast<unsigned long long>(a.index),
                 static_cast<unsigned long long>(a.index + a.count - 1), cfg.chunk, cfg.dim, a.export_path.c_str());
    return;
  }
  const Sample sample = fam.make(cfg, a.seed, a.index);
  const GoldOutput gold = compute_gold(sample);
  const std::vector<double> gold_metrics_v = evaluate_gold(gold);

  std::vector<std::string> names = a.paths.empty() ? path_names_usable() : parse_paths(a.paths);
  std::vector<Shown> shown;
  ThreadPool pool(1);
  for (const auto& n : names) {
    if (n == "gold") continue;  // always shown
    auto path = make_path(n);
    std::vector<PathOutput> out(1);
    path->run_batch(std::span<const Sample>(&sample, 1), std::span<const GoldOutput>(&gold, 1), out, pool, true);
    Shown s{path->name(), std::move(out[0]), {}};
    s.metrics = evaluate_path(gold, s.out);
    shown.push_back(std::move(s));
  }

  const KeySummary ks = summarise_keys(sample);
  std::vector<double> big_g(sample.chunk);
  for (int t = 0; t < sample.chunk; ++t) big_g[t] = (t ? big_g[t - 1] : 0.0) + sample.g[t];

  if (a.format == "json") {
    json j;
    j["sample"] = {{"axes", cfg.axes()}, {"seed", a.seed}, {"index", a.index}};
    j["keys"] = {{"values", mat_json(Eigen::Map<const Mat>(sample.keys.data(), sample.chunk, sample.dim))},
                 {"norms", vec_json(ks.norms)},
                 {"cosine_min", {{"value", json_number(ks.cos_min)}, {"rows", {ks.min_i, ks.min_j}}}},
                 {"cosine_max", {{"value", json_number(ks.cos_max)}, {"rows", {ks.max_i, ks.max_j}}}}};
    j["g"] = vec_json(sample.g);
    j["G"] = vec_json(big_g);
    j["beta"] = vec_json(sample.beta);
    j["gold"] = {{"L", mat_json(gold.L)}, {"INV", mat_json(gold.inv)}, {"metrics", metrics_json(gold_metrics(), gold_metrics_v)}};
    j["paths"] = json::object();
    for (const Shown& s : shown) {
      json p = run_json(s.out.run);
      p["decay"] = vec_json(s.out.decay);
      p["inv_decay"] = vec_json(s.out.inv_decay);
      p["L"] = mat_json(s.out.L);
      p["stable"] = run_json(s.out.stable);
      p["metrics"] = metrics_json(path_metrics(), s.metrics);
      j["paths"][s.name] = std::move(p);
    }
    std::cout << j.dump() << "\n";  // compact: matrices would take a line per entry
    return;
  }

  std::string o;
  o += fmt::format("sample {} (seed {}) of {}\n", a.index, a.seed, cfg.axes().dump());
  o += fmt::format("\nkeys: {} x {} (BF16)\n", sample.chunk, sample.dim);
  o += fmt::format("  norms:{}\n", vec_text(ks.norms));
  if (ks.min_i >= 0)
    o += fmt::format("  pairwise cosine: min {} (rows {}, {}), max {} (rows {}, {})\n", num(ks.cos_min), ks.min_i,
                     ks.min_j, num(ks.cos_max), ks.max_i, ks.max_j);
  o += fmt::format("g:    {}\nG:    {}\nbeta: {}\n", vec_text(sample.g), vec_text(big_g), vec_text(sample.beta));
  o += "\ngold (FP64)\n  L:\n" + mat_text(gold.L, "  ") + "  INV = (I + L)^-1:\n" + mat_text(gold.inv, "  ");
  o += metrics_text(gold_metrics(), gold_metrics_v, "  ");
  for (const Shown& s : shown) {
    o += fmt::format("\npath {}\n", s.name);
    o += fmt::format("  decay:    {}\n  inv_decay:{}\n", vec_text(s.out.decay), vec_text(s.out.inv_decay));
    o += "  L:\n" + mat_text(s.out.L, "  ");
    for (size_t k = 1; k < s.out.run.powers.size(); ++k)
      o += fmt::format("  L^{}:\n", 1 << k) + mat_text(s.out.run.powers[k], "  ");
    o += fmt::format("  INV (highest power L^{}, power max {}):\n", s.out.run.highest_power, num(s.out.run.power_max));
    o += mat_text(s.out.run.inv, "  ");
    o += "  metrics:\n" + metrics_text(path_metrics(), s.metrics, "    ");
  }
  std::cout << o;
}

}  // namespace

void set_inspect_command(CLI::App& app) {
  auto args = std::make_shared<InspectArgs>();
  auto* cmd = app.add_subcommand("inspect", "Show one sample in full: inputs, gold, and each path's decays, L, powers, INV, metrics");
  cmd->add_option("--inputs", args->inputs, "tensor set (directory of .npy, .npz or .safetensors): show its sample --index");
  cmd->add_option("--family", args->family, "a family (default model_like) whose sample --sample of --seed is shown");
  cmd->add_option("-a,--axis", args->axes, "axis: name=value (one value each)");
  cmd->add_option("--seed", args->seed, "seed (default 0)");
  cmd->add_option("--index,--sample", args->index, "which sample (default 0)");
  cmd->add_option("--paths", args->paths, "comma-separated paths (default: every usable one); the gold is always shown");
  cmd->add_option("--format", args->format, "text (default) or json");
  cmd->add_option("--export", args->export_path,
                  "write the sample (and the next --count - 1) as a tensor set here instead of showing it: a directory "
                  "of .npy unless the path ends in .npz or .safetensors");
  cmd->add_option("--count", args->count, "samples to --export (default 1)");
  cmd->callback([args] { inspect(*args); });
}

}  // namespace chunkinv::cli
