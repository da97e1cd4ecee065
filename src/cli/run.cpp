// chunkinv run: experiments from config files and/or axes on the command line.
// Every option is checked before any work; a run with -o FILE is saved as
// it goes beside the report (FILE.ckpt) and `--resume` finishes it after a
// kill (docs/reliability.md). `--shard i/n` runs a fixed part of every
// configuration's samples for `chunkinv merge`; `--until` stops each
// configuration by a rule; `--quantiles` chooses exact or sketch quantiles
// (docs/design.md, "Statistics that stream").
#include <cstdio>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "api/run.hpp"
#include "cli/commands.hpp"
#include "cli/summary.hpp"
#include "core/error.hpp"
#include "core/limits.hpp"
#include "core/progress.hpp"
#include "core/signals.hpp"
#include "core/text.hpp"
#include "driver/checkpoint.hpp"
#include "driver/runner.hpp"
#include "driver/spec.hpp"
#include "report/report.hpp"
#include "report/table.hpp"
#include "report/worst.hpp"

namespace chunkinv::cli {
namespace {

struct RunArgs {
  std::vector<std::string> configs;
  std::vector<std::string> axes;
  std::string samples, seed, batch, threads, max_memory, checkpoint_every;
  std::string paths, metrics;
  std::string inputs;
  std::string output;
  std::string table_format = "md";
  std::string shard, quantiles, until, until_ci;
  std::string pipeline, devices;
  std::string worst, worst_by;  // --worst N --by METRIC
  bool legend = false, no_legend = false;
  bool per_sample = false, quiet = false, dry_run = false, resume = false, exact_quantiles = false;
  bool list_families = false, list_methods = false, list_paths = false, list_metrics = false;
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

void list_metrics() {
  static const char* const kKinds[] = {"count", "flag", "error", "value"};
  for (const std::string& name : all_metric_names()) {
    const MetricInfo* m = find_metric(name);
    fmt::print("{} ({}): {}\n", name, kKinds[int(m->kind)], m->help);
  }
  fmt::print("each method's diagnostics are also measured on the gold L, as gold_l_<name>; "
             "the gold's own entry reports l_finite, inv_finite, inverse_residual and inv_max_abs\n");
}

void list_paths() {
  for (const PathSpec* p : paths()) {
    const std::string why = p->unavailable();
    fmt::print("{}{}: {}\n", p->name, why.empty() ? "" : fmt::format(" (not here: {})", why), p->arithmetic());
  }
}

// The strings of the command line as the request types them, in the order
// `run` has always checked them (the first bad one is the one named).
api::RunRequest to_request(const RunArgs& a) {
  api::RunRequest r;
  r.configs = a.configs;
  r.axes = a.axes;
  r.inputs = a.inputs;
  if (!a.samples.empty()) r.samples = parse_count("--samples", a.samples, 1, kMaxSamples);
  if (!a.seed.empty()) r.seed = parse_count("--seed", a.seed, 0, UINT64_MAX);
  if (!a.batch.empty()) r.batch = parse_count("--batch", a.batch, 1, kMaxSamples);
  if (!a.threads.empty()) r.threads = int(parse_count("--threads", a.threads, 0, 1024));
  if (!a.max_memory.empty()) r.max_memory = parse_size("--max-memory", a.max_memory);
  if (!a.checkpoint_every.empty()) r.checkpoint_every = double(parse_count("--checkpoint-every", a.checkpoint_every, 0, 86400));
  if (!a.paths.empty()) parse_paths(a.paths);  // a typo is named even when nothing else is given
  r.paths = a.paths;
  r.metrics = parse_metric_list(a.metrics, "--metrics");
  r.worst_by = a.worst_by;
  r.worst = parse_worst(a.worst, r.worst_by);
  r.shard = a.shard;
  r.until = a.until;
  r.until_ci = a.until_ci;
  r.quantiles = a.quantiles;
  r.exact_quantiles = a.exact_quantiles;
  r.pipeline = a.pipeline;
  r.devices = a.devices;
  r.per_sample = a.per_sample;
  r.output = a.output;
  r.resume = a.resume;
  r.dry_run = a.dry_run;
  r.argv = invocation().argv;
  return r;
}

void run(const RunArgs& a) {
  if (a.list_families) return list_families();
  if (a.list_methods) return list_methods();
  if (a.list_paths) return list_paths();
  if (a.list_metrics) return list_metrics();

  // Every option first: nothing is computed or written before all are valid.
  const TableFormat format = parse_table_format(a.table_format);
  const bool legend = want_legend(a.legend, a.no_legend, true);
  api::Prepared p = api::prepare(to_request(a));
  if (a.dry_run) {
    fmt::print("{}", api::plan_text(p));
    return;
  }
  if (!a.quiet)
    for (const auto& why : p.plan.skipped) std::fprintf(stderr, "skipped: %s\n", why.c_str());

  ProgressBar bar(run_work(p.plan, p.run_samples), !a.quiet);
  // With a checkpoint, the first Ctrl-C stops after the batch and saves it.
  std::optional<signals::StopPoint> stop_point;
  if (p.checkpointed()) stop_point.emplace();
  Report report;
  try {
    report = api::execute(p, {&bar, [] { return signals::received(); }});
  } catch (const signals::Stopped& s) {
    bar.finish();
    const Checkpoint& ckpt = *p.checkpoint;
    size_t done = ckpt.groups_finished();
    const uint64_t part = done < p.plan.groups.size() ? ckpt.partial_samples(done) : 0;
    std::vector<std::string> again = invocation().argv;
    if (!a.resume) again.push_back("--resume");
    std::fprintf(stderr, "chunkinv: stopped by %s; %zu of %zu configurations%s are saved in %s; finish with: %s\n",
                 signals::name(s.signal).c_str(), done, p.plan.groups.size(),
                 part ? fmt::format(" and {} samples of the next", part).c_str() : "", printable(p.checkpoint_path).c_str(),
                 shell_command(again).c_str());
    throw;
  }
  bar.finish();
  stop_point.reset();  // from here a signal ends the run at once (the checkpoint holds everything)

  if (p.until && !a.quiet)
    if (const size_t unmet = report.meta["until"]["unmet"].size())
      std::fprintf(stderr, "%s: %zu of %zu configurations reached the cap of %llu samples without it (meta.until.unmet)\n",
                   p.until->text.c_str(), unmet, p.plan.groups.size(), static_cast<unsigned long long>(p.samples));
  api::write(p, report);
  if (a.quiet) return;
  const std::vector<NamedReport> shown{{a.output.empty() ? p.spec.name : a.output, report}};
  print_summary(shown, p.out.get(), format, legend, p.request.worst, p.request.worst_by);
}

}  // namespace

void set_run_command(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  auto* cmd = app.add_subcommand("run", "Run experiments: configs and/or axes -> JSON report and a summary table");
  cmd->add_option("config", args->configs, "experiment config files (JSON, see docs/configs.md)")->check(CLI::ExistingFile);
  cmd->add_option("-a,--axis", args->axes, "axis override: name=value, name=[v1,v2], name=[start:stop:step]");
  cmd->add_option("--samples", args->samples, "samples per configuration, 1 to 10^15 (default: the config's, else 1000)");
  cmd->add_option("--seed", args->seed, "seed, 0 to 2^64-1 (default: the config's, else 0)");
  cmd->add_option("--paths", args->paths, "comma-separated: gold, emulated, kernel, cublas, all; options as kernel:version=1");
  cmd->add_option("--metrics", args->metrics,
                  "comma-separated metrics the entries report (default: every one; --list-metrics); the GPU pipeline "
                  "skips the work of those not asked for, and the values of those asked for do not change");
  cmd->add_option("--inputs", args->inputs, "tensor set: a directory of keys/g/beta .npy, or an .npz or .safetensors file");
  cmd->add_option("-o,--output", args->output,
                  "write the JSON report here (a file is replaced atomically; - for stdout); saved as it goes in FILE.ckpt");
  cmd->add_option("--format", args->table_format, "summary table format: md, latex, csv");
  cmd->add_flag("--legend", args->legend, "a line per column under the table (default: when stdout is a terminal)");
  cmd->add_flag("--no-legend", args->no_legend, "no legend, even on a terminal");
  cmd->add_option("--threads", args->threads, "worker threads, 0 to 1024 (default 0: all cores)");
  cmd->add_option("--batch", args->batch,
                  "samples per batch (default 4096, less where memory is short; results do not depend on it)");
  cmd->add_option("--max-memory", args->max_memory,
                  "memory this run may use, e.g. 8G (default: what ulimit, the cgroup and MemAvailable leave)");
  cmd->add_flag("--per-sample", args->per_sample, "keep every sample's metric values in the report (exact quantiles)");
  cmd->add_option("--worst", args->worst,
                  "list the N worst samples of every entry (1 to 1000), each with the `inspect` command that shows it; "
                  "kept in the report (\"worst\"), for any quantiles, threads, batch or shards");
  cmd->add_option("--by", args->worst_by,
                  fmt::format("the metric --worst ranks by (default {}; non-finite values rank worst, then the "
                              "largest, or 0 for a 0/1 flag)", kDefaultWorstMetric));
  cmd->add_option("--quantiles", args->quantiles,
                  "auto (default: exact up to 10^6 samples per configuration, sketch beyond, and for --shard and --until), "
                  "exact (every value kept and sorted), sketch (memory independent of the samples, relative error < 2^-10)");
  cmd->add_flag("--exact-quantiles", args->exact_quantiles, "the same as --quantiles exact");
  cmd->add_option("--shard", args->shard,
                  "i/n: run shard i of n (1 <= i <= n) of every configuration's samples; `chunkinv merge` joins the shards");
  cmd->add_option("--until", args->until,
                  "stop each configuration once every entry has METRIC.failures>=N (or .successes>=N), e.g. "
                  "inv_finite.failures>=100; --samples is the cap");
  cmd->add_option("--until-ci", args->until_ci,
                  "METRIC:W: stop each configuration once every entry's 95% Wilson interval of the share is narrower than "
                  "W times the rarer share, e.g. inv_finite:0.1; --samples is the cap");
  cmd->add_option("--pipeline", args->pipeline,
                  "auto (default: the GPU pipeline for every configuration it can take, when sketch quantiles are asked "
                  "or chosen; the host's loop for the rest), host, or device (every configuration on the GPU; sketch "
                  "quantiles). The report's figures do not depend on it");
  cmd->add_option("--devices", args->devices,
                  "the GPU pipeline's devices: all (default) or indices such as 0,2; the samples are split among them and "
                  "the figures do not depend on how many");
  cmd->add_flag("--resume", args->resume, "finish a run that was stopped or killed, from FILE.ckpt (same options as it had)");
  cmd->add_option("--checkpoint-every", args->checkpoint_every,
                  "seconds between saves of a long configuration's finished samples (default 10)");
  cmd->add_flag("--dry-run", args->dry_run, "list the configurations, entries and memory a run would take; compute nothing");
  cmd->add_flag("-q,--quiet", args->quiet, "print nothing but errors (no progress bar, no table)");
  cmd->add_flag("--list-families", args->list_families, "list the input families and their axes");
  cmd->add_flag("--list-methods", args->list_methods, "list the inverse methods (the method axis)");
  cmd->add_flag("--list-metrics", args->list_metrics, "list the per-sample metrics (for --metrics and the stop rules)");
  cmd->add_flag("--list-paths", args->list_paths, "list the arithmetic paths and whether this machine runs them");
  cmd->callback([args] { run(*args); });
}

}  // namespace chunkinv::cli
