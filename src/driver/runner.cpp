#include "driver/runner.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <unistd.h>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/progress.hpp"
#include "core/signals.hpp"
#include "driver/checkpoint.hpp"
#include "driver/device_pipeline.hpp"
#include "metrics/sketch.hpp"
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
      plan.groups.emplace_back().config = pt.config;
      g = plan.groups.end() - 1;
      for (size_t p = 0; p < paths_.size(); ++p)  // the gold's own entry first
        if (paths_[p].spec->reference) add_task(*g, p, method_of(exact_method()), true, reference_metrics());
    }
    for (size_t p = 0; p < paths_.size(); ++p) {
      const PathSpec& spec = *paths_[p].spec;
      if (spec.reference && pt.method.spec->exact) continue;  // that is the gold's own entry
      std::string why;
      if (!spec.supports(pt.config, pt.method, &why)) {
        skip(why);
        continue;
      }
      add_task(*g, p, pt.method, false, method_metrics(*pt.method.spec));
    }
  }
  if (!options_.metrics.empty()) {  // every metric asked for is some entry's
    for (const std::string& name : options_.metrics) {
      bool found = false;
      for (const Group& g : plan.groups)
        for (const Task& t : g.tasks) found |= t.metrics->index(name) != MetricSet::npos;
      if (found || plan.groups.empty()) continue;
      const bool gold_own = reference_metrics().index(name) != MetricSet::npos;
      throw UsageError(fmt::format("--metrics: no entry of this run reports {} ({})", name,
                                   gold_own ? "it is the gold's own entry's: add gold to --paths"
                                            : "no method of this run has it; run --list-methods"));
    }
  }
  return plan;
}

// A task reports the chosen metrics it has; one with none is left out.
void Runner::add_task(Group& g, size_t path, const Method& method, bool reference, const MetricSet& metrics) const {
  Task t;
  t.path = path;
  t.method = method;
  t.reference = reference;
  t.metrics = t.evaluated = &metrics;
  if (!options_.metrics.empty()) {
    t.metrics = &select_metrics(*t.evaluated, options_.metrics, &t.pick);
    if (t.metrics->size() == 0) return;
    if (t.pick.size() == t.evaluated->size()) t.pick.clear();  // all of them
  }
  g.tasks.push_back(std::move(t));
}

GroupMetrics::GroupMetrics(std::vector<std::string> n, const std::vector<MetricInfo>& infos) : names(std::move(n)) {
  if (names.size() != infos.size()) throw std::logic_error("GroupMetrics: names and infos differ in number");
  set.infos = infos;
  for (size_t k = 0; k < names.size(); ++k) set.infos[k].name = names[k].c_str();
}

void Runner::run(const Group& group, uint64_t seed, SampleRange range, Sink& sink) {
  if (group.sequence) throw std::logic_error("the chunk runner was handed a group of sequences");
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
    r.count = bn;
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
      thread_local std::vector<double> all;  // every value evaluate() gives, where the task reports fewer
      for (size_t t = 0; t < group.tasks.size(); ++t) {
        const Task& task = group.tasks[t];
        double* v = r.values[t].data() + i * task.metrics->size();
        if (!task.pick.empty()) all.resize(task.evaluated->size());
        double* into = task.pick.empty() ? v : all.data();
        if (task.reference) evaluate_reference(gold[i], into);
        else evaluate(*task.method.spec, gold[i], r.outputs[t][i], into);
        for (size_t k = 0; k < task.pick.size(); ++k) v[k] = all[task.pick[k]];
      }
    });
    r.metrics_ms = ms_since(t0);
    sink.consume(r);
    if (sink.finished()) break;

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
  if (!task.axes.is_null()) return task.axes;
  nlohmann::json a = group.config.axes();
  a["path"] = std::string(paths[task.path].spec->name);
  a["method"] = task.method.label();
  return a;
}

namespace {

// Every sample's value of every metric, aggregated at the end of a group:
// kept and sorted (exact quantiles) or folded as they come (sketch).
class StatsSink final : public Sink {
 public:
  StatsSink(const std::vector<PathChoice>& paths, uint64_t seed, const StatsOptions& options,
            std::vector<ReportEntry>& out, uint64_t first_sample = 0)
      : paths_(paths), seed_(seed), o_(options), out_(out), first_(first_sample) {}

