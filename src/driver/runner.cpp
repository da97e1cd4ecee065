#include "driver/runner.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <unistd.h>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/progress.hpp"
#include "core/signals.hpp"
#include "driver/checkpoint.hpp"
#include "metrics/stats.hpp"
#include "paths/gold/gold.hpp"

namespace chunkinv {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

}  // namespace

Runner::Runner(std::vector<PathChoice> paths, const RunnerOptions& options)
    : paths_(std::move(paths)), options_(options), pool_(options.threads) {
  for (const PathChoice& p : paths_) instances_.push_back(make_path(p));
}

Plan Runner::plan(const std::vector<Point>& points) const {
  Plan plan;
  auto skip = [&](const std::string& why) {
    if (std::find(plan.skipped.begin(), plan.skipped.end(), why) == plan.skipped.end()) plan.skipped.push_back(why);
  };
  for (const Point& pt : points) {
    // Points of one configuration are adjacent (the method axis is innermost), but need not be.
    auto g = std::find_if(plan.groups.begin(), plan.groups.end(), [&](const Group& x) { return x.config == pt.config; });
    if (g == plan.groups.end()) {
      plan.groups.push_back({pt.config, {}});
      g = plan.groups.end() - 1;
      for (size_t p = 0; p < paths_.size(); ++p)  // the gold's own entry first
        if (paths_[p].spec->reference) g->tasks.push_back({p, method_of(exact_method()), true, &reference_metrics()});
    }
    for (size_t p = 0; p < paths_.size(); ++p) {
      const PathSpec& spec = *paths_[p].spec;
      if (spec.reference && pt.method.spec->exact) continue;  // that is the gold's own entry
      std::string why;
      if (!spec.supports(pt.config, pt.method, &why)) {
        skip(why);
        continue;
      }
      g->tasks.push_back({p, pt.method, false, &method_metrics(*pt.method.spec)});
    }
  }
  return plan;
}

void Runner::run(const Group& group, uint64_t seed, SampleRange range, Sink& sink) {
  const Configuration& cfg = group.config;
  const Family& fam = find_family(cfg.family);
  if (const auto avail = fam.available_samples(cfg); avail && (range.first > *avail || range.count > *avail - range.first))
    throw UsageError(fmt::format("family {} holds {} samples; asked for {} from sample {}", cfg.family, *avail,
                                 range.count, range.first));
  const bool progress = options_.progress && ::isatty(STDERR_FILENO);
  const auto t_start = Clock::now();
  auto last = t_start;

  // Per path, the methods it runs here and which task each serves.
  struct PathWork {
    std::vector<const Method*> methods;
    std::vector<size_t> task_of;
  };
  std::vector<PathWork> work(paths_.size());
  for (size_t t = 0; t < group.tasks.size(); ++t) {
    const Task& task = group.tasks[t];
    if (task.reference) continue;
    work[task.path].methods.push_back(&task.method);
    work[task.path].task_of.push_back(t);
  }

  sink.begin(group, range.count);
  const uint64_t batch = std::max<uint64_t>(options_.batch, 1);
  for (uint64_t b0 = 0; b0 < range.count; b0 += batch) {
    const uint64_t bn = std::min<uint64_t>(batch, range.count - b0);
    BatchResult r;
    r.group = &group;
    r.first = range.first + b0;
    std::vector<Sample> samples(bn);
    std::vector<GoldOutput> gold(bn);
    auto t0 = Clock::now();
    pool_.parallel_for(bn, [&](size_t i) { samples[i] = fam.make(cfg, seed, r.first + i); });
    r.inputs_ms = ms_since(t0);
    t0 = Clock::now();
    pool_.parallel_for(bn, [&](size_t i) { gold[i] = compute_gold(samples[i]); });
    r.gold_ms = ms_since(t0);
    r.samples = samples;
    r.gold = gold;

    std::vector<std::vector<PathOutput>>& outs = outs_;
    outs.resize(paths_.size());
    r.outputs.assign(group.tasks.size(), {});
    r.path_timing.assign(paths_.size(), {});
    r.path_wall_ms.assign(paths_.size(), 0.0);
    for (size_t p = 0; p < paths_.size(); ++p) {
      if (work[p].methods.empty()) continue;
      outs[p].resize(work[p].methods.size() * bn);
      t0 = Clock::now();
      r.path_timing[p] = instances_[p]->run_batch({samples, gold, r.first}, work[p].methods, outs[p], pool_,
                                                  options_.keep_intermediates);
      r.path_wall_ms[p] = ms_since(t0);
      for (size_t m = 0; m < work[p].methods.size(); ++m)
        r.outputs[work[p].task_of[m]] = std::span<const PathOutput>(outs[p].data() + m * bn, bn);
    }

    t0 = Clock::now();
    r.values.resize(group.tasks.size());
    for (size_t t = 0; t < group.tasks.size(); ++t) r.values[t].resize(bn * group.tasks[t].metrics->size());
    pool_.parallel_for(bn, [&](size_t i) {
      for (size_t t = 0; t < group.tasks.size(); ++t) {
        const Task& task = group.tasks[t];
        double* v = r.values[t].data() + i * task.metrics->size();
        if (task.reference) evaluate_reference(gold[i], v);
        else evaluate(*task.method.spec, gold[i], r.outputs[t][i], v);
      }
    });
    r.metrics_ms = ms_since(t0);
    sink.consume(r);

    const auto now = Clock::now();
    if (progress && now - last > std::chrono::milliseconds(200)) {
      last = now;
      std::fprintf(stderr, "\r\033[K%s C=%d: %llu/%llu samples, %.1f s", cfg.family.c_str(), cfg.chunk,
                   static_cast<unsigned long long>(b0 + bn), static_cast<unsigned long long>(range.count),
                   std::chrono::duration<double>(now - t_start).count());
    }
  }
  if (progress) std::fprintf(stderr, "\r\033[K");
  sink.end(group);
}

