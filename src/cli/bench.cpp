// chunkinv bench: samples per second of each usable path on one
// configuration. Every path is first checked against the emulated path on a
// small batch (the kernel must match it bit for bit), then timed: the GPU's
// own time (CUDA events: upload, launches, download) apart from the host's
// work (packing, input generation, gold, metrics).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "core/fp.hpp"
#include "core/thread_pool.hpp"
#include "driver/experiment.hpp"
#include "inputs/family.hpp"
#include "metrics/metrics.hpp"
#include "paths/gold/gold.hpp"
#include "paths/gpu.hpp"
#include "paths/path.hpp"
#ifdef CHUNKINV_HAVE_CUDA
#include "paths/kernel/gpu_timing.hpp"
#endif

namespace chunkinv::cli {
namespace {

struct BenchArgs {
  std::string family = "floor";
  int chunk = 16, dim = 128;
  std::vector<std::string> params;  // family parameters, name=value
  uint64_t samples = 65536;
  uint64_t cpu_samples = 4096;  // the CPU paths are timed on at most this many
  uint64_t validate = 256;
  int repeat = 5;
  uint64_t seed = 0;
  int threads = 0;
  std::string paths = "all";
  std::string format = "text";
  std::string output;
};

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Share of identical elements of `path` and `reference`, per output.
struct Agreement {
  size_t decay = 0, decay_n = 0, l = 0, l_n = 0, inv = 0, inv_n = 0, stable = 0, stable_n = 0;
  bool all() const { return decay == decay_n && l == l_n && inv == inv_n && stable == stable_n; }
};

bool same_bits(double a, double b, bool bf) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return bf ? bf16_bits(a) == bf16_bits(b) : fp16_bits(a) == fp16_bits(b);
}

void count_same(const Mat& a, const Mat& b, size_t& same, size_t& n) {
  for (Eigen::Index i = 0; i < a.size() && i < b.size(); ++i) same += same_bits(a.data()[i], b.data()[i], false);
  n += size_t(a.size());
}

Agreement agreement(const std::vector<PathOutput>& p, const std::vector<PathOutput>& ref) {
  Agreement a;
  for (size_t s = 0; s < p.size(); ++s) {
    for (size_t r = 0; r < p[s].decay.size(); ++r) {
      a.decay += same_bits(p[s].decay[r], ref[s].decay[r], true) + same_bits(p[s].inv_decay[r], ref[s].inv_decay[r], true);
      a.decay_n += 2;
    }
    count_same(p[s].L, ref[s].L, a.l, a.l_n);
    count_same(p[s].run.inv, ref[s].run.inv, a.inv, a.inv_n);
    count_same(p[s].stable.inv, ref[s].stable.inv, a.stable, a.stable_n);
  }
  return a;
}

double share(size_t k, size_t n) { return n ? double(k) / double(n) : 1.0; }

Configuration make_config(const BenchArgs& a) {
  Configuration c;
  c.family = a.family;
  c.chunk = a.chunk;
  c.dim = a.dim;
  const Family& f = find_family(a.family);
  for (const FamilyParam& p : f.params())
    if (!p.default_value.is_null()) c.params[p.name] = p.default_value;
  for (const std::string& kv : a.params) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos) throw UsageError("bench: --param wants name=value, not \"" + kv + "\"");
    const std::string name = kv.substr(0, eq);
    nlohmann::json v;
    try {
      v = nlohmann::json::parse(kv.substr(eq + 1));
    } catch (const std::exception&) {
      v = kv.substr(eq + 1);
    }
    c.params[name] = v;
  }
  f.validate(c);
  f.complete(c);
  return c;
}

struct PathResult {
  std::string name;
  uint64_t samples = 0;
  double wall_s = NAN;     // median run_batch
  double upload_ms = NAN, compute_ms = NAN, download_ms = NAN, pack_ms = NAN;
  double metrics_s = NAN;  // evaluate_path over the timed samples
  Agreement agree;
  bool validated = false;
};