  bool streaming() const { return o_.quantiles == Quantiles::kSketch; }
  // The index of the next group's first sample in its configuration (a shard's part: not 0).
  void set_first(uint64_t first) { first_ = first; }

  // Samples [0, done) of the next group, saved by an interrupted run:
  // per task, values[i * metrics + m]. That group's run covers the rest.
  void preload(uint64_t done, std::vector<std::vector<double>> values) {
    pre_n_ = done;
    pre_ = std::move(values);
  }
  // The same for streaming statistics: per task and metric, the state.
  void preload_state(uint64_t done, std::vector<std::vector<SketchState>> states) {
    pre_n_ = done;
    pre_states_ = std::move(states);
  }

  void begin(const Group& g, uint64_t n) override {
    n_ = pre_n_ + n;
    stopped_ = false;
    values_.assign(g.tasks.size(), {});
    worst_.assign(g.tasks.size(), {});
    worst_at_.assign(g.tasks.size(), MetricSet::npos);
    if (o_.worst)
      for (size_t t = 0; t < g.tasks.size(); ++t)
        if ((worst_at_[t] = g.tasks[t].metrics->index(o_.worst_by)) != MetricSet::npos)
          worst_[t] = WorstHeap(o_.worst_by, o_.worst);
    if (o_.worst && streaming() && pre_n_)
      throw UsageError("--worst: the checkpoint of this run keeps its unfinished configuration's statistics but not its "
                       "samples, so the worst of them are lost; run it again without --resume, or with --quantiles exact");
    streams_.clear();
    streams_.resize(g.tasks.size());
    for (size_t t = 0; t < g.tasks.size(); ++t) {
      const size_t nm = g.tasks[t].metrics->size();
      if (!streaming()) {
        values_[t].assign(nm, std::vector<double>(n_));
        for (size_t i = 0; i < pre_n_; ++i) {
          for (size_t m = 0; m < nm; ++m) values_[t][m][i] = pre_[t][i * nm + m];
          offer_worst(t, i, pre_[t].data() + i * nm, *g.tasks[t].metrics);
        }
      } else if (pre_n_) {
        if (pre_states_.size() != g.tasks.size() || pre_states_[t].size() != nm)
          throw UsageError("checkpoint: the saved statistics do not fit the configuration; delete it to start over");
        for (size_t m = 0; m < nm; ++m) streams_[t].emplace_back(pre_states_[t][m]);
      } else {
        streams_[t].resize(nm);
      }
    }
    // The stop rule counts the 1s of its metric in every entry but the gold's own.
    rule_.clear();
    if (o_.until)
      for (size_t t = 0; t < g.tasks.size(); ++t)
        if (const size_t m = g.tasks[t].metrics->index(o_.until->metric); !g.tasks[t].reference && m != MetricSet::npos)
          rule_.push_back({t, m, pre_n_ ? ones_before(t, m) : 0});
    filled_ = pre_n_;
    pre_n_ = 0;
    pre_.clear();
    pre_states_.clear();
  }

  void consume(const BatchResult& b) override {  // batches arrive in sample order
    const size_t bn = b.count;
    if (!o_.until) {  // the whole batch, task by task
      for (size_t t = 0; t < b.values.size(); ++t) {
        const size_t nm = b.group->tasks[t].metrics->size();
        for (size_t i = 0; i < bn; ++i) {
          add(t, filled_ + i, b.values[t].data() + i * nm, nm);
          offer_worst(t, filled_ + i, b.values[t].data() + i * nm, *b.group->tasks[t].metrics);
        }
      }
      filled_ += bn;
      return;
    }
    // Sample by sample, so that the group stops at the first sample after
    // which the rule holds, whatever the batch.
    for (size_t i = 0; i < bn && !stopped_; ++i) {
      for (size_t t = 0; t < b.values.size(); ++t) {
        const size_t nm = b.group->tasks[t].metrics->size();
        add(t, filled_, b.values[t].data() + i * nm, nm);
        offer_worst(t, filled_, b.values[t].data() + i * nm, *b.group->tasks[t].metrics);
      }
      ++filled_;
      bool met = !rule_.empty();
      for (Counted& c : rule_) {
        c.ones += b.values[c.task][i * b.group->tasks[c.task].metrics->size() + c.metric] == 1.0;
        met = met && o_.until->met(c.ones, filled_);
      }
      stopped_ = met;
    }
  }