nlohmann::json entry_axes(const Group& group, const Task& task, const std::vector<PathChoice>& paths) {
  nlohmann::json a = group.config.axes();
  a["path"] = std::string(paths[task.path].spec->name);
  a["method"] = task.method.label();
  return a;
}

namespace {

// Every sample's value of every metric, aggregated at the end of a group.
class StatsSink final : public Sink {
 public:
  StatsSink(const std::vector<PathChoice>& paths, uint64_t seed, bool per_sample, std::vector<ReportEntry>& out)
      : paths_(paths), seed_(seed), per_sample_(per_sample), out_(out) {}

  // Samples [0, done) of the next group, saved by an interrupted run:
  // per task, values[i * metrics + m]. That group's run covers the rest.
  void preload(uint64_t done, std::vector<std::vector<double>> values) {
    pre_n_ = done;
    pre_ = std::move(values);
  }

  void begin(const Group& g, uint64_t n) override {
    n_ = pre_n_ + n;
    filled_ = 0;
    values_.assign(g.tasks.size(), {});
    for (size_t t = 0; t < g.tasks.size(); ++t) values_[t].assign(g.tasks[t].metrics->size(), std::vector<double>(n_));
    for (size_t t = 0; t < values_.size() && pre_n_; ++t) {
      const size_t nm = values_[t].size();
      for (size_t i = 0; i < pre_n_; ++i)
        for (size_t m = 0; m < nm; ++m) values_[t][m][i] = pre_[t][i * nm + m];
    }
    filled_ = pre_n_;
    pre_n_ = 0;
    pre_.clear();
  }

  void consume(const BatchResult& b) override {  // batches arrive in sample order
    const size_t bn = b.samples.size();
    for (size_t t = 0; t < values_.size(); ++t) {
      const size_t nm = values_[t].size();
      for (size_t i = 0; i < bn; ++i)
        for (size_t m = 0; m < nm; ++m) values_[t][m][filled_ + i] = b.values[t][i * nm + m];
    }
    filled_ += bn;
  }

  void end(const Group& g) override {
    for (size_t t = 0; t < g.tasks.size(); ++t) {
      const Task& task = g.tasks[t];
      ReportEntry e;
      e.axes = entry_axes(g, task, paths_);
      e.samples = n_;
      e.seed = seed_;
      for (size_t m = 0; m < task.metrics->size(); ++m) {
        const MetricInfo& info = task.metrics->infos[m];
        if (per_sample_) e.per_sample[info.name] = values_[t][m];
        e.metrics[info.name] = aggregate(values_[t][m], info.kind == MetricKind::kFlag);
      }
      out_.push_back(std::move(e));
    }
    values_.clear();
  }