void bench(const BenchArgs& a) {
  if (a.samples == 0 || a.repeat < 1) throw UsageError("bench: --samples and --repeat must be at least 1");
  const Configuration config = make_config(a);
  std::vector<std::string> names = a.paths == "all" ? path_names_usable() : parse_paths(a.paths);
  if (std::find(names.begin(), names.end(), "gold") == names.end()) names.insert(names.begin(), "gold");
  ThreadPool pool(a.threads);
  const Family& family = find_family(config.family);

  // Host work shared by every path: inputs and gold.
  auto t0 = Clock::now();
  std::vector<Sample> samples(a.samples);
  pool.parallel_for(samples.size(), [&](size_t i) { samples[i] = family.make(config, a.seed, i); });
  const double inputs_s = seconds_since(t0);
  t0 = Clock::now();
  std::vector<GoldOutput> gold(samples.size());
  pool.parallel_for(samples.size(), [&](size_t i) { gold[i] = compute_gold(samples[i]); });
  const double gold_s = seconds_since(t0);

  // The reference of the validation: the emulated path on the first samples.
  const size_t nv = std::min<size_t>(a.validate, samples.size());
  const std::span<const Sample> vs(samples.data(), nv);
  const std::span<const GoldOutput> vg(gold.data(), nv);
  auto emulated = make_path("emulated");
  std::vector<PathOutput> ref(nv);
  emulated->run_batch(vs, vg, ref, pool, false);

  std::vector<PathResult> results;
  bool kernel_differs = false;
  for (const std::string& name : names) {
    PathResult r;
    r.name = name;
    if (name == "gold") {
      r.samples = samples.size();
      r.wall_s = gold_s;
      results.push_back(r);
      continue;
    }
    auto path = make_path(name);
    const bool gpu_path = name == "kernel" || name == "cublas";
    // Validate before timing.
    std::vector<PathOutput> check(nv);
    path->run_batch(vs, vg, check, pool, false);
    r.agree = agreement(check, ref);
    r.validated = true;
    if (name == "kernel" && !r.agree.all()) kernel_differs = true;

    const size_t n = gpu_path ? samples.size() : std::min<size_t>(samples.size(), a.cpu_samples);
    r.samples = n;
    const std::span<const Sample> ts(samples.data(), n);
    const std::span<const GoldOutput> tg(gold.data(), n);
    std::vector<PathOutput> out(n);
    if (gpu_path) path->run_batch(ts, tg, out, pool, false);  // warm-up: buffers, module load
    std::vector<double> wall, up, comp, down, pack;
    for (int k = 0; k < a.repeat; ++k) {
      t0 = Clock::now();
      path->run_batch(ts, tg, out, pool, false);
      wall.push_back(seconds_since(t0));
#ifdef CHUNKINV_HAVE_CUDA
      if (gpu_path) {
        const gpu::BatchTiming bt = gpu::last_batch_timing(name);
        up.push_back(bt.upload_ms);
        comp.push_back(bt.compute_ms);
        down.push_back(bt.download_ms);
        pack.push_back(bt.host_ms);
      }
#endif
    }
    r.wall_s = median(wall);
    r.upload_ms = median(up);
    r.compute_ms = median(comp);
    r.download_ms = median(down);
    r.pack_ms = median(pack);
    t0 = Clock::now();
    pool.parallel_for(n, [&](size_t i) { (void)evaluate_path(gold[i], out[i]); });
    r.metrics_s = seconds_since(t0);
    results.push_back(r);
  }

  nlohmann::json j = {{"family", config.family},
                      {"chunk", config.chunk},
                      {"dim", config.dim},
                      {"params", config.params},
                      {"samples", a.samples},
                      {"validate_samples", nv},
                      {"repeat", a.repeat},
                      {"threads", pool.size()},
                      {"inputs_s", inputs_s},
                      {"gold_s", gold_s}};
  nlohmann::json devs = nlohmann::json::array();
  for (const auto& d : gpu::devices()) devs.push_back(fmt::format("{} (cc {}.{})", d.name, d.cc_major, d.cc_minor));
  j["devices"] = devs;
  j["paths"] = nlohmann::json::array();
  auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  for (const PathResult& r : results) {
    nlohmann::json p = {{"path", r.name},
                        {"samples", r.samples},
                        {"wall_s", num(r.wall_s)},
                        {"samples_per_s", num(double(r.samples) / r.wall_s)},
                        {"upload_ms", num(r.upload_ms)},
                        {"compute_ms", num(r.compute_ms)},
                        {"download_ms", num(r.download_ms)},
                        {"host_pack_ms", num(r.pack_ms)},
                        {"compute_samples_per_s", num(double(r.samples) / (r.compute_ms * 1e-3))},
                        {"metrics_s", num(r.metrics_s)}};
    if (r.validated)
      p["identical_to_emulated"] = {{"decays", share(r.agree.decay, r.agree.decay_n)},
                                    {"L", share(r.agree.l, r.agree.l_n)},
                                    {"INV", share(r.agree.inv, r.agree.inv_n)},
                                    {"stable_INV", share(r.agree.stable, r.agree.stable_n)}};
    j["paths"].push_back(p);
  }
  if (!a.output.empty()) {
    std::FILE* f = std::fopen(a.output.c_str(), "w");
    if (!f) throw UsageError("bench: cannot write " + a.output);
    std::fputs((j.dump(1) + "\n").c_str(), f);
    std::fclose(f);
  }
  if (a.format == "json") {
    fmt::print("{}\n", j.dump(1));
  } else {
    fmt::print("bench {} chunk={} dim={} samples={} (CPU paths: {}), {} threads, median of {}\n", config.family,
               config.chunk, config.dim, a.samples, std::min<uint64_t>(a.samples, a.cpu_samples), pool.size(),
               a.repeat);
    fmt::print("host: inputs {:.3f} s ({:.3g} samples/s), gold {:.3f} s ({:.3g} samples/s)\n", inputs_s,
               double(a.samples) / inputs_s, gold_s, double(a.samples) / gold_s);
    fmt::print("{:<9} {:>8} {:>12} {:>11} {:>11} {:>11} {:>11} {:>15} {:>10}  {}\n", "path", "samples", "samples/s",
               "upload ms", "launch ms", "download ms", "host ms", "launch smp/s", "metrics s",
               "identical to emulated (decays / L / INV / stable INV)");
    for (const PathResult& r : results) {
      auto ms = [](double v) { return std::isfinite(v) ? fmt::format("{:.3f}", v) : std::string("-"); };
      const std::string agree =
          r.validated ? fmt::format("{:.4f}% / {:.4f}% / {:.4f}% / {:.4f}%", 100 * share(r.agree.decay, r.agree.decay_n),
                                    100 * share(r.agree.l, r.agree.l_n), 100 * share(r.agree.inv, r.agree.inv_n),
                                    100 * share(r.agree.stable, r.agree.stable_n))
                      : std::string("(reference)");
      fmt::print("{:<9} {:>8} {:>12.4g} {:>11} {:>11} {:>11} {:>11} {:>15} {:>10}  {}\n", r.name, r.samples,
                 double(r.samples) / r.wall_s, ms(r.upload_ms), ms(r.compute_ms), ms(r.download_ms), ms(r.pack_ms),
                 std::isfinite(r.compute_ms) ? fmt::format("{:.4g}", double(r.samples) / (r.compute_ms * 1e-3)) : "-",
                 std::isfinite(r.metrics_s) ? fmt::format("{:.3f}", r.metrics_s) : "-", r.name == "gold" ? "" : agree);
    }
  }
  if (kernel_differs) {
    std::fprintf(stderr, "bench: the kernel path is NOT bit-identical to the emulated path on this configuration\n");
    set_exit_status(1);
  }
}

}  // namespace