  bool finished() const override { return stopped_; }
  uint64_t consumed() const { return filled_; }

  // The next `n` samples, folded elsewhere (the GPU pipeline): their states
  // [task][metric], merged after those consumed (merging is exact).
  void absorb(const std::vector<std::vector<SketchState>>& states, uint64_t n) {
    if (!streaming() || states.size() != streams_.size())
      throw std::logic_error("statistics: folded states that do not fit the entries");
    for (size_t t = 0; t < streams_.size(); ++t) {
      if (states[t].size() != streams_[t].size()) throw std::logic_error("statistics: folded states that do not fit the metrics");
      for (size_t m = 0; m < streams_[t].size(); ++m) {
        SketchState s = streams_[t][m].state();
        s.merge(states[t][m]);
        streams_[t][m] = StreamStats(s);
      }
    }
    filled_ += n;
  }

  // Streaming: the statistics of the samples consumed so far, saved where
  // the checkpoint wants them (one metric at a time).
  void save(Checkpoint& ckpt, size_t group) const {
    std::vector<size_t> metrics;
    for (const auto& task : streams_) metrics.push_back(task.size());
    ckpt.save_state(group, filled_, metrics, [&](size_t t, size_t m) { return streams_[t][m].state(); });
  }

  void end(const Group& g) override {
    for (size_t t = 0; t < g.tasks.size(); ++t) {
      const Task& task = g.tasks[t];
      ReportEntry e;
      e.axes = entry_axes(g, task, paths_);
      e.samples = filled_;  // n_, or fewer where a stop rule held
      e.seed = g.seed.value_or(seed_);
      e.sketch = streaming();
      if (worst_at_[t] != MetricSet::npos) e.worst = worst_[t].result();
      for (size_t m = 0; m < task.metrics->size(); ++m) {
        const MetricInfo& info = task.metrics->infos[m];
        const bool flag = info.kind == MetricKind::kFlag;
        if (streaming()) {
          const SketchState st = streams_[t][m].state();
          e.metrics[info.name] = st.stats(flag);
          if (o_.keep_state) e.state[info.name] = st;
          continue;
        }
        std::vector<double>& v = values_[t][m];
        v.resize(filled_);
        if (o_.keep_state) {
          StreamStats st;
          for (double x : v) st.add(x);
          e.state[info.name] = st.state();
        }
        if (o_.per_sample) e.per_sample[info.name] = v;
        e.metrics[info.name] = aggregate(v, flag);
      }
      out_.push_back(std::move(e));
    }
    values_.clear();
    streams_.clear();
  }

 private:
  void add(size_t t, uint64_t i, const double* v, size_t nm) {
    if (streaming())
      for (size_t m = 0; m < nm; ++m) streams_[t][m].add(v[m]);
    else
      for (size_t m = 0; m < nm; ++m) values_[t][m][i] = v[m];
  }
  // Sample i of this run (first_ + i of its configuration) to task t's worst list.
  void offer_worst(size_t t, uint64_t i, const double* v, const MetricSet& metrics) {
    if (worst_at_.empty() || worst_at_[t] == MetricSet::npos) return;
    worst_[t].offer(first_ + i, v[worst_at_[t]], [&] {
      std::map<std::string, double> all;
      for (size_t m = 0; m < metrics.size(); ++m) all[metrics.infos[m].name] = v[m];
      return all;
    });
  }
  // The 1s of task t's metric m among the preloaded samples.
  uint64_t ones_before(size_t t, size_t m) const {
    if (streaming()) {
      const SketchState& s = pre_states_[t][m];
      for (const SketchBucket& b : s.pos)
        if (b.key == sketch_key(1.0)) return b.count;
      return 0;
    }
    const size_t nm = values_[t].size();
    uint64_t ones = 0;
    for (size_t i = 0; i < pre_n_; ++i) ones += pre_[t][i * nm + m] == 1.0;
    return ones;
  }