 private:
  const std::vector<PathChoice>& paths_;
  uint64_t seed_;
  bool per_sample_;
  std::vector<ReportEntry>& out_;
  uint64_t n_ = 0, filled_ = 0, pre_n_ = 0;
  std::vector<std::vector<std::vector<double>>> values_;  // [task][metric][sample]
  std::vector<std::vector<double>> pre_;
};

// The statistics, and around them what RunControl asks for: blocks saved,
// the progress bar moved, a stop noticed after each batch.
class ControlSink final : public Sink {
 public:
  ControlSink(StatsSink& stats, const RunControl& control, std::vector<ReportEntry>& out)
      : stats_(stats), control_(control), out_(out) {}
  void start(size_t index, uint64_t done, double units_per_sample) {
    index_ = index;
    done_ = done;
    units_ = units_per_sample;
  }
  void begin(const Group& g, uint64_t n) override { stats_.begin(g, n); }
  void consume(const BatchResult& b) override {
    stats_.consume(b);
    const uint64_t bn = b.samples.size();
    if (control_.checkpoint) control_.checkpoint->add_block(index_, done_, bn, b.values);
    done_ += bn;
    if (control_.progress)
      control_.progress->advance(double(bn) * units_, fmt::format("{} C={} d={}", b.group->config.family,
                                                                  b.group->config.chunk, b.group->config.dim));
    if (control_.stop)
      if (const int sig = control_.stop()) {
        if (control_.checkpoint) control_.checkpoint->flush();
        throw signals::Stopped{sig};
      }
  }
  void end(const Group& g) override {
    const size_t before = out_.size();
    stats_.end(g);
    if (control_.checkpoint)
      control_.checkpoint->finish_group(index_, std::vector<ReportEntry>(out_.begin() + long(before), out_.end()));
  }

 private:
  StatsSink& stats_;
  const RunControl& control_;
  std::vector<ReportEntry>& out_;
  size_t index_ = 0;
  uint64_t done_ = 0;
  double units_ = 0;
};

// Relative cost of one sample of a group: keys (C^2 d), the gold and each
// path's L and inverse (C^3 each).
double sample_cost(const Group& g) {
  const double c = g.config.chunk, d = g.config.dim;
  return c * c * d + c * c * c * double(1 + g.tasks.size());
}

// Bytes of a matrix or vector of doubles, with the allocator's overhead.
uint64_t doubles(uint64_t n) { return n * 8 + 32; }

}  // namespace

RunResult run_experiment(const std::vector<Point>& points, const std::vector<PathChoice>& paths, uint64_t samples,
                         uint64_t seed, const RunnerOptions& options, bool per_sample, uint64_t first_sample) {
  Runner runner(paths, options);
  const Plan plan = runner.plan(points);
  RunResult result;
  result.skipped = plan.skipped;
  StatsSink sink(runner.paths(), seed, per_sample, result.entries);
  for (const Group& g : plan.groups) runner.run(g, seed, {first_sample, samples}, sink);
  return result;
}

RunResult run_experiment(Runner& runner, const Plan& plan, uint64_t samples, uint64_t seed, bool per_sample,
                         const RunControl& control, uint64_t first_sample) {
  RunResult result;
  result.skipped = plan.skipped;
  StatsSink stats(runner.paths(), seed, per_sample, result.entries);
  ControlSink sink(stats, control, result.entries);
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    const Group& g = plan.groups[i];
    const double units = sample_cost(g);
    if (const auto* done = control.checkpoint ? control.checkpoint->finished(i) : nullptr) {
      result.entries.insert(result.entries.end(), done->begin(), done->end());
      if (control.progress) control.progress->skip(double(samples) * units);
      continue;
    }
    uint64_t done = 0;
    if (control.checkpoint) {
      std::vector<std::vector<double>> values;
      done = control.checkpoint->take_partial(i, values);
      stats.preload(done, std::move(values));
      if (control.progress) control.progress->skip(double(done) * units);
    }
    sink.start(i, done, units);
    runner.run(g, seed, {first_sample + done, samples - done}, sink);
  }
  return result;
}

double run_work(const Plan& plan, uint64_t samples) {
  double w = 0;
  for (const Group& g : plan.groups) w += double(samples) * sample_cost(g);
  return w;
}

RunMemory run_memory(const Plan& plan, uint64_t samples, uint64_t batch, bool per_sample) {
  RunMemory m;
  const uint64_t b = std::min(std::max<uint64_t>(batch, 1), samples);
  for (const Group& g : plan.groups) {
    const uint64_t c = uint64_t(g.config.chunk);
    uint64_t per = sample_memory(g.config), metrics = 0;
    for (const Task& t : g.tasks) {
      metrics += t.metrics->size();
      // The path's L and decays, the method's inverse on it and on the gold L.
      if (!t.reference) per += 3 * doubles(c * c) + 2 * doubles(c) + 3 * doubles(8) + 256;
    }
    per += metrics * 8;
    m.batch = std::max(m.batch, b * per);
    m.statistics = std::max(m.statistics, samples * metrics * 8);
    // Kept in the entries, then as JSON numbers and their text.
    if (per_sample) m.per_sample += samples * metrics * (8 + 32 + 24);
  }
  return m;
}

uint64_t sample_memory(const Configuration& config) {
  const uint64_t c = uint64_t(config.chunk), d = uint64_t(config.dim);
  // Keys, g, beta; the gold's L and inverse.
  return doubles(c * d) + 2 * doubles(c) + 2 * doubles(c * c) + 128;
}

}  // namespace chunkinv
