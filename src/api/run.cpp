#include "api/run.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "api/meta.hpp"
#include "core/error.hpp"
#include "core/progress.hpp"
#include "core/text.hpp"
#include "driver/device_pipeline.hpp"
#include "inputs/family.hpp"
#include "metrics/sketch.hpp"

namespace chunkinv::api {

Prepared::Prepared() = default;
Prepared::Prepared(Prepared&&) noexcept = default;
Prepared::~Prepared() = default;

std::string describe(const Configuration& c) {
  std::string s = fmt::format("{} C={} d={}", c.family, c.chunk, c.dim);
  for (const auto& [k, v] : c.params.items()) s += fmt::format(" {}={}", k, v.is_string() ? v.get<std::string>() : v.dump());
  return s;
}

namespace {

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
Quantiles choose_quantiles(const RunRequest& r, uint64_t samples, bool shard, bool until) {
  std::string mode = r.quantiles.empty() ? "auto" : r.quantiles;
  if (mode != "auto" && mode != "exact" && mode != "sketch") {
    const std::string near = nearest(mode, {"auto", "exact", "sketch"});
    throw UsageError(fmt::format("--quantiles {}: must be auto, exact or sketch{}", mode,
                                 near.empty() ? "" : fmt::format(" (did you mean {}?)", near)));
  }
  if (r.exact_quantiles) {
    if (mode == "sketch") throw UsageError("--exact-quantiles and --quantiles sketch: give one of them");
    mode = "exact";
  }
  if (mode == "sketch" && r.per_sample)
    throw UsageError("--quantiles sketch with --per-sample: every value is kept, so the quantiles are exact; leave out one of them");
  if (mode == "exact" && shard && !r.per_sample)
    throw UsageError("--shard with exact quantiles needs --per-sample: the merge puts every value back together "
                     "(without it, shards take sketch quantiles)");
  if (mode == "exact") return Quantiles::kExact;
  if (mode == "sketch") return Quantiles::kSketch;
  return r.per_sample || (!shard && !until && samples <= kExactQuantilesUpTo) ? Quantiles::kExact : Quantiles::kSketch;
}

std::vector<std::string> path_labels(const std::vector<PathChoice>& paths) {
  std::vector<std::string> labels;
  for (const PathChoice& p : paths) labels.push_back(p.label());
  return labels;
}

}  // namespace

Prepared prepare(RunRequest request) {
  Prepared p;
  p.request = std::move(request);
  const RunRequest& a = p.request;
  // Every option first: nothing is computed or written before all are valid.
  if (!a.shard.empty()) p.shard = parse_shard(a.shard);
  if (!a.until.empty() && !a.until_ci.empty()) throw UsageError("--until and --until-ci: give one stop rule");
  if (!a.until.empty()) p.until = parse_until(a.until);
  if (!a.until_ci.empty()) p.until = parse_until_ci(a.until_ci);
  const std::optional<Shard>& shard = p.shard;
  const std::optional<StopRule>& until = p.until;
  if (shard && until)
    throw UsageError("--shard with a stop rule: a rule stops a configuration at a sample that depends on every sample "
                     "before it, which a shard does not see; run it without --shard");
  if (a.configs.empty() && a.axes.empty() && a.inputs.empty())
    throw UsageError("run: nothing to run; give a config file, -a axes or --inputs (docs/configs.md)");

  ExperimentSpec& spec = p.spec;
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
  p.paths = parse_paths(a.paths.empty() ? spec.paths : a.paths);
  const auto points = expand(spec);
  if (points.empty()) throw UsageError("run: nothing to run; the configs and axes give no configuration");
  uint64_t samples = spec.samples;
  std::string samples_name = a.configs.empty() ? "samples" : "samples (the config's)";
  if (a.samples) {
    samples = a.samples;
    samples_name = "--samples";
  } else if (!a.inputs.empty()) {
    if (auto n = find_family(points[0].config.family).available_samples(points[0].config)) samples = *n;
  }
  if (samples == 0 || samples > kMaxSamples)
    throw UsageError(fmt::format("{} {}: must be a whole number from 1 to {}", samples_name, samples, kMaxSamples));
  p.samples = samples;
  if (shard && shard->count > samples)
    throw UsageError(fmt::format("--shard {}: {} shards of {} samples; at most {} shards (a shard holds a sample at least)",
                                 a.shard, shard->count, samples, samples));
  const std::string pipeline = a.pipeline.empty() ? "auto" : a.pipeline;
  if (pipeline != "auto" && pipeline != "host" && pipeline != "device")
    throw UsageError(fmt::format("--pipeline {}: must be auto, host or device", pipeline));
  if (a.worst && (pipeline == "device" || !a.devices.empty()))
    throw UsageError("--worst with the GPU pipeline: the worst samples are picked sample by sample on the host; "
                     "leave out --pipeline device and --devices");
  if (pipeline == "host" && !a.devices.empty())
    throw UsageError("--devices with --pipeline host: the devices are the GPU pipeline's; give one of them");
  p.quantiles = choose_quantiles(a, samples, shard.has_value(), until.has_value());
  // The GPU pipeline folds sketches: asked for it, a run takes them unless told otherwise.
  if (pipeline == "device" && a.quantiles.empty() && !a.exact_quantiles && !a.per_sample) p.quantiles = Quantiles::kSketch;
  const Quantiles quantiles = p.quantiles;
  // This process's samples of every configuration: all, or the shard's.
  std::tie(p.first_sample, p.run_samples) = shard ? shard_span(*shard, samples) : std::pair<uint64_t, uint64_t>{0, samples};

  // The destination: a directory, a missing folder, a read-only file or an input is refused now.
  if (!a.output.empty()) {
    p.out = std::make_unique<OutputFile>(a.output);
    std::vector<std::string> inputs = a.configs;
    if (!a.inputs.empty()) inputs.push_back(a.inputs);
    p.out->refuse_overwriting(inputs);
  }
  const bool checkpointed = p.out && p.out->replaced_atomically();
  if (a.resume && !checkpointed)
    throw UsageError("--resume needs -o FILE (a regular file): the checkpoint lies beside the report");

  RunnerOptions opt;
  opt.threads = a.threads;
  opt.progress = false;  // the caller's bar covers the whole run
  opt.batch = a.batch ? a.batch : kDefaultBatch;
  opt.metrics = a.metrics.empty() ? spec.metrics : a.metrics;
  if (until && !opt.metrics.empty() && std::find(opt.metrics.begin(), opt.metrics.end(), until->metric) == opt.metrics.end())
    throw UsageError(fmt::format("{}: the stop rule's metric {} is not one of --metrics {}", until->text, until->metric,
                                 fmt::join(opt.metrics, ",")));
  timeline("run: options read");
  p.runner = std::make_unique<Runner>(p.paths, opt);
  Runner& runner = *p.runner;
  timeline("run: paths made");
  p.plan = runner.plan(points);
  const Plan& plan = p.plan;
  for (const Group& g : plan.groups) p.entries += g.tasks.size();
  if (p.entries == 0)
    throw UsageError(fmt::format("run: nothing to run; every path skips every method ({})", fmt::join(plan.skipped, "; ")));
  for (const Group& g : plan.groups)  // data-backed families hold a finite number of samples
    if (const auto n = find_family(g.config.family).available_samples(g.config); n && samples > *n)
      throw UsageError(fmt::format("{} {}: family {} holds {} samples at chunk {}; give --samples {} or fewer", samples_name,
                                   samples, g.config.family, *n, g.config.chunk, *n));
  p.budget = a.max_memory ? MemoryBudget{a.max_memory, "--max-memory"} : memory_budget(runner.pool().size());
  runner.set_batch(check_memory(plan, p.run_samples, samples_name, a.batch, a.per_sample, quantiles, p.budget));

  // What the results depend on: a resume must match it exactly.
  nlohmann::json& identity = p.identity;
  identity = build_identity();
  identity["experiment"] = spec.name;
  identity["seed"] = spec.seed;
  identity["samples"] = samples;
  identity["per_sample"] = a.per_sample;
  identity["quantiles"] = quantiles == Quantiles::kExact ? "exact" : "sketch";
  if (until) identity["until"] = until->text;
  if (a.worst) identity["worst"] = {{"n", a.worst}, {"by", a.worst_by}};
  identity["paths"] = path_labels(runner.paths());
  if (!opt.metrics.empty()) identity["metrics"] = opt.metrics;
  identity["entries"] = nlohmann::json::array();
  for (const Group& g : plan.groups)
    for (const Task& t : g.tasks) identity["entries"].push_back(entry_axes(g, t, runner.paths()));
  // What every shard of this run shares (merge compares it); the entries
  // are compared in the results themselves.
  p.run_identity = identity;
  p.run_identity.erase("entries");
  if (shard) identity["shard"] = fmt::format("{}/{}", shard->index, shard->count);

  // The GPU pipeline: asked for (every configuration must run on it, or
  // nothing runs), or by default wherever a group can (docs/design.md).
  if (pipeline != "host" && !a.worst) {
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
      p.device = std::make_unique<DevicePipeline>(runner.paths(), devices);
      timeline("run: GPU pipeline made");
    } else if (asked && !fits) {
      throw UsageError("--devices: no configuration of this run can run on the GPU pipeline");
    }
  }