  struct Counted {
    size_t task, metric;
    uint64_t ones;
  };
  const std::vector<PathChoice>& paths_;
  uint64_t seed_;
  StatsOptions o_;
  std::vector<ReportEntry>& out_;
  uint64_t first_ = 0;  // the index of this run's first sample of each configuration (a shard's)
  uint64_t n_ = 0, filled_ = 0, pre_n_ = 0;
  std::vector<WorstHeap> worst_;  // per task
  std::vector<size_t> worst_at_;  // per task: the index of o_.worst_by in its metrics, or npos
  bool stopped_ = false;
  std::vector<std::vector<std::vector<double>>> values_;  // exact: [task][metric][sample]
  std::vector<std::vector<StreamStats>> streams_;         // sketch: [task][metric]
  std::vector<Counted> rule_;
  std::vector<std::vector<double>> pre_;
  std::vector<std::vector<SketchState>> pre_states_;
};

// The statistics, and around them what RunControl asks for: samples saved,
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
  void begin(const Group& g, uint64_t n) override {
    stats_.begin(g, n);
    cap_ = done_ + n;
  }
  void consume(const BatchResult& b) override {
    stats_.consume(b);
    after(*b.group, stats_.consumed() - done_, &b.values);  // fewer than the batch where a stop rule held
  }
  // The same for samples the GPU pipeline folded.
  void absorb(const Group& g, const std::vector<std::vector<SketchState>>& states, uint64_t n) override {
    stats_.absorb(states, n);
    after(g, n, nullptr);
  }
  bool finished() const override { return stats_.finished(); }
  void end(const Group& g) override {
    const size_t before = out_.size();
    stats_.end(g);
    if (control_.progress && done_ < cap_) control_.progress->skip(double(cap_ - done_) * units_);  // not needed
    if (control_.checkpoint)
      control_.checkpoint->finish_group(index_, std::vector<ReportEntry>(out_.begin() + long(before), out_.end()));
  }

 private:
  // After `taken` more samples (their values, where the host's loop made
  // them): saved when due, the bar moved, a stop noticed.
  void after(const Group& g, uint64_t taken, const std::vector<std::vector<double>>* values) {
    Checkpoint* ckpt = control_.checkpoint;
    if (ckpt && !stats_.finished()) {
      if (!stats_.streaming()) ckpt->add_block(index_, done_, taken, *values);
      else if (ckpt->due()) stats_.save(*ckpt, index_);
    }
    done_ += taken;
    if (control_.progress)
      control_.progress->advance(double(taken) * units_,
                                 fmt::format("{} C={} d={}", g.config.family, g.config.chunk, g.config.dim), taken);
    if (control_.stop)
      if (const int sig = control_.stop()) {
        if (ckpt && stats_.streaming() && !stats_.finished())
          stats_.save(*ckpt, index_);
        else if (ckpt)
          ckpt->flush();
        throw signals::Stopped{sig};
      }
  }

  StatsSink& stats_;
  const RunControl& control_;
  std::vector<ReportEntry>& out_;
  size_t index_ = 0;
  uint64_t done_ = 0, cap_ = 0;
  double units_ = 0;
};

// Whether a group's entries (in task order) satisfy the stop rule: every
// entry but the gold's own that has the rule's metric, and at least one.
bool rule_met(const StopRule& rule, const Group& g, const ReportEntry* entries) {
  bool any = false;
  for (size_t t = 0; t < g.tasks.size(); ++t) {
    const ReportEntry& e = entries[t];
    const auto st = e.metrics.find(rule.metric);
    if (g.tasks[t].reference || st == e.metrics.end()) continue;
    uint64_t ones = static_cast<uint64_t>(std::llround(st->second.mean * double(e.samples)));
    if (const auto s = e.state.find(rule.metric); s != e.state.end()) {
      ones = 0;
      for (const SketchBucket& b : s->second.pos)
        if (b.key == sketch_key(1.0)) ones = b.count;
    }
    if (!rule.met(ones, e.samples)) return false;
    any = true;
  }
  return any;
}

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
  StatsOptions stats;
  stats.per_sample = per_sample;
  return run_experiment(points, paths, samples, seed, options, stats, first_sample);
}