void set_bench_command(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  auto* cmd = app.add_subcommand("bench", "Time each usable path (validated against the emulated path first)");
  cmd->add_option("--family", args->family, "input family (default floor)");
  cmd->add_option("--chunk", args->chunk, "chunk C (default 16)");
  cmd->add_option("--dim", args->dim, "head dim d (default 128)");
  cmd->add_option("--param", args->params, "family parameter, name=value (e.g. decay_floor=-5)");
  cmd->add_option("--samples", args->samples, "samples per timed batch of the GPU paths (default 65536)");
  cmd->add_option("--cpu-samples", args->cpu_samples, "at most this many for the CPU paths (default 4096)");
  cmd->add_option("--validate", args->validate, "samples checked against the emulated path first (default 256)");
  cmd->add_option("--repeat", args->repeat, "timed runs per path; the median is reported (default 5)");
  cmd->add_option("--seed", args->seed, "seed (default 0)");
  cmd->add_option("--threads", args->threads, "worker threads (default: all cores)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--paths", args->paths, "comma-separated paths, or all usable (default)");
  cmd->add_option("--format", args->format, "text or json")->check(CLI::IsMember({"text", "json"}));
  cmd->add_option("-o,--output", args->output, "also write the JSON here");
  cmd->callback([args] { bench(*args); });
}

}  // namespace chunkinv::cli