  if (checkpointed) p.checkpoint_path = sibling_path(p.out->target(), ".ckpt");
  struct stat st;
  if (checkpointed && !a.resume && ::lstat(p.checkpoint_path.c_str(), &st) == 0)
    throw UsageError(fmt::format("output {}: {} holds an unfinished run; add --resume to finish it, or delete it to start over",
                                 a.output, p.checkpoint_path));
  if (a.resume)
    p.checkpoint = Checkpoint::open(p.checkpoint_path, identity,
                                    Checkpoint::layout_of(plan, runner.paths(), p.run_samples, until.has_value()));
  return p;
}

std::string plan_text(const Prepared& p) {
  const RunRequest& a = p.request;
  const Plan& plan = p.plan;
  const Runner& runner = *p.runner;
  const uint64_t samples = p.samples;
  const RunMemory m = run_memory(plan, p.run_samples, runner.options().batch, a.per_sample, p.quantiles);
  std::string s = fmt::format("{}: {} configuration{}, {} report entr{}, {} sample{} each{}, seed {}, paths {}\n", p.spec.name,
                              plan.groups.size(), plan.groups.size() == 1 ? "" : "s", p.entries,
                              p.entries == 1 ? "y" : "ies", samples, samples == 1 ? "" : "s", p.until ? " at most" : "",
                              p.spec.seed, fmt::join(path_labels(runner.paths()), ", "));
  if (p.shard)
    s += fmt::format("shard {}/{}: samples {} to {} of each configuration\n", p.shard->index, p.shard->count,
                     p.first_sample, p.first_sample + p.run_samples - 1);
  if (p.until) s += fmt::format("stop rule: {} (each configuration)\n", p.until->text);
  if (!runner.options().metrics.empty()) s += fmt::format("metrics: {}\n", fmt::join(runner.options().metrics, ", "));
  s += fmt::format("quantiles: {}\n", p.quantiles == Quantiles::kExact
                                          ? "exact (every value kept)"
                                          : fmt::format("sketch (relative error below {:.3g}%)", 100 * kSketchRelativeError));
  const Checkpoint* ckpt = p.checkpoint.get();
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
    s += fmt::format("  {}: {}{}\n", describe(g.config), fmt::join(tasks, ", "), saved);
  }
  for (const auto& why : plan.skipped) s += fmt::format("skipped: {}\n", why);
  s += fmt::format("memory: about {} at the peak (batch {}); this process may use {} ({})\n", format_bytes(double(m.total())),
                   runner.options().batch, format_bytes(double(p.budget.bytes)), p.budget.source);
  if (p.out)
    s += fmt::format("report: {}{}\n", printable(a.output),
                     p.checkpointed() ? fmt::format(", saved as it goes in {}", printable(p.checkpoint_path)) : "");
  return s;
}

