// chunkinv bench: samples per second of each usable path and method, on the
// configurations that -a axes give (as `run` takes them), through the same
// runner as `run`. Every path is first checked against the emulated path
// on a small batch (the kernel must match it bit for bit), then timed: the
// path alone (the GPU's own time by CUDA events: upload, launches,
// download; the host's packing apart) and the whole sample loop end to end
// (inputs, gold, path, metrics). Each method is timed in runs of its own.
//
// `bench --recurrence`: the FP64 token recurrence of docs/downstream.md on
// the GPU (gpu/recurrence.cu) over B x H sequences of T tokens, checked bit
// for bit against the CPU's Recurrence on a few of them before it is timed.
//
// `bench --backward`: the chunked backward of docs/downstream.md over one
// sequence of T tokens, N variants at once (as `seq` runs a sequence's
// variants), on the GPU (gpu/chunked_backward.cu) and on the host's cores
// (ChunkedBackward, a variant a thread); every gradient and state gradient
// of the GPU's checked bit for bit against the host's.
#include <algorithm>
#include <chrono>
#include <map>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/bench.hpp"
#include "cli/commands.hpp"
#include "core/error.hpp"
#include "core/fp.hpp"
#include "core/limits.hpp"
#include "core/progress.hpp"
#include "core/thread_pool.hpp"
#include "downstream/backward.hpp"
#include "downstream/forward.hpp"
#include "downstream/sequence.hpp"
#include "downstream/storage.hpp"
#include "downstream/sources.hpp"
#include "driver/roofline.hpp"
#include "driver/runner.hpp"
#include "driver/spec.hpp"
#include "gpu/chunked_backward.hpp"
#include "gpu/gpu.hpp"
#include "gpu/recurrence.hpp"
#include "metrics/stats.hpp"
#include "paths/gold/gold.hpp"
#include "report/report.hpp"

namespace chunkinv::cli {

nlohmann::json num(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); }

nlohmann::json device_names() {
  nlohmann::json devs = nlohmann::json::array();
  for (const auto& d : gpu::devices()) devs.push_back(fmt::format("{} (cc {}.{})", d.name, d.cc_major, d.cc_minor));
  return devs;
}

double median_of(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  return quantile_sorted(v, 0.5);
}

namespace {

// Moves the progress bar as a timed or validating run goes.
class Counted final : public Sink {
 public:
  Counted(Sink& inner, ProgressBar& bar, std::string what) : inner_(inner), bar_(bar), what_(std::move(what)) {}
  void begin(const Group& g, uint64_t n) override { inner_.begin(g, n); }
  void consume(const BatchResult& b) override {
    inner_.consume(b);
    bar_.advance(double(b.samples.size()), what_);
  }
  void end(const Group& g) override { inner_.end(g); }

 private:
  Sink& inner_;
  ProgressBar& bar_;
  std::string what_;
};

// Share of identical elements of a path and the emulated path, per output.
struct Agreement {
  size_t decay = 0, decay_n = 0, l = 0, l_n = 0, inv = 0, inv_n = 0, gold_l = 0, gold_l_n = 0;
  bool all() const { return decay == decay_n && l == l_n && inv == inv_n && gold_l == gold_l_n; }
};

bool same_bits(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

void count_same(const Mat& a, const Mat& b, size_t& same, size_t& n) {
  for (Eigen::Index i = 0; i < a.size() && i < b.size(); ++i) same += same_bits(a.data()[i], b.data()[i]);
  n += size_t(std::max(a.size(), b.size()));
}

void count_same(const std::vector<double>& a, const std::vector<double>& b, size_t& same, size_t& n) {
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) same += same_bits(a[i], b[i]);
  n += std::max(a.size(), b.size());
}

void add_agreement(Agreement& a, const PathOutput& p, const PathOutput& ref) {
  count_same(p.l.decay, ref.l.decay, a.decay, a.decay_n);
  count_same(p.l.inv_decay, ref.l.inv_decay, a.decay, a.decay_n);
  count_same(p.l.L, ref.l.L, a.l, a.l_n);
  count_same(p.on_path_l.inv, ref.on_path_l.inv, a.inv, a.inv_n);
  count_same(p.on_gold_l.inv, ref.on_gold_l.inv, a.gold_l, a.gold_l_n);
}

double share(size_t k, size_t n) { return n ? double(k) / double(n) : 1.0; }

// Compares every task's outputs with those of the emulated path's task of the same method.
class ValidateSink final : public Sink {
 public:
  ValidateSink(const std::vector<PathChoice>& paths) : paths_(paths) {}
  void consume(const BatchResult& b) override {
    const auto& tasks = b.group->tasks;
    for (size_t t = 0; t < tasks.size(); ++t) {
      if (tasks[t].reference || paths_[tasks[t].path].spec != &emulated_spec()) continue;
      for (size_t u = 0; u < tasks.size(); ++u) {
        if (u == t || tasks[u].reference || !(tasks[u].method == tasks[t].method)) continue;
        Agreement& a = agreement[{tasks[u].path, tasks[u].method.label()}];
        for (size_t i = 0; i < b.samples.size(); ++i) add_agreement(a, b.outputs[u][i], b.outputs[t][i]);
      }
    }
  }
  static const PathSpec& emulated_spec() { return cpu_model_path(); }
  std::map<std::pair<size_t, std::string>, Agreement> agreement;