RunResult run_experiment(const std::vector<Point>& points, const std::vector<PathChoice>& paths, uint64_t samples,
                         uint64_t seed, const RunnerOptions& options, const StatsOptions& stats,
                         uint64_t first_sample) {
  Runner runner(paths, options);
  return run_experiment(runner, runner.plan(points), samples, seed, stats, RunControl{}, first_sample);
}

RunResult run_experiment(Runner& runner, const Plan& plan, uint64_t samples, uint64_t seed, bool per_sample,
                         const RunControl& control, uint64_t first_sample) {
  StatsOptions stats;
  stats.per_sample = per_sample;
  return run_experiment(runner, plan, samples, seed, stats, control, first_sample);
}

RunResult run_experiment(Runner& runner, const Plan& plan, uint64_t samples, uint64_t seed, const StatsOptions& options,
                         const RunControl& control, uint64_t first_sample) {
  return run_experiment(runner, runner.paths(), plan, samples, seed, options, control, first_sample);
}

RunResult run_experiment(Backend& host, const std::vector<PathChoice>& paths, const Plan& plan, uint64_t all_samples,
                         uint64_t seed, const StatsOptions& options, const RunControl& control,
                         uint64_t all_first) {
  RunResult result;
  result.skipped = plan.skipped;
  StatsSink stats(paths, seed, options, result.entries, all_first);
  ControlSink sink(stats, control, result.entries);
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    const Group& g = plan.groups[i];
    const uint64_t first_sample = g.first.value_or(all_first), samples = g.count.value_or(all_samples);
    const double units = sample_cost(g);
    const size_t before = result.entries.size();
    if (const auto* saved = control.checkpoint ? control.checkpoint->finished(i) : nullptr) {
      result.entries.insert(result.entries.end(), saved->begin(), saved->end());
      if (control.progress) control.progress->skip(double(samples) * units);
    } else {
      uint64_t done = 0;
      if (control.checkpoint && stats.streaming()) {
        Checkpoint::States states;
        if ((done = control.checkpoint->take_state(i, states))) stats.preload_state(done, std::move(states));
      } else if (control.checkpoint) {
        std::vector<std::vector<double>> values;
        done = control.checkpoint->take_partial(i, values);
        stats.preload(done, std::move(values));
      }
      if (control.progress) control.progress->skip(double(done) * units);
      stats.set_first(first_sample);
      sink.start(i, done, units);
      // The GPU pipeline where it takes the group, else the host's loop: the same stages, the same sink.
      std::string why;
      Backend* backend = &host;
      if (options.device && options.device->takes(g, options, &why)) {
        backend = options.device;
        result.on_device.push_back(i);
      } else if (options.device && std::find(result.on_host_why.begin(), result.on_host_why.end(), why) ==
                                       result.on_host_why.end()) {
        result.on_host_why.push_back(why);
      }
      backend->run(g, seed, {first_sample + done, samples - done}, sink);
    }
    if (options.until && !rule_met(*options.until, g, result.entries.data() + before)) result.unmet.push_back(i);
  }
  return result;
}

double run_work(const Plan& plan, uint64_t samples) {
  double w = 0;
  for (const Group& g : plan.groups) w += double(samples) * sample_cost(g);
  return w;
}

RunMemory run_memory(const Plan& plan, uint64_t samples, uint64_t batch, bool per_sample, Quantiles quantiles) {
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
    // A sketch touches pages of 128 counts (1 KiB, an eighth of a binade)
    // where its values fall; 16 whole binades (a factor of 65536 between
    // the least and largest value) is generous for a metric.
    m.statistics = std::max(m.statistics, quantiles == Quantiles::kExact ? samples * metrics * 8
                                                                         : metrics * (16 * 8192 + 1024));
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