Report execute(Prepared& p, const RunHooks& hooks) {
  const RunRequest& a = p.request;
  const std::string now = utc_now();
  std::vector<std::string> argv = a.argv;
  std::string started = now;
  if (p.checkpoint) {  // the report says what the first part of the run was
    argv = p.checkpoint->run().value("argv", argv);
    started = p.checkpoint->run().value("started", now);
  } else if (p.checkpointed()) {
    p.checkpoint = Checkpoint::create(p.checkpoint_path, p.identity, {{"argv", argv}, {"started", started}});
  }
  Checkpoint* ckpt = p.checkpoint.get();
  if (ckpt) ckpt->interval_s = a.checkpoint_every;

  StatsOptions stats;
  stats.per_sample = a.per_sample;
  stats.quantiles = p.quantiles;
  stats.keep_state = p.shard || p.until;
  stats.until = p.until ? &*p.until : nullptr;
  stats.worst = a.worst;
  stats.worst_by = a.worst_by;
  stats.device = p.device.get();
  // With a checkpoint, a stop saves what is done first.
  const RunControl control{ckpt, hooks.progress, ckpt ? hooks.stop : nullptr};
  RunResult result = run_experiment(*p.runner, p.plan, p.run_samples, p.spec.seed, stats, control, p.first_sample);
  timeline("run: computed");

  MetaFields f;
  f.paths = p.paths;
  f.threads = int(p.runner->pool().size());
  f.argv = argv;
  f.started = started;
  if (a.resume) f.resumed = now;
  f.skipped = result.skipped;
  f.seed = p.spec.seed;
  f.samples = p.samples;
  f.experiment = p.spec.name;
  f.metrics = p.runner->options().metrics;
  f.quantiles = p.quantiles;
  if (p.shard) f.shard = shard_meta(*p.shard, p.samples, p.run_identity);
  if (p.device) {
    nlohmann::json on_device = nlohmann::json::array();
    for (size_t g : result.on_device) on_device.push_back(describe(p.plan.groups[g].config));
    f.pipeline = {{"devices", p.device->devices()}, {"on_device", on_device}, {"on_host_why", result.on_host_why}};
  }
  if (p.until) {
    nlohmann::json unmet = nlohmann::json::array();
    for (size_t g : result.unmet) unmet.push_back(describe(p.plan.groups[g].config));
    f.until = {{"rule", p.until->text}, {"cap", p.samples}, {"unmet", unmet}};
  }
  Report report;
  report.results = std::move(result.entries);
  report.meta = make_meta(f);
  return report;
}

void write(Prepared& p, const Report& report) {
  if (!p.out) return;
  p.out->commit(report_to_json(report).dump(1) + "\n");
  if (p.checkpoint) p.checkpoint->remove();  // kept when the report could not be written: --resume writes it without computing
  timeline("run: report written");
}

}  // namespace chunkinv::api