 private:
  const std::vector<PathChoice>& paths_;
};

// Wall times of each phase over one run.
class TimingSink final : public Sink {
 public:
  explicit TimingSink(size_t npaths) : path_ms(npaths, 0.0), timing(npaths) {}
  void consume(const BatchResult& b) override {
    inputs_ms += b.inputs_ms;
    gold_ms += b.gold_ms;
    metrics_ms += b.metrics_ms;
    for (size_t p = 0; p < path_ms.size(); ++p) {
      path_ms[p] += b.path_wall_ms[p];
      timing[p] += b.path_timing[p];
    }
  }
  double inputs_ms = 0, gold_ms = 0, metrics_ms = 0;
  double total_ms = 0;  // the whole run, end to end
  std::vector<double> path_ms;
  std::vector<BatchTiming> timing;
};

struct Row {
  nlohmann::json axes;
  std::string label;
  bool reference = false, gpu = false;
  uint64_t samples = 0;
  double path_ms = NAN, upload_ms = NAN, compute_ms = NAN, download_ms = NAN, host_ms = NAN;
  double end_to_end_ms = NAN, metrics_ms = NAN;
  bool validated = false;
  Agreement agree;
};

void bench(const BenchArgs& a) {
  if (a.samples == 0 || a.cpu_samples == 0 || a.repeat < 1)
    throw UsageError("bench: --samples, --cpu-samples and --repeat must be at least 1");
  ExperimentSpec spec;
  spec.grids.push_back({{"family", "floor"}});
  for (const auto& ax : a.axes) apply_axis(spec, ax);
  const std::vector<Point> points = expand(spec);
  // Each method is timed in runs of its own, so that a row's time is its
  // method's: the path forms L for that method alone and runs it (on its L
  // and on the gold L). Methods in the order the axis gives them.
  std::vector<std::vector<Point>> by_method;
  for (const Point& p : points) {
    auto it = std::find_if(by_method.begin(), by_method.end(),
                           [&](const std::vector<Point>& v) { return v[0].method == p.method; });
    if (it == by_method.end()) by_method.push_back({p});
    else it->push_back(p);
  }
  std::vector<PathChoice> chosen = parse_paths(a.paths);
  std::optional<OutputFile> out;  // a bad destination fails now, not after the timings
  if (!a.output.empty()) out.emplace(a.output);

  // Each timed run holds all its samples at once: refuse what cannot fit before
  // any work, and count the work for the progress bar.
  double work = 0;
  {
    const MemoryBudget budget = a.max_memory.empty() ? memory_budget(a.threads > 0 ? a.threads : int(std::thread::hardware_concurrency()))
                                                     : MemoryBudget{parse_size("--max-memory", a.max_memory), "--max-memory"};
    RunnerOptions one;
    one.threads = 1;
    for (const PathChoice& choice : chosen) {
      const bool gpu = choice.spec->device == Device::kGpu;
      const uint64_t n = gpu ? a.samples : std::min(a.samples, a.cpu_samples);
      for (const auto& mpoints : by_method) {
        const Plan plan = Runner({choice}, one).plan(mpoints);
        const uint64_t need = run_memory(plan, n, n, false).batch;
        if (need > budget.bytes / 10 * 9)
          throw UsageError(fmt::format("{} {}: a timed run of path {} holds all its samples at once, {}, more than the "
                                       "{} this process may use ({}); use fewer (or raise --max-memory)",
                                       gpu ? "--samples" : "--cpu-samples", n, choice.label(), format_bytes(double(need)),
                                       format_bytes(double(budget.bytes)), budget.source));
        const bool validates = gpu && &mpoints == &by_method.front();  // once per configuration, all methods at once
        for (size_t g = 0; g < plan.groups.size(); ++g)
          work += double(n) * (a.repeat + (gpu ? 1 : 0)) + (validates ? double(std::min(a.validate, n)) : 0.0);
      }
    }
  }
  ProgressBar bar(work, !a.quiet);

  // Validation against the emulated path, on the first samples of each configuration.
  std::vector<PathChoice> vpaths{{&ValidateSink::emulated_spec(), {}}};
  for (const auto& p : chosen)
    if (p.spec->device == Device::kGpu) vpaths.push_back(p);
  RunnerOptions vo;
  vo.threads = a.threads;
  vo.batch = a.validate;
  Runner validator(vpaths, vo);
  const Plan vplan = validator.plan(points);

  std::vector<Row> rows;
  std::set<std::string> rows_seen;  // the gold's own entry comes with every method: one row
  bool kernel_differs = false;
  int threads_used = 0;
  std::vector<std::string> skipped;
  for (size_t pi = 0; pi < chosen.size(); ++pi) {
    const PathChoice& choice = chosen[pi];
    const bool gpu = choice.spec->device == Device::kGpu;
    RunnerOptions ro;
    ro.threads = a.threads;
    const uint64_t n = gpu ? a.samples : std::min(a.samples, a.cpu_samples);
    ro.batch = n;
    Runner runner({choice}, ro);
    threads_used = int(runner.pool().size());
    std::map<std::string, std::map<std::string, Agreement>> validated;  // by configuration, then method
    for (const auto& mpoints : by_method) {
      const Plan plan = runner.plan(mpoints);
      for (const auto& s : plan.skipped)
        if (std::find(skipped.begin(), skipped.end(), s) == skipped.end()) skipped.push_back(s);
      for (const Group& g : plan.groups) {
        // Validate the GPU tasks of this configuration (all its methods at once, the first time).
        const std::string config_key = g.config.axes().dump();
        if (gpu && a.validate > 0 && !validated.count(config_key)) {
          std::map<std::string, Agreement>& agree = validated[config_key];
          for (const Group& vg : vplan.groups)
            if (vg.config == g.config) {
              ValidateSink vs(validator.paths());
              Counted counted(vs, bar, choice.label() + ": validating");
              validator.run(vg, a.seed, {0, std::min(a.validate, n)}, counted);
              for (const auto& [key, ag] : vs.agreement)
                if (validator.paths()[key.first].spec == choice.spec) agree[key.second] = ag;
            }
        }
        const std::map<std::string, Agreement>& agree = validated[config_key];  // empty off the GPU
        if (gpu) {  // warm-up: buffers, module load
          TimingSink warm(1);
          Counted counted(warm, bar, choice.label() + ": warm-up");
          runner.run(g, a.seed, {0, n}, counted);
        }
        std::vector<TimingSink> runs;
        for (int k = 0; k < a.repeat; ++k) {
          runs.emplace_back(1);
          Counted counted(runs.back(), bar, choice.label());
          const auto t0 = std::chrono::steady_clock::now();
          runner.run(g, a.seed, {0, n}, counted);
          runs.back().total_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        }
        auto med = [&](auto get) {
          std::vector<double> v;
          for (const auto& r : runs) v.push_back(get(r));
          return median_of(v);
        };
        // One row per task: the method's own runs (the gold's reference entry once).
        for (const Task& t : g.tasks) {
          Row row;
          row.axes = entry_axes(g, t, runner.paths());
          if (!rows_seen.insert(row.axes.dump() + choice.label()).second) continue;
          row.label = choice.label();
          row.reference = t.reference;
          row.gpu = gpu;
          row.samples = n;
          row.path_ms = med([](const TimingSink& s) { return s.path_ms[0]; });
          row.end_to_end_ms = med([](const TimingSink& s) { return s.total_ms; });
          row.metrics_ms = med([](const TimingSink& s) { return s.metrics_ms; });
          if (gpu) {
            row.upload_ms = med([](const TimingSink& s) { return s.timing[0].upload_ms; });
            row.compute_ms = med([](const TimingSink& s) { return s.timing[0].compute_ms; });
            row.download_ms = med([](const TimingSink& s) { return s.timing[0].download_ms; });
            row.host_ms = med([](const TimingSink& s) { return s.timing[0].host_ms; });
            if (const auto it = agree.find(t.method.label()); it != agree.end()) {
              row.validated = true;
              row.agree = it->second;
              if (choice.spec->equals_cpu_model && !row.agree.all()) kernel_differs = true;
            }
          }
          rows.push_back(row);
        }
      }
    }
  }
  bar.finish();
  if (!a.quiet)
    for (const auto& s : skipped) std::fprintf(stderr, "skipped: %s\n", s.c_str());

  nlohmann::json j = {{"samples", a.samples}, {"cpu_samples", a.cpu_samples}, {"validate_samples", a.validate},
                      {"repeat", a.repeat},   {"threads", threads_used},     {"seed", a.seed},
                      {"methods_timed_apart", true}};
  j["devices"] = device_names();
  j["results"] = nlohmann::json::array();
  for (const Row& r : rows) {
    nlohmann::json p = {{"axes", r.axes},
                        {"path_option", r.label},
                        {"samples", r.samples},
                        {"path_ms", num(r.path_ms)},
                        {"samples_per_s", num(double(r.samples) / (r.path_ms * 1e-3))},
                        {"end_to_end_ms", num(r.end_to_end_ms)},
                        {"end_to_end_samples_per_s", num(double(r.samples) / (r.end_to_end_ms * 1e-3))},
                        {"metrics_ms", num(r.metrics_ms)},
                        {"upload_ms", num(r.upload_ms)},
                        {"compute_ms", num(r.compute_ms)},
                        {"download_ms", num(r.download_ms)},
                        {"host_pack_ms", num(r.host_ms)},
                        {"compute_samples_per_s", num(double(r.samples) / (r.compute_ms * 1e-3))}};
    if (r.validated)
      p["identical_to_emulated"] = {{"decays", share(r.agree.decay, r.agree.decay_n)},
                                    {"L", share(r.agree.l, r.agree.l_n)},
                                    {"INV", share(r.agree.inv, r.agree.inv_n)},
                                    {"gold_l_INV", share(r.agree.gold_l, r.agree.gold_l_n)}};
    j["results"].push_back(p);
  }
  if (out) out->commit(j.dump(1) + "\n");
  if (a.quiet || (out && out->to_stdout())) {  // the JSON is the output
  } else if (a.format == "json") {
    fmt::print("{}\n", j.dump(1));
  } else {
    fmt::print("bench: {} samples per GPU run, {} per CPU run, {} threads, median of {}\n", a.samples,
               std::min(a.samples, a.cpu_samples), threads_used, a.repeat);
    fmt::print("{:<34} {:<9} {:<12} {:>8} {:>11} {:>11} {:>10} {:>10} {:>10} {:>12}  {}\n", "configuration", "path",
               "method", "samples", "path smp/s", "e2e smp/s", "upload ms", "launch ms", "host ms", "launch smp/s",
               "identical to emulated (decays / L / INV / INV on gold L)");
    for (const Row& r : rows) {
      auto ms = [](double v) { return std::isfinite(v) ? fmt::format("{:.3f}", v) : std::string("-"); };
      std::string cfg = fmt::format("{} C={} d={}", r.axes.value("family", ""), r.axes.value("chunk", 0),
                                    r.axes.value("dim", 0));
      for (const auto& [k, v] : r.axes.items())
        if (k != "family" && k != "chunk" && k != "dim" && k != "path" && k != "method")
          cfg += fmt::format(" {}={}", k, v.dump());
      const std::string agree =
          r.validated ? fmt::format("{:.4f}% / {:.4f}% / {:.4f}% / {:.4f}%", 100 * share(r.agree.decay, r.agree.decay_n),
                                    100 * share(r.agree.l, r.agree.l_n), 100 * share(r.agree.inv, r.agree.inv_n),
                                    100 * share(r.agree.gold_l, r.agree.gold_l_n))
                      : std::string(r.gpu ? "(not validated)" : "");
      fmt::print("{:<34} {:<9} {:<12} {:>8} {:>11.4g} {:>11.4g} {:>10} {:>10} {:>10} {:>12}  {}\n", cfg, r.label,
                 r.reference ? std::string("(reference)") : r.axes["method"].get<std::string>(), r.samples,
                 double(r.samples) / (r.path_ms * 1e-3), double(r.samples) / (r.end_to_end_ms * 1e-3),
                 ms(r.upload_ms), ms(r.compute_ms), ms(r.host_ms),
                 std::isfinite(r.compute_ms) ? fmt::format("{:.4g}", double(r.samples) / (r.compute_ms * 1e-3)) : "-",
                 agree);
    }
  }
  if (kernel_differs) {
    std::fprintf(stderr, "bench: a GPU path is NOT bit-identical to the emulated path on a configuration above\n");
    set_exit_status(1);
  }
}


// A token-head's FLOP: the decay (K V multiplies), k^T S, the update and
// q^T S (K V fma each, 2 FLOP an fma).
double recurrence_flop(int K, int V) { return 7.0 * K * V; }

void bench_recurrence(const BenchArgs& a) {
  if (!a.axes.empty() || !a.samples_text.empty() || !a.cpu_samples_text.empty() || a.paths != "all")
    throw UsageError("bench --recurrence: -a, --samples, --cpu-samples and --paths are the inverse's benchmark's; the "
                     "recurrence takes --batch, --seq-len, --heads, --key-dim, --value-dim, --gating, --initial-state, --block, "
                     "--kernel-version");
  constexpr uint64_t kMax = 1 << 20;
  const int B = a.batch_text.empty() ? 32 : int(parse_count("--batch", a.batch_text, 1, kMax));
  const int T = a.seq_len_text.empty() ? 2048 : int(parse_count("--seq-len", a.seq_len_text, 1, kMaxSeqLen));
  const int H = a.heads_text.empty() ? 16 : int(parse_count("--heads", a.heads_text, 1, 1024));
  const int K = a.key_dim_text.empty() ? 128 : int(parse_count("--key-dim", a.key_dim_text, 1, 512));
  const int V = a.value_dim_text.empty() ? 128 : int(parse_count("--value-dim", a.value_dim_text, 1, 512));
  const int block = a.block_text.empty() ? 512 : int(parse_count("--block", a.block_text, 1, kMaxSeqLen));
  const int version = a.kernel_version_text.empty() ? 1 : int(parse_count("--kernel-version", a.kernel_version_text, 1, 2));
  const std::string gating = a.gating.empty() ? "channel" : a.gating;
  const std::string h0 = a.initial_state.empty() ? "zero" : a.initial_state;
  if (gating != "channel" && gating != "token")
    throw UsageError(fmt::format("--gating {}: must be channel (KDA, fla's g [B, T, H, K]) or token (GDN, [B, T, H])", gating));
  if (h0 != "zero" && h0 != "random") throw UsageError(fmt::format("--initial-state {}: must be zero or random", h0));
  const uint64_t n = uint64_t(B) * H;
  if (n > kMax) throw UsageError(fmt::format("--batch {} x --heads {}: at most {} sequences", B, H, kMax));
  const uint64_t checked = a.validate_text.empty() ? std::min<uint64_t>(4, n) : parse_count("--validate", a.validate_text, 1, n);
  if (const std::string why = gpu::recurrence_unsupported(K, V); !why.empty()) throw UsageError("bench --recurrence: " + why);
  if (const std::string why = gpu::unavailable_reason(); !why.empty())
    throw UsageError("bench --recurrence: no CUDA GPU: " + why);
  const int W = gating == "channel" ? K : 1;
  const uint64_t rows = n * uint64_t(T);
  const double host_bytes = double(rows) * (2 * K + W + 1 + V) * 8.0;
  const MemoryBudget budget = a.max_memory.empty() ? memory_budget(a.threads > 0 ? a.threads : int(std::thread::hardware_concurrency()))
                                                   : MemoryBudget{parse_size("--max-memory", a.max_memory), "--max-memory"};
  if (host_bytes > double(budget.bytes) / 10 * 9)
    throw UsageError(fmt::format("bench --recurrence: the inputs of {} sequences of {} tokens take {}, more than the {} this "
                                 "process may use ({}); use fewer", n, T, format_bytes(host_bytes),
                                 format_bytes(double(budget.bytes)), budget.source));
  std::optional<OutputFile> out;
  if (!a.output.empty()) out.emplace(a.output);

  // The inputs: model_like sequences (docs/downstream.md, "Sources"), sequence b H + h of the seed, in fla's layout.
  SeqConfig cfg;
  cfg.family = "model_like";
  cfg.seq_len = T;
  cfg.dim = K;
  cfg.value_dim = V;
  cfg.initial_state = h0;
  cfg.params = {{"gating", gating}};
  complete(cfg);
  const SequenceSource& source = find_source(cfg.family);
  source.validate(cfg);
  std::vector<double> q(rows * K), k(rows * K), g(rows * W), beta(rows), v(rows * V), h0s(h0 == "random" ? n * K * V : 0);
  std::vector<int> keep;
  for (uint64_t j = 0; j < checked; ++j) keep.push_back(int(checked == 1 ? 0 : j * (n - 1) / (checked - 1)));
  ThreadPool pool(a.threads);
  const auto t_gen = std::chrono::steady_clock::now();
  pool.parallel_for(n, [&](size_t s) {
    const Sequence seq = source.make(cfg, a.seed, s);
    const size_t b = s / H, h = s % H;
    for (int t = 0; t < T; ++t) {
      const size_t row = (b * T + t) * H + h;
      std::copy_n(&seq.q[size_t(t) * K], K, &q[row * K]);
      std::copy_n(&seq.k[size_t(t) * K], K, &k[row * K]);
      std::copy_n(&seq.g[size_t(t) * W], W, &g[row * W]);
      std::copy_n(&seq.v[size_t(t) * V], V, &v[row * V]);
      beta[row] = seq.beta[t];
    }
    if (!h0s.empty()) std::copy(seq.h0.begin(), seq.h0.end(), h0s.begin() + s * K * V);
  });
  const double gen_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_gen).count();

