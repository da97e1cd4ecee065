// chunkinv run: experiments from config files and/or axes on the command line.
#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <optional>
#include <unistd.h>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/meta.hpp"
#include "core/error.hpp"
#include "driver/runner.hpp"
#include "driver/spec.hpp"
#include "report/report.hpp"
#include "report/table.hpp"

namespace chunkinv::cli {
namespace {

struct RunArgs {
  std::vector<std::string> configs;
  std::vector<std::string> axes;
  std::optional<uint64_t> samples, seed;
  std::string paths;
  std::string inputs;
  std::string output;
  std::string table_format = "md";
  int threads = 0;
  uint64_t batch = 4096;
  bool per_sample = false, quiet = false, list_families = false, list_methods = false, list_paths = false;
};

void list_families() {
  for (const auto& name : family_names()) {
    const Family& f = find_family(name);
    fmt::print("{}: {}\n", name, f.description());
    for (const auto& p : f.params())
      fmt::print("    {} (default {}): {}\n", p.name, p.default_value.dump(), p.help);
  }
  fmt::print("common axes: chunk (2..64, default 16), dim (default 128), method (default {}; --list-methods)\n",
             default_method().name);
}

void list_methods() {
  for (const MethodSpec* m : methods()) {
    fmt::print("{}: {}\n", m->name, m->arithmetic);
    for (const MetricInfo& d : m->diagnostics) fmt::print("    diagnostic {}: {}\n", d.name, d.help);
  }
}

void list_paths() {
  for (const PathSpec* p : paths()) {
    const std::string why = p->unavailable();
    fmt::print("{}{}: {}\n", p->name, why.empty() ? "" : fmt::format(" (not here: {})", why), p->arithmetic());
  }
}

void run(const RunArgs& a) {
  if (a.list_families) return list_families();
  if (a.list_methods) return list_methods();
  if (a.list_paths) return list_paths();
  ExperimentSpec spec;
  spec.name = "cli";
  for (const auto& file : a.configs) {
    ExperimentSpec s = load_config(file);
    if (spec.grids.empty()) {
      spec = s;
    } else {  // several configs: their grids are run one after the other
      spec.grids.insert(spec.grids.end(), s.grids.begin(), s.grids.end());
      spec.name += "+" + s.name;
    }
  }
  if (!a.inputs.empty()) {
    spec.grids.push_back({{"family", "file"}, {"inputs", a.inputs}});
  }
  for (const auto& ax : a.axes) apply_axis(spec, ax);
  if (a.seed) spec.seed = *a.seed;
  const std::vector<PathChoice> paths = parse_paths(a.paths.empty() ? spec.paths : a.paths);
  const auto points = expand(spec);
  uint64_t samples = spec.samples;
  if (a.samples) samples = *a.samples;
  else if (!a.inputs.empty() && !points.empty())
    if (auto n = find_family(points[0].config.family).available_samples(points[0].config)) samples = *n;
  if (samples == 0) throw UsageError("--samples must be at least 1");
  if (a.batch == 0) throw UsageError("--batch must be at least 1");

  // Claim the output before computing, so a bad path fails now.
  std::optional<AtomicFile> out;
  if (!a.output.empty()) out.emplace(a.output);

  RunnerOptions opt;
  opt.threads = a.threads;
  opt.progress = !a.quiet;
  opt.batch = a.batch;
  const std::string started = utc_now();
  Report report;
  RunResult result = run_experiment(points, paths, samples, spec.seed, opt, a.per_sample);
  for (const auto& why : result.skipped) std::fprintf(stderr, "skipped: %s\n", why.c_str());
  report.results = std::move(result.entries);
  report.meta = make_meta(paths, opt.threads, started);
  if (!result.skipped.empty()) report.meta["skipped"] = result.skipped;
  report.meta["seed"] = spec.seed;
  report.meta["samples"] = samples;
  report.meta["experiment"] = spec.name;
  if (out) out->commit(report_to_json(report).dump(1) + "\n");

  const Table t = build_table({{a.output.empty() ? spec.name : a.output, report}}, "summary");
  std::cout << format_table(t, parse_table_format(a.table_format));
  if (out) std::fprintf(stderr, "report written to %s\n", out->path().c_str());
}

}  // namespace

void set_run_command(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  auto* cmd = app.add_subcommand("run", "Run experiments: configs and/or axes -> JSON report and a summary table");
  cmd->add_option("config", args->configs, "experiment config files (JSON, see docs/configs.md)")->check(CLI::ExistingFile);
  cmd->add_option("-a,--axis", args->axes, "axis override: name=value, name=[v1,v2], name=[start:stop:step]");
  cmd->add_option("--samples", args->samples, "samples per configuration (default: the config's, else 1000)");
  cmd->add_option("--seed", args->seed, "seed (default: the config's, else 0)");
  cmd->add_option("--paths", args->paths, "comma-separated: gold, emulated, kernel, cublas, all; options as kernel:version=1");
  cmd->add_option("--inputs", args->inputs, "tensor set: a directory of keys/g/beta .npy, or an .npz or .safetensors file");
  cmd->add_option("-o,--output", args->output, "write the JSON report here (atomically)");
  cmd->add_option("--format", args->table_format, "summary table format: md, latex, csv");
  cmd->add_option("--threads", args->threads, "worker threads (default: all cores)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--batch", args->batch, "samples per batch (memory bound; results do not depend on it)");
  cmd->add_flag("--per-sample", args->per_sample, "keep every sample's metric values in the report");
  cmd->add_flag("-q,--quiet", args->quiet, "no progress line");
  cmd->add_flag("--list-families", args->list_families, "list the input families and their axes");
  cmd->add_flag("--list-methods", args->list_methods, "list the inverse methods (the method axis)");
  cmd->add_flag("--list-paths", args->list_paths, "list the arithmetic paths and whether this machine runs them");
  cmd->callback([args] { run(*args); });
}

}  // namespace chunkinv::cli
