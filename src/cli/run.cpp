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
#include "driver/experiment.hpp"
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
  bool per_sample = false, quiet = false, list_families = false;
};

void list_families() {
  for (const auto& name : family_names()) {
    const Family& f = find_family(name);
    fmt::print("{}: {}\n", name, f.description());
    for (const auto& p : f.params())
      fmt::print("    {} (default {}): {}\n", p.name, p.default_value.dump(), p.help);
  }
  fmt::print("common axes: chunk (2..64, default 16), dim (default 128)\n");
}

void run(const RunArgs& a) {
  if (a.list_families) return list_families();
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
  if (!a.paths.empty()) spec.paths = parse_paths(a.paths);
  else spec.paths = parse_paths(fmt::format("{}", fmt::join(spec.paths, ",")));
  const auto configs = expand(spec);
  uint64_t samples = spec.samples;
  if (a.samples) samples = *a.samples;
  else if (!a.inputs.empty() && configs.size() == 1)
    if (auto n = find_family(configs[0].family).available_samples(configs[0])) samples = *n;
  if (samples == 0) throw UsageError("--samples must be at least 1");
  if (a.batch == 0) throw UsageError("--batch must be at least 1");

  // Claim the output before computing, so a bad path fails now.
  std::optional<AtomicFile> out;
  if (!a.output.empty()) out.emplace(a.output);

  RunOptions opt;
  opt.threads = a.threads;
  opt.per_sample = a.per_sample;
  opt.progress = !a.quiet;
  opt.batch = a.batch;
  const std::string started = utc_now();
  Report report;
  report.results = run_experiment(configs, spec.paths, samples, spec.seed, opt);
  report.meta = make_meta(spec.paths, opt.threads, started);
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
  cmd->add_option("--paths", args->paths, "comma-separated: gold, emulated, kernel, cublas, all");
  cmd->add_option("--inputs", args->inputs, "tensor set: a directory of keys/g/beta .npy, or an .npz or .safetensors file");
  cmd->add_option("-o,--output", args->output, "write the JSON report here (atomically)");
  cmd->add_option("--format", args->table_format, "summary table format: md, latex, csv");
  cmd->add_option("--threads", args->threads, "worker threads (default: all cores)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--batch", args->batch, "samples per batch (memory bound; results do not depend on it)");
  cmd->add_flag("--per-sample", args->per_sample, "keep every sample's metric values in the report");
  cmd->add_flag("-q,--quiet", args->quiet, "no progress line");
  cmd->add_flag("--list-families", args->list_families, "list the input families and their axes");
  cmd->callback([args] { run(*args); });
}

}  // namespace chunkinv::cli