  gpu::RecurrenceProblem p;
  p.batch = B, p.tokens = T, p.heads = H, p.key_dim = K, p.value_dim = V, p.channel_gates = gating == "channel";
  p.scale = 1.0 / std::sqrt(double(K));  // default_scale: fla's K^-1/2
  p.q = q.data(), p.k = k.data(), p.g = g.data(), p.beta = beta.data(), p.v = v.data();
  p.h0 = h0s.empty() ? nullptr : h0s.data();
  p.version = version;
  // The check before the timing: the first pass's outputs of the kept sequences against the CPU's Recurrence.
  size_t o_differ = 0, state_differ = 0, o_values = 0, state_values = 0;
  double check_ms = 0;
  const auto check = [&](const gpu::RecurrenceTiming& first) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<size_t> od(keep.size()), sd(keep.size());
    pool.parallel_for(keep.size(), [&](size_t j) {
      const Sequence seq = source.make(cfg, a.seed, uint64_t(keep[j]));
      Recurrence r(seq, default_scale(seq));
      Mat o;
      r.advance(0, T, o);
      for (size_t i = 0; i < first.o[j].size(); ++i) od[j] += !same_bits(first.o[j][i], o.data()[i]);
      for (size_t i = 0; i < first.final_state[j].size(); ++i) sd[j] += !same_bits(first.final_state[j][i], r.state().data()[i]);
    });
    for (size_t j = 0; j < keep.size(); ++j) o_differ += od[j], state_differ += sd[j];
    o_values = keep.size() * size_t(T) * V, state_values = keep.size() * size_t(K) * V;
    check_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return o_differ == 0 && state_differ == 0;
  };
  const gpu::RecurrenceTiming timing = gpu::time_recurrence(p, block, a.repeat, keep, check);
  const bool identical = o_differ == 0 && state_differ == 0;

  const double median_ms = median_of(timing.pass_ms);
  const double token_heads = double(n) * T, rate = token_heads / (median_ms * 1e-3);
  const double tflops = rate * recurrence_flop(K, V) * 1e-12;
  // The FP64 units' peak (no tensor cores), from the device's own SMs and
  // clock as bench --pipeline takes it; NaN (null) where its architecture's
  // rates are not known.
  const std::optional<DevicePeaks> peaks = device_peaks(gpu::devices().at(0));
  const double peak_tflops = peaks ? peaks->fp64 * 1e-12 : NAN;
  const nlohmann::json devs = device_names();
  const nlohmann::json j = {
      {"devices", devs},
      {"recurrence",
       {{"batch", B}, {"seq_len", T}, {"heads", H}, {"key_dim", K}, {"value_dim", V}, {"gating", gating},
        {"initial_state", h0}, {"family", cfg.family}, {"seed", a.seed}, {"block", block}, {"repeat", a.repeat},
        {"kernel_version", version},
        {"checked_sequences", keep}, {"identical_to_cpu", identical}, {"o_values_differing", o_differ},
        {"o_values_checked", o_values}, {"state_values_differing", state_differ}, {"state_values_checked", state_values},
        {"pass_ms", timing.pass_ms}, {"median_ms", num(median_ms)}, {"token_heads_per_s", num(rate)},
        {"flop_per_token_head", recurrence_flop(K, V)}, {"fp64_tflops", num(tflops)},
        {"fp64_peak_tflops", num(peak_tflops)}, {"fraction_of_fp64_peak", num(tflops / peak_tflops)},
        {"registers", timing.registers}, {"spill_bytes", timing.spill_bytes}, {"device_bytes", timing.device_bytes},
        {"upload_ms", timing.upload_ms}, {"inputs_ms", gen_ms}, {"check_ms", check_ms}}}};
  if (out) out->commit(j.dump(1) + "\n");
  if (a.quiet || (out && out->to_stdout())) {
  } else if (a.format == "json") {
    fmt::print("{}\n", j.dump(1));
  } else {
    fmt::print("bench --recurrence: B={} T={} H={} K={} V={}, gates per {}, h0 {}, {} tokens a launch, kernel version {}, {}\n",
               B, T, H, K, V, gating, h0, std::min(block, T), version, devs.empty() ? std::string("?") : devs[0].get<std::string>());
    fmt::print("checked against the CPU recurrence on {} sequences: o {} of {} values differ, final state {} of {}{}\n",
               keep.size(), o_differ, o_values, state_differ, state_values, identical ? " (bit for bit identical)" : "");
    if (identical)
      fmt::print("median of {} passes {:.3f} ms: {:.4g} token-heads/s, {:.2f} TFLOP/s FP64 ({} FLOP a token-head){}\n",
                 timing.pass_ms.size(), median_ms, rate, tflops, recurrence_flop(K, V),
                 peaks ? fmt::format(", {:.1f}% of the device's {:.1f} TFLOP/s", 100 * tflops / peak_tflops, peak_tflops)
                       : std::string(", the device's FP64 peak not known"));
    fmt::print("kernel: {} registers, {} bytes of local memory a thread; device memory {}; inputs made in {:.0f} ms, "
               "uploaded in {:.0f} ms; the check took {:.0f} ms\n", timing.registers, timing.spill_bytes,
               format_bytes(double(timing.device_bytes)), gen_ms, timing.upload_ms, check_ms);
  }
  if (!identical) {
    std::fprintf(stderr, "bench --recurrence: the GPU recurrence is NOT bit-identical to the CPU's; not timed\n");
    set_exit_status(1);
  }
}

