// chunkinv run: experiments from config files and/or axes on the command line.
// Every option is checked before any work; a run with -o FILE is saved as
// it goes beside the report (FILE.ckpt) and `--resume` finishes it after a
// kill (docs/reliability.md). `--shard i/n` runs a fixed part of every
// configuration's samples for `chunkinv merge`; `--until` stops each
// configuration by a rule; `--quantiles` chooses exact or sketch quantiles
// (docs/design.md, "Statistics that stream").
#include <sys/stat.h>

#include <cstdio>
#include <iostream>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "api/meta.hpp"
#include "cli/commands.hpp"
#include "cli/summary.hpp"
#include "core/error.hpp"
#include "core/limits.hpp"
#include "core/progress.hpp"
#include "core/signals.hpp"
#include "core/text.hpp"
#include "driver/checkpoint.hpp"
#include "driver/device_pipeline.hpp"
#include "driver/runner.hpp"
#include "driver/spec.hpp"
#include "report/merge.hpp"
#include "report/report.hpp"
#include "report/table.hpp"

namespace chunkinv::cli {
namespace {

constexpr uint64_t kMaxSamples = 1'000'000'000'000'000;  // 10^15: a sample index stays exact everywhere
constexpr uint64_t kDefaultBatch = 4096;

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

// "model_like C=16 d=128 decay_floor=-5"
std::string describe(const Configuration& c) {
  std::string s = fmt::format("{} C={} d={}", c.family, c.chunk, c.dim);
  for (const auto& [k, v] : c.params.items()) s += fmt::format(" {}={}", k, v.is_string() ? v.get<std::string>() : v.dump());
  return s;
}

// Memory before anything is allocated: picks the batch when none was given
// (the default, or less where memory is short) and refuses samples or a
// batch that cannot fit, saying how many would.
// `batch_given` 0: none given.
uint64_t check_memory(const Plan& plan, uint64_t samples, const std::string& samples_name, uint64_t batch_given,
                      bool per_sample, Quantiles quantiles, const MemoryBudget& budget) {
  const uint64_t usable = budget.bytes / 10 * 9;  // a tenth for the allocator and everything else
  uint64_t batch = batch_given ? batch_given : kDefaultBatch;
  if (!batch_given)
    while (batch > 1 && run_memory(plan, samples, batch, per_sample, quantiles).batch > usable / 4) batch /= 2;
  const RunMemory m = run_memory(plan, samples, batch, per_sample, quantiles);
  if (m.total() <= usable) return batch;
  const auto fits = [&](uint64_t s, uint64_t b) { return run_memory(plan, s, b, per_sample, quantiles).total() <= usable; };
  const auto largest = [&](uint64_t hi, auto ok) {  // the largest n in [0, hi] with ok(n)
    uint64_t lo = 0;
    while (lo < hi) {
      const uint64_t mid = lo + (hi - lo + 1) / 2;
      if (ok(mid)) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  };
  const std::string limit = fmt::format("the {} this process may use ({})", format_bytes(double(budget.bytes)), budget.source);
  if (!fits(samples, 1)) {
    const uint64_t most = largest(samples, [&](uint64_t s) { return s == 0 || fits(s, std::min(batch, s)); });
    throw UsageError(fmt::format(
        "{} {}: every sample's metric values{} need {}, more than {}; at most {} samples fit (or leave out "
        "--per-sample and --quantiles exact: sketch quantiles need memory independent of the samples; or raise "
        "--max-memory where more memory is really there)",
        samples_name, samples, per_sample ? ", kept for the per-sample report," : "",
        format_bytes(double(m.statistics + m.per_sample)), limit, most));
  }
  const uint64_t most = largest(batch, [&](uint64_t b) { return b == 0 || fits(samples, b); });
  throw UsageError(fmt::format(
      "--batch {}: a batch of the largest configuration needs {}, {} in all with the statistics, more than {}; at most "
      "{} samples per batch fit (results do not depend on --batch)",
      batch, format_bytes(double(m.batch)), format_bytes(double(m.total())), limit, most));
}

// --quantiles (and --exact-quantiles): what the statistics of this run are.
// auto: exact up to kExactQuantilesUpTo samples per configuration, and with
// --per-sample; sketch beyond, and for shards and stop rules (their
// entries carry the state a merge or a later look needs).
Quantiles choose_quantiles(const RunArgs& a, uint64_t samples, bool shard, bool until) {
  std::string mode = a.quantiles.empty() ? "auto" : a.quantiles;
  if (mode != "auto" && mode != "exact" && mode != "sketch") {
    const std::string near = nearest(mode, {"auto", "exact", "sketch"});
    throw UsageError(fmt::format("--quantiles {}: must be auto, exact or sketch{}", mode,
                                 near.empty() ? "" : fmt::format(" (did you mean {}?)", near)));
  }
  if (a.exact_quantiles) {
    if (mode == "sketch") throw UsageError("--exact-quantiles and --quantiles sketch: give one of them");
    mode = "exact";
  }
  if (mode == "sketch" && a.per_sample)
    throw UsageError("--quantiles sketch with --per-sample: every value is kept, so the quantiles are exact; leave out one of them");
  if (mode == "exact" && shard && !a.per_sample)
    throw UsageError("--shard with exact quantiles needs --per-sample: the merge puts every value back together "
                     "(without it, shards take sketch quantiles)");
  if (mode == "exact") return Quantiles::kExact;
  if (mode == "sketch") return Quantiles::kSketch;
  return a.per_sample || (!shard && !until && samples <= kExactQuantilesUpTo) ? Quantiles::kExact : Quantiles::kSketch;
}

void run(const RunArgs& a) {
  if (a.list_families) return list_families();
  if (a.list_methods) return list_methods();
  if (a.list_paths) return list_paths();
  if (a.list_metrics) return list_metrics();

  // Every option first: nothing is computed or written before all are valid.
  const TableFormat format = parse_table_format(a.table_format);
  const bool legend = want_legend(a.legend, a.no_legend, true);
  const uint64_t cli_samples = a.samples.empty() ? 0 : parse_count("--samples", a.samples, 1, kMaxSamples);
  const uint64_t cli_seed = a.seed.empty() ? 0 : parse_count("--seed", a.seed, 0, UINT64_MAX);
  const uint64_t cli_batch = a.batch.empty() ? 0 : parse_count("--batch", a.batch, 1, kMaxSamples);
  const int threads = a.threads.empty() ? 0 : int(parse_count("--threads", a.threads, 0, 1024));
  const uint64_t max_memory = a.max_memory.empty() ? 0 : parse_size("--max-memory", a.max_memory);
  const double every = a.checkpoint_every.empty() ? 10.0 : double(parse_count("--checkpoint-every", a.checkpoint_every, 0, 86400));
  if (!a.paths.empty()) parse_paths(a.paths);  // a typo is named even when nothing else is given
  const std::vector<std::string> cli_metrics = parse_metric_list(a.metrics, "--metrics");
  std::string worst_by = a.worst_by;
  const size_t worst = parse_worst(a.worst, worst_by);
  std::optional<Shard> shard;
  if (!a.shard.empty()) shard = parse_shard(a.shard);
  std::optional<StopRule> until;
  if (!a.until.empty() && !a.until_ci.empty()) throw UsageError("--until and --until-ci: give one stop rule");
  if (!a.until.empty()) until = parse_until(a.until);
  if (!a.until_ci.empty()) until = parse_until_ci(a.until_ci);
  if (shard && until)
    throw UsageError("--shard with a stop rule: a rule stops a configuration at a sample that depends on every sample "
                     "before it, which a shard does not see; run it without --shard");
  if (a.configs.empty() && a.axes.empty() && a.inputs.empty())
    throw UsageError("run: nothing to run; give a config file, -a axes or --inputs (docs/configs.md)");

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
  if (!a.seed.empty()) spec.seed = cli_seed;
  const std::vector<PathChoice> paths = parse_paths(a.paths.empty() ? spec.paths : a.paths);
  const auto points = expand(spec);
  if (points.empty()) throw UsageError("run: nothing to run; the configs and axes give no configuration");
  uint64_t samples = spec.samples;
  std::string samples_name = a.configs.empty() ? "samples" : "samples (the config's)";
  if (cli_samples) {
    samples = cli_samples;
    samples_name = "--samples";
  } else if (!a.inputs.empty()) {
    if (auto n = find_family(points[0].config.family).available_samples(points[0].config)) samples = *n;
  }
  if (samples == 0 || samples > kMaxSamples)
    throw UsageError(fmt::format("{} {}: must be a whole number from 1 to {}", samples_name, samples, kMaxSamples));
  if (shard && shard->count > samples)
    throw UsageError(fmt::format("--shard {}: {} shards of {} samples; at most {} shards (a shard holds a sample at least)",
                                 a.shard, shard->count, samples, samples));
  const std::string pipeline = a.pipeline.empty() ? "auto" : a.pipeline;
  if (pipeline != "auto" && pipeline != "host" && pipeline != "device")
    throw UsageError(fmt::format("--pipeline {}: must be auto, host or device", pipeline));
  if (worst && (pipeline == "device" || !a.devices.empty()))
    throw UsageError("--worst with the GPU pipeline: the worst samples are picked sample by sample on the host; "
                     "leave out --pipeline device and --devices");
  if (pipeline == "host" && !a.devices.empty())
    throw UsageError("--devices with --pipeline host: the devices are the GPU pipeline's; give one of them");
  Quantiles quantiles = choose_quantiles(a, samples, shard.has_value(), until.has_value());
  // The GPU pipeline folds sketches: asked for it, a run takes them unless told otherwise.
  if (pipeline == "device" && a.quantiles.empty() && !a.exact_quantiles && !a.per_sample) quantiles = Quantiles::kSketch;
  // This process's samples of every configuration: all, or the shard's.
  const auto [first_sample, run_samples] = shard ? shard_span(*shard, samples) : std::pair<uint64_t, uint64_t>{0, samples};

  // The destination: a directory, a missing folder, a read-only file or an input is refused now.
  std::optional<OutputFile> out;
  if (!a.output.empty()) {
    out.emplace(a.output);
    std::vector<std::string> inputs = a.configs;
    if (!a.inputs.empty()) inputs.push_back(a.inputs);
    out->refuse_overwriting(inputs);
  }
  const bool checkpointed = out && out->replaced_atomically();
  if (a.resume && !checkpointed)
    throw UsageError("--resume needs -o FILE (a regular file): the checkpoint lies beside the report");

  RunnerOptions opt;
  opt.threads = threads;
  opt.progress = false;  // the bar below covers the whole run
  opt.batch = cli_batch ? cli_batch : kDefaultBatch;
  opt.metrics = a.metrics.empty() ? spec.metrics : cli_metrics;
  if (until && !opt.metrics.empty() && std::find(opt.metrics.begin(), opt.metrics.end(), until->metric) == opt.metrics.end())
    throw UsageError(fmt::format("{}: the stop rule's metric {} is not one of --metrics {}", until->text, until->metric,
                                 fmt::join(opt.metrics, ",")));
  timeline("run: options read");
  Runner runner(paths, opt);
  timeline("run: paths made");
  const Plan plan = runner.plan(points);
  size_t entries = 0;
  for (const Group& g : plan.groups) entries += g.tasks.size();
  if (entries == 0)
    throw UsageError(fmt::format("run: nothing to run; every path skips every method ({})", fmt::join(plan.skipped, "; ")));
  for (const Group& g : plan.groups)  // data-backed families hold a finite number of samples
    if (const auto n = find_family(g.config.family).available_samples(g.config); n && samples > *n)
      throw UsageError(fmt::format("{} {}: family {} holds {} samples at chunk {}; give --samples {} or fewer", samples_name,
                                   samples, g.config.family, *n, g.config.chunk, *n));
  const MemoryBudget budget =
      max_memory ? MemoryBudget{max_memory, "--max-memory"} : memory_budget(runner.pool().size());
  runner.set_batch(check_memory(plan, run_samples, samples_name, cli_batch, a.per_sample, quantiles, budget));

  // What the results depend on: a resume must match it exactly.
  nlohmann::json identity = api::build_identity();
  identity["experiment"] = spec.name;
  identity["seed"] = spec.seed;
  identity["samples"] = samples;
  identity["per_sample"] = a.per_sample;
  identity["quantiles"] = quantiles == Quantiles::kExact ? "exact" : "sketch";
  if (until) identity["until"] = until->text;
  if (worst) identity["worst"] = {{"n", worst}, {"by", worst_by}};
  std::vector<std::string> labels;
  for (const PathChoice& p : runner.paths()) labels.push_back(p.label());
  identity["paths"] = labels;
  if (!opt.metrics.empty()) identity["metrics"] = opt.metrics;
  identity["entries"] = nlohmann::json::array();
  for (const Group& g : plan.groups)
    for (const Task& t : g.tasks) identity["entries"].push_back(entry_axes(g, t, runner.paths()));
  // What every shard of this run shares (merge compares it); the entries
  // are compared in the results themselves.
  nlohmann::json run_identity = identity;
  run_identity.erase("entries");
  if (shard) identity["shard"] = fmt::format("{}/{}", shard->index, shard->count);
  StatsOptions stats;
  stats.per_sample = a.per_sample;
  stats.quantiles = quantiles;
  stats.keep_state = shard || until;
  stats.until = until ? &*until : nullptr;
  stats.worst = worst;
  stats.worst_by = worst_by;

  // The GPU pipeline: asked for (every configuration must run on it, or
  // nothing runs), or by default wherever a group can (docs/design.md).
  std::unique_ptr<DevicePipeline> device;
  if (pipeline != "host" && !worst) {
    const bool asked = pipeline == "device" || !a.devices.empty();
    std::vector<int> devices;
    if (!a.devices.empty()) devices = parse_devices(a.devices);  // a bad list is named even where no group would use it
    size_t fits = 0;
    for (const Group& g : plan.groups) {
      std::string why;
      if (pipeline == "device" && (quantiles != Quantiles::kSketch || a.per_sample))
        throw UsageError("--pipeline device: exact quantiles keep every value, which the GPU pipeline does not bring "
                         "back; give --quantiles sketch (or leave --quantiles out)");
      if (until && pipeline == "device")
        throw UsageError("--pipeline device with a stop rule: the rule is checked sample by sample on the host");
      if (device_pipeline_supports(g, runner.paths(), &why)) {
        ++fits;
      } else if (pipeline == "device") {
        throw UsageError(fmt::format("--pipeline device: {} cannot run on the GPU pipeline: {}", describe(g.config), why));
      }
    }
    if (fits && quantiles == Quantiles::kSketch && !until) {
      if (devices.empty()) devices = parse_devices("all");
      device = std::make_unique<DevicePipeline>(runner.paths(), devices);
      timeline("run: GPU pipeline made");
      stats.device = device.get();
    } else if (asked && !fits) {
      throw UsageError("--devices: no configuration of this run can run on the GPU pipeline");
    }
  }

  const std::string ckpt_path = checkpointed ? sibling_path(out->target(), ".ckpt") : std::string();
  struct stat st;
  if (checkpointed && !a.resume && ::lstat(ckpt_path.c_str(), &st) == 0)
    throw UsageError(fmt::format("output {}: {} holds an unfinished run; add --resume to finish it, or delete it to start over",
                                 a.output, ckpt_path));
  std::unique_ptr<Checkpoint> ckpt;
  if (a.resume)
    ckpt = Checkpoint::open(ckpt_path, identity, Checkpoint::layout_of(plan, runner.paths(), run_samples, until.has_value()));

  if (a.dry_run) {
    const RunMemory m = run_memory(plan, run_samples, runner.options().batch, a.per_sample, quantiles);
    fmt::print("{}: {} configuration{}, {} report entr{}, {} sample{} each{}, seed {}, paths {}\n", spec.name,
               plan.groups.size(), plan.groups.size() == 1 ? "" : "s", entries, entries == 1 ? "y" : "ies", samples,
               samples == 1 ? "" : "s", until ? " at most" : "", spec.seed, fmt::join(labels, ", "));
    if (shard)
      fmt::print("shard {}/{}: samples {} to {} of each configuration\n", shard->index, shard->count, first_sample,
                 first_sample + run_samples - 1);
    if (until) fmt::print("stop rule: {} (each configuration)\n", until->text);
    if (!opt.metrics.empty()) fmt::print("metrics: {}\n", fmt::join(opt.metrics, ", "));
    fmt::print("quantiles: {}\n", quantiles == Quantiles::kExact
                                     ? "exact (every value kept)"
                                     : fmt::format("sketch (relative error below {:.3g}%)", 100 * kSketchRelativeError));
    for (size_t i = 0; i < plan.groups.size(); ++i) {
      const Group& g = plan.groups[i];
      std::vector<std::string> tasks;
      for (const Task& t : g.tasks) {
        const auto ax = entry_axes(g, t, runner.paths());
        tasks.push_back(ax["path"].get<std::string>() + "/" + ax["method"].get<std::string>());
      }
      const std::string saved = !ckpt ? ""
                                : ckpt->finished(i) ? " (saved)"
                                : ckpt->partial_samples(i) ? fmt::format(" ({} samples saved)", ckpt->partial_samples(i))
                                                           : "";
      fmt::print("  {}: {}{}\n", describe(g.config), fmt::join(tasks, ", "), saved);
    }
    for (const auto& why : plan.skipped) fmt::print("skipped: {}\n", why);
    fmt::print("memory: about {} at the peak (batch {}); this process may use {} ({})\n", format_bytes(double(m.total())),
               runner.options().batch, format_bytes(double(budget.bytes)), budget.source);
    if (out)
      fmt::print("report: {}{}\n", printable(a.output),
                 checkpointed ? fmt::format(", saved as it goes in {}", printable(ckpt_path)) : "");
    return;
  }

  const std::string now = api::utc_now();
  std::vector<std::string> argv = invocation().argv;
  std::string started = now;
  if (ckpt) {  // the report says what the first part of the run was
    argv = ckpt->run().value("argv", argv);
    started = ckpt->run().value("started", now);
  } else if (checkpointed) {
    ckpt = Checkpoint::create(ckpt_path, identity, {{"argv", argv}, {"started", started}});
  }
  if (ckpt) ckpt->interval_s = every;
  if (!a.quiet)
    for (const auto& why : plan.skipped) std::fprintf(stderr, "skipped: %s\n", why.c_str());

  ProgressBar bar(run_work(plan, run_samples), !a.quiet);
  // With a checkpoint, the first Ctrl-C stops after the batch and saves it.
  std::optional<signals::StopPoint> stop_point;
  if (ckpt) stop_point.emplace();
  RunControl control{ckpt.get(), &bar, ckpt ? std::function<int()>([] { return signals::received(); }) : nullptr};
  RunResult result;
  try {
    result = run_experiment(runner, plan, run_samples, spec.seed, stats, control, first_sample);
  } catch (const signals::Stopped& s) {
    bar.finish();
    size_t done = ckpt->groups_finished();
    const uint64_t part = done < plan.groups.size() ? ckpt->partial_samples(done) : 0;
    std::vector<std::string> again = invocation().argv;
    if (!a.resume) again.push_back("--resume");
    std::fprintf(stderr, "chunkinv: stopped by %s; %zu of %zu configurations%s are saved in %s; finish with: %s\n",
                 signals::name(s.signal).c_str(), done, plan.groups.size(),
                 part ? fmt::format(" and {} samples of the next", part).c_str() : "", printable(ckpt_path).c_str(),
                 shell_command(again).c_str());
    throw;
  }
  bar.finish();
  timeline("run: computed");
  stop_point.reset();  // from here a signal ends the run at once (the checkpoint holds everything)

  api::MetaFields meta;
  meta.paths = paths;
  meta.threads = int(runner.pool().size());
  meta.argv = argv;
  meta.started = started;
  if (a.resume) meta.resumed = now;
  meta.skipped = result.skipped;
  meta.seed = spec.seed;
  meta.samples = samples;
  meta.experiment = spec.name;
  meta.metrics = opt.metrics;
  meta.quantiles = quantiles;
  if (shard) meta.shard = shard_meta(*shard, samples, run_identity);
  if (device) {
    nlohmann::json on_device = nlohmann::json::array();
    for (size_t g : result.on_device) on_device.push_back(describe(plan.groups[g].config));
    meta.pipeline = {{"devices", device->devices()}, {"on_device", on_device}, {"on_host_why", result.on_host_why}};
  }
  if (until) {
    nlohmann::json unmet = nlohmann::json::array();
    for (size_t g : result.unmet) unmet.push_back(describe(plan.groups[g].config));
    meta.until = {{"rule", until->text}, {"cap", samples}, {"unmet", unmet}};
    if (!a.quiet && !result.unmet.empty())
      std::fprintf(stderr, "%s: %zu of %zu configurations reached the cap of %llu samples without it (meta.until.unmet)\n",
                   until->text.c_str(), result.unmet.size(), plan.groups.size(), static_cast<unsigned long long>(samples));
  }
  Report report;
  report.results = std::move(result.entries);
  report.meta = api::make_meta(meta);
  if (out) {
    out->commit(report_to_json(report).dump(1) + "\n");
    if (ckpt) ckpt->remove();  // kept when the report could not be written: --resume writes it without computing
    timeline("run: report written");
  }
  if (a.quiet) return;
  const std::vector<NamedReport> shown{{a.output.empty() ? spec.name : a.output, report}};
  print_summary(shown, out ? &*out : nullptr, format, legend, worst, worst_by);
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