// The chunked backward over one sequence: the GPU's passes against the host's (bench --backward).
void bench_backward(const BenchArgs& a) {
  if (!a.axes.empty() || !a.samples_text.empty() || !a.cpu_samples_text.empty() || a.paths != "all" ||
      !a.batch_text.empty() || !a.heads_text.empty() || !a.block_text.empty() || !a.kernel_version_text.empty() ||
      !a.validate_text.empty())
    throw UsageError("bench --backward takes --seq-len, --chunk, --key-dim, --value-dim, --gating, --initial-state, "
                     "--variants, --storage, --repeat, --seed, --threads");
  const int T = a.seq_len_text.empty() ? 4096 : int(parse_count("--seq-len", a.seq_len_text, 1, kMaxSeqLen));
  const int C = a.chunk_text.empty() ? 64 : int(parse_count("--chunk", a.chunk_text, 2, 64));
  const int K = a.key_dim_text.empty() ? 128 : int(parse_count("--key-dim", a.key_dim_text, 1, 256));
  const int V = a.value_dim_text.empty() ? 128 : int(parse_count("--value-dim", a.value_dim_text, 1, 256));
  const int nv = a.variants_text.empty() ? 9 : int(parse_count("--variants", a.variants_text, 1, 64));
  const std::string gating = a.gating.empty() ? "channel" : a.gating;
  const std::string h0 = a.initial_state.empty() ? "zero" : a.initial_state;
  const std::string storage = a.storage.empty() ? "fla_chunk_kda" : a.storage;
  if (gating != "channel" && gating != "token")
    throw UsageError(fmt::format("--gating {}: must be channel (KDA) or token (GDN)", gating));
  if (h0 != "zero" && h0 != "random") throw UsageError(fmt::format("--initial-state {}: must be zero or random", h0));
  if (T % C) throw UsageError(fmt::format("--seq-len {} is not a whole number of chunks of --chunk {}", T, C));
  const StoragePreset& fwd = find_storage(storage);
  const BackwardPreset& bwd = find_backward_storage(storage);
  if (const std::string why = gpu::unavailable_reason(); !why.empty())
    throw UsageError("bench --backward: no CUDA GPU: " + why);
  std::optional<OutputFile> out;
  if (!a.output.empty()) out.emplace(a.output);

  SeqConfig cfg;
  cfg.family = "model_like";
  cfg.seq_len = T, cfg.chunk = C, cfg.dim = K, cfg.value_dim = V, cfg.initial_state = h0, cfg.storage = storage;
  cfg.params = {{"gating", gating}};
  complete(cfg);
  const SequenceSource& source = find_source(cfg.family);
  source.validate(cfg);
  const Sequence s = source.make(cfg, a.seed, 0);
  const Upstream up = upstream_of(s, a.seed, 0);
  const double scale = default_scale(s);
  const int N = T / C, W = s.gate_width();
  ThreadPool pool(a.threads);
  // The variants: as seq's, the preset's (v = 0 and odd) and FP64 (even), every one with the exact inverse.
  const auto forward_of = [&](int v) -> const StoragePreset& { return v == 0 || v % 2 ? fwd : fp64_storage(); };
  const auto backward_of = [&](int v) -> const BackwardPreset& { return v == 0 || v % 2 ? bwd : fp64_backward(); };
  const auto t_setup = std::chrono::steady_clock::now();
  std::vector<Mat> inverses(N);
  pool.parallel_for(N, [&](size_t n) { inverses[n] = compute_gold(chunk_sample(s, C, int(n))).inv; });
  std::vector<std::vector<double>> entering(N, std::vector<double>(size_t(nv) * K * V));  // [chunk][variant][K][V]
  pool.parallel_for(nv, [&](size_t v) {
    ChunkedForward f(s, C, forward_of(int(v)), scale);
    Mat rows;
    for (int n = 0; n < N; ++n) {
      std::copy(f.state().data(), f.state().data() + K * V, entering[n].data() + v * K * V);
      f.advance(n, inverses[n], rows);
    }
  });
  std::vector<double> packed(size_t(nv) * C * C);
  const double setup_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_setup).count();

  // The host: a variant a thread, every chunk in reverse.
  std::vector<Gradients> host(nv, Gradients(s));
  std::vector<Mat> host_ds(nv);
  const auto t_host = std::chrono::steady_clock::now();
  pool.parallel_for(nv, [&](size_t v) {
    ChunkedBackward b(s, C, forward_of(int(v)), backward_of(int(v)), up, scale);
    for (int n = N - 1; n >= 0; --n) {
      const Mat state = Eigen::Map<const Mat>(entering[n].data() + v * K * V, K, V);
      b.step(n, inverses[n], state, host[v]);
    }
    host_ds[v] = b.state_grad();
  });
  const double host_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_host).count();

  // The GPU: every variant a chunk, the chunks in reverse, each chunk's rows brought back (as seq does).
  std::vector<double> dq(size_t(nv) * C * K), dk(dq.size()), dv(size_t(nv) * C * V), dg(size_t(nv) * C * W),
      dbeta(size_t(nv) * C), ds(size_t(nv) * K * V);
  std::vector<double> pass_ms;
  size_t differ = 0, checked = 0;
  std::vector<backward_step::BackwardStores> bs;
  std::vector<Stores> fs;
  for (int v = 0; v < nv; ++v) fs.push_back(forward_of(v)), bs.push_back(backward_stores_of(backward_of(v)));
  const auto count = [&](const double* got, const Mat& want, Eigen::Index row0, size_t v, size_t width) {
    for (Eigen::Index r = 0; r < C; ++r)
      for (size_t c = 0; c < width; ++c, ++checked)
        differ += !same_bits(got[(v * C + size_t(r)) * width + c], want(row0 + r, Eigen::Index(c)));
  };
  for (int pass = 0; pass < a.repeat; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
    gpu::DeviceChunkedBackward dev(C, K, V, W, scale, fs, bs, nullptr);
    for (int n = N - 1; n >= 0; --n) {
      for (int v = 0; v < nv; ++v) std::copy(inverses[n].data(), inverses[n].data() + C * C, packed.data() + size_t(v) * C * C);
      const size_t r0 = size_t(n) * C;
      dev.step({&s.q[r0 * K], &s.k[r0 * K], &s.v[r0 * V], &s.g[r0 * W], &s.beta[r0], &up.d_o(Eigen::Index(r0), 0)},
               packed.data(), entering[n].data(), {dq.data(), dk.data(), dv.data(), dg.data(), dbeta.data()});
      if (pass == 0)  // the check, out of the timing of the passes after it
        for (size_t v = 0; v < size_t(nv); ++v) {
          const Eigen::Index row0 = Eigen::Index(r0);
          count(dq.data(), host[v].dq, row0, v, K), count(dk.data(), host[v].dk, row0, v, K);
          count(dv.data(), host[v].dv, row0, v, V), count(dg.data(), host[v].dg, row0, v, W);
          count(dbeta.data(), host[v].dbeta, row0, v, 1);
        }
    }
    dev.state_grad(ds.data());
    pass_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (pass == 0)
      for (size_t v = 0; v < size_t(nv); ++v)
        for (size_t i = 0; i < size_t(K) * V; ++i, ++checked) differ += !same_bits(ds[v * K * V + i], host_ds[v].data()[i]);
  }
  const bool identical = differ == 0;
  // The first pass did the check as it went: the median is of the others where there are.
  const double median_ms = median_of(pass_ms.size() > 1 ? std::vector<double>(pass_ms.begin() + 1, pass_ms.end()) : pass_ms);
  const double tokens = double(T) * nv;
  const double gpu_rate = tokens / (median_ms * 1e-3), host_rate = tokens / (host_ms * 1e-3);
  const nlohmann::json devs = device_names();
  const nlohmann::json j = {
      {"devices", devs},
      {"backward",
       {{"seq_len", T}, {"chunk", C}, {"key_dim", K}, {"value_dim", V}, {"gating", gating}, {"initial_state", h0},
        {"family", cfg.family}, {"storage", storage}, {"variants", nv}, {"seed", a.seed}, {"repeat", a.repeat},
        {"threads", int(pool.size())}, {"identical_to_host", identical}, {"values_differing", differ},
        {"values_checked", checked}, {"gpu_pass_ms", pass_ms}, {"gpu_median_ms", num(median_ms)},
        {"gpu_token_variants_per_s", num(gpu_rate)}, {"host_ms", host_ms}, {"host_token_variants_per_s", num(host_rate)},
        {"gpu_over_host", num(gpu_rate / host_rate)}, {"setup_ms", setup_ms}}}};
  if (out) out->commit(j.dump(1) + "\n");
  if (a.quiet || (out && out->to_stdout())) {
  } else if (a.format == "json") {
    fmt::print("{}\n", j.dump(1));
  } else {
    fmt::print("bench --backward: T={} C={} K={} V={}, gates per {}, h0 {}, {} variants ({}, FP64), {}\n", T, C, K, V,
               gating, h0, nv, storage, devs.empty() ? std::string("?") : devs[0].get<std::string>());
    fmt::print("checked against the host's ChunkedBackward: {} of {} values differ{}\n", differ, checked,
               identical ? " (bit for bit identical)" : "");
    if (identical)
      fmt::print("GPU: median of {} passes {:.1f} ms, {:.4g} token-variants/s; host ({} threads): {:.1f} ms, {:.4g} "
                 "token-variants/s; GPU/host {:.2f}x\n", std::max<size_t>(1, pass_ms.size() - 1), median_ms, gpu_rate,
                 pool.size(), host_ms, host_rate, gpu_rate / host_rate);
  }
  if (!identical) {
    std::fprintf(stderr, "bench --backward: the GPU backward is NOT bit-identical to the host's\n");
    set_exit_status(1);
  }
}

}  // namespace

void set_bench_command(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  auto* cmd = app.add_subcommand("bench", "Time each usable path and method (validated against the emulated path first)");
  cmd->add_option("-a,--axis", args->axes, "axis, as for run: name=value, name=[v1,v2], name=[start:stop:step] "
                                           "(default family=floor, chunk=16, dim=128, method=neumann)");
  cmd->add_option("--samples", args->samples_text, "samples per timed run of the GPU paths (default 65536)");
  cmd->add_option("--cpu-samples", args->cpu_samples_text, "at most this many for the CPU paths (default 4096)");
  cmd->add_option("--validate", args->validate_text, "samples checked against the emulated path first (default 256)");
  cmd->add_option("--repeat", args->repeat_text, "timed runs per path, 1 to 1000; the median is reported (default 5)");
  cmd->add_option("--seed", args->seed_text, "seed (default 0)");
  cmd->add_option("--threads", args->threads_text, "worker threads, 0 to 1024 (default 0: all cores)");
  cmd->add_option("--max-memory", args->max_memory, "memory a timed run may use, e.g. 8G (default: what is free)");
  cmd->add_flag("-q,--quiet", args->quiet, "print nothing but errors (no progress bar; the results only with -o)");
  cmd->add_option("--paths", args->paths, "comma-separated paths, or all usable (default)");
  cmd->add_option("--format", args->format, "text or json")->check(CLI::IsMember({"text", "json"}));
  cmd->add_option("-o,--output", args->output, "also write the JSON here (replaced atomically; - for stdout)");
  cmd->add_flag("--recurrence", args->recurrence,
                "time the FP64 token recurrence on the GPU instead (checked bit for bit against the CPU's first)");
  cmd->add_option("--batch", args->batch_text, "--recurrence: sequences B (default 32)");
  cmd->add_option("--seq-len", args->seq_len_text, "--recurrence, --backward: tokens T (default 2048, 4096)");
  cmd->add_option("--heads", args->heads_text, "--recurrence: heads H (default 16)");
  cmd->add_option("--key-dim", args->key_dim_text, "--recurrence: K, 16, 32, 64 or 128; --backward: 1 to 256 (default 128)");
  cmd->add_option("--value-dim", args->value_dim_text, "--recurrence: V, 1 to 512; --backward: 1 to 256 (default 128)");
  cmd->add_option("--gating", args->gating, "--recurrence, --backward: channel (KDA, default) or token (GDN)");
  cmd->add_option("--initial-state", args->initial_state, "--recurrence, --backward: zero (default) or random");
  cmd->add_option("--block", args->block_text, "--recurrence: tokens a launch advances (default 512)");
  cmd->add_flag("--pipeline", args->pipeline,
                "the GPU pipeline of run --pipeline device, stage by stage, against the device's peak rates (a roofline: "
                "docs/roofline.md); takes -a, --paths (default gold,kernel), --metrics, --samples (default 4194304), "
                "--validate (default 4096), --repeat, --seed");
  cmd->add_option("--metrics", args->metrics, "--pipeline: the metrics the entries report, as run --metrics (default every one)");
  cmd->add_flag("--backward", args->backward,
                "time the chunked backward over one sequence on the GPU and the host instead (checked bit for bit)");
  cmd->add_option("--chunk", args->chunk_text, "--backward: C, 2 to 64 (default 64)");
  cmd->add_option("--variants", args->variants_text, "--backward: variants stepped together, 1 to 64 (default 9)");
  cmd->add_option("--storage", args->storage, "--backward: the variants' storage preset (default fla_chunk_kda)");
  cmd->add_option("--kernel-version", args->kernel_version_text,
                  "--recurrence: 1 (eight lanes a column pair, default) or 2 (sixteen: half the registers a lane)");
  cmd->callback([args] {
    BenchArgs a = *args;
    constexpr uint64_t kMax = 1'000'000'000'000;
    if (!a.samples_text.empty()) a.samples = parse_count("--samples", a.samples_text, 1, kMax);
    if (!a.cpu_samples_text.empty()) a.cpu_samples = parse_count("--cpu-samples", a.cpu_samples_text, 1, kMax);
    if (!a.validate_text.empty()) a.validate = parse_count("--validate", a.validate_text, 0, kMax);
    if (!a.repeat_text.empty()) a.repeat = int(parse_count("--repeat", a.repeat_text, 1, 1000));
    if (!a.seed_text.empty()) a.seed = parse_count("--seed", a.seed_text, 0, UINT64_MAX);
    if (!a.threads_text.empty()) a.threads = int(parse_count("--threads", a.threads_text, 0, 1024));
    if (!a.backward && (!a.chunk_text.empty() || !a.variants_text.empty() || !a.storage.empty()))
      throw UsageError("bench: --chunk, --variants and --storage are --backward's");
    if (int(a.recurrence) + int(a.backward) + int(a.pipeline) > 1)
      throw UsageError("bench: --recurrence, --backward and --pipeline are three benchmarks: one at a time");
    if (a.pipeline) return bench_pipeline(a);
    if (!a.metrics.empty()) throw UsageError("bench: --metrics is --pipeline's");
    if (a.recurrence) return bench_recurrence(a);
    if (a.backward) return bench_backward(a);
    if (!a.batch_text.empty() || !a.seq_len_text.empty() || !a.heads_text.empty() || !a.key_dim_text.empty() ||
        !a.value_dim_text.empty() || !a.block_text.empty() || !a.gating.empty() || !a.initial_state.empty() ||
        !a.kernel_version_text.empty())
      throw UsageError("bench: --batch, --seq-len, --heads, --key-dim, --value-dim, --gating, --initial-state, --block "
                       "and --kernel-version are --recurrence's");
    bench(a);
  });
}

}  // namespace chunkinv::cli
