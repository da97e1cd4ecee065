// chunkinv inspect: one sample in full — its inputs, the gold, and for each
// path its decays and L, and for each method on it the intermediates it
// built (Neumann's powers, ...), its inverse and its metrics. As aligned
// text or as JSON (docs/inputs.md). The sample goes through the same runner
// as `run`, so what is shown is what `run` measures.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "core/limits.hpp"
#include "core/thread_pool.hpp"
#include "driver/runner.hpp"
#include "driver/spec.hpp"
#include "inputs/data_families.hpp"
#include "inputs/family.hpp"
#include "inputs/tensor_set.hpp"
#include "inputs/witness_summary.hpp"
#include "metrics/metrics.hpp"
#include "paths/candidate/candidate.hpp"
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
  std::string export_from;  // --export-path: a path whose L and INV go beside the exported samples
  std::string candidate;    // --candidate: a scored kernel's L and/or INV, shown beside the gold
  bool brief = false;       // --brief: one screen, no matrices
  bool quiet = false;       // -q: nothing but errors (for --export)
  uint64_t count = 1;
  std::string seed_text, index_text, count_text, max_memory;  // as given; read strictly before any work
};

// Everything shown for one (path, method), or the gold's own entry.
struct Shown {
  std::string path, method;
  const MethodSpec* spec = nullptr;
  bool reference = false;
  PathOutput out;
  const MetricSet* metrics = nullptr;
  std::vector<double> values;
};

// Keeps the one sample's outputs.
class InspectSink final : public Sink {
 public:
  InspectSink(const std::vector<PathChoice>& paths) : paths_(paths) {}
  void consume(const BatchResult& b) override {
    sample = b.samples[0];
    gold = b.gold[0];
    for (size_t t = 0; t < b.group->tasks.size(); ++t) {
      const Task& task = b.group->tasks[t];
      Shown s{std::string(paths_[task.path].spec->name), task.method.label(), task.method.spec, task.reference,
              {}, task.metrics, b.values[t]};
      if (!task.reference) s.out = b.outputs[t][0];
      shown.push_back(std::move(s));
    }
  }
  Sample sample;
  GoldOutput gold;
  std::vector<Shown> shown;

 private:
  const std::vector<PathChoice>& paths_;
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

json run_json(const MethodSpec& m, const InverseRun& r) {
  json inter = json::array();
  for (const Intermediate& x : r.intermediates) inter.push_back({{"label", x.label}, {"matrix", mat_json(x.m)}});
  json diag = json::object();
  for (size_t k = 0; k < m.diagnostics.size() && k < r.diagnostics.size(); ++k)
    diag[m.diagnostics[k].name] = json_number(r.diagnostics[k]);
  return {{"INV", mat_json(r.inv)}, {"diagnostics", diag}, {"intermediates", inter}};
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

std::string run_text(const MethodSpec& m, const InverseRun& r, const std::string& indent) {
  std::string o;
  for (const Intermediate& x : r.intermediates) o += fmt::format("{}{}:\n", indent, x.label) + mat_text(x.m, indent);
  std::string diag;
  for (size_t k = 0; k < m.diagnostics.size() && k < r.diagnostics.size(); ++k)
    diag += fmt::format("{}{} {}", diag.empty() ? "" : ", ", m.diagnostics[k].name, num(r.diagnostics[k]));
  o += fmt::format("{}INV{}:\n", indent, diag.empty() ? "" : " (" + diag + ")") + mat_text(r.inv, indent);
  return o;
}

std::string metrics_text(const std::vector<MetricInfo>& infos, const std::vector<double>& v, const std::string& indent) {
  std::string s;
  for (size_t i = 0; i < infos.size(); ++i) {
    const bool integral = std::isfinite(v[i]) && v[i] == std::floor(v[i]) && std::fabs(v[i]) < 1e15;
    s += fmt::format("{}{:<26} {}\n", indent, infos[i].name, integral ? fmt::format("{}", static_cast<long long>(v[i])) : num(v[i]));
  }
  return s;
}

// Where a matrix's errors against the gold sit (inspect --candidate): the
// largest elements, and the largest error of each band of rows and columns
// relative to the gold's RMS, so that a bad row, column or corner shows at
// a glance. A non-finite element is an infinite error.
std::string error_view(const std::string& name, const Mat& got, const Mat& gold, const std::string& indent) {
  const Eigen::Index c = gold.rows();
  const double rms = std::sqrt(gold.squaredNorm() / double(gold.size()));
  const auto err = [&](Eigen::Index i, Eigen::Index j) {
    const double d = std::fabs(got(i, j) - gold(i, j));
    return std::isfinite(d) ? d : INFINITY;
  };
  std::vector<std::pair<Eigen::Index, Eigen::Index>> at;
  for (Eigen::Index i = 0; i < c; ++i)
    for (Eigen::Index j = 0; j < c; ++j) at.push_back({i, j});
  // Largest first; ties in row-major order, so the view is the same on every machine.
  std::stable_sort(at.begin(), at.end(), [&](const auto& a, const auto& b) { return err(a.first, a.second) > err(b.first, b.second); });
  std::string o = fmt::format("{}{} against the gold: RMS(gold) {}, largest |error| at\n", indent, name, num(rms));
  for (size_t k = 0; k < std::min<size_t>(5, at.size()); ++k) {
    const auto [i, j] = at[k];
    if (err(i, j) == 0) break;
    o += fmt::format("{}  ({:>2}, {:>2}): gold {:>10}, got {:>10}, |error| {:>10}\n", indent, i, j, num(gold(i, j)),
                     num(got(i, j)), num(err(i, j)));
  }
  if (at.empty() || err(at[0].first, at[0].second) == 0) return o + indent + "  (none: equal to the gold)\n";
  const Eigen::Index band = c <= 16 ? 4 : 8, bands = (c + band - 1) / band;
  o += fmt::format("{}  max |error| / RMS(gold) per band of {} rows (down) x {} columns (across):\n{}  rows  ", indent, band,
                   band, indent);
  for (Eigen::Index bj = 0; bj < bands; ++bj) o += fmt::format(" {:>9}", fmt::format("{}-{}", bj * band, std::min(c, (bj + 1) * band) - 1));
  o += "\n";
  for (Eigen::Index bi = 0; bi < bands; ++bi) {
    o += fmt::format("{}  {:>5} ", indent, fmt::format("{}-{}", bi * band, std::min(c, (bi + 1) * band) - 1));
    for (Eigen::Index bj = 0; bj < bands; ++bj) {
      double m = 0;
      for (Eigen::Index i = bi * band; i < std::min(c, (bi + 1) * band); ++i)
        for (Eigen::Index j = bj * band; j < std::min(c, (bj + 1) * band); ++j) m = std::max(m, err(i, j));
      o += fmt::format(" {:>9}", m == 0 ? std::string(".") : rms > 0 ? num(m / rms) : num(m));
    }
    o += "\n";
  }
  return o;
}

// The metrics a one-line summary shows, where the entry has them.
std::string metrics_line(const std::vector<MetricInfo>& infos, const std::vector<double>& v) {
  std::string s;
  for (const char* m : {"inv_total_rel_rmse", "l_rel_rmse", "inv_method_only_rel_rmse", "inv_gold_l_rel_rmse", "inv_finite",
                        "inverse_residual", "inv_max_abs"})
    for (size_t i = 0; i < infos.size(); ++i)
      if (infos[i].name == std::string_view(m))
        s += fmt::format("{}{} {}", s.empty() ? "" : ", ", m, infos[i].kind == MetricKind::kFlag ? fmt::format("{}", v[i]) : num(v[i]));
  return s;
}

// ---------------------------------------------------------------------------

// --export-path: what one path and method made of samples [index, index +
// count): L, INV and the decays, [N, C, C] and [N, C], as `score --candidate`
// reads them. FP32 where every value is one (BF16/FP16/FP32 outputs), else FP64.
class ExportSink final : public Sink {
 public:
  explicit ExportSink(size_t task) : task_(task) {}
  void consume(const BatchResult& b) override {
    const bool ref = b.group->tasks[task_].reference;
    for (size_t i = 0; i < b.samples.size(); ++i) {
      const Mat& l = ref ? b.gold[i].L : b.outputs[task_][i].l.L;
      const Mat& inv = ref ? b.gold[i].inv : b.outputs[task_][i].on_path_l.inv;
      L.insert(L.end(), l.data(), l.data() + l.size());
      INV.insert(INV.end(), inv.data(), inv.data() + inv.size());
      if (ref) continue;
      const LForm& f = b.outputs[task_][i].l;
      decay.insert(decay.end(), f.decay.begin(), f.decay.end());
      inv_decay.insert(inv_decay.end(), f.inv_decay.begin(), f.inv_decay.end());
    }
  }
  std::vector<double> L, INV, decay, inv_decay;

 private:
  size_t task_;
};

DType exact_type(const std::vector<double>& v) {
  for (double x : v)
    if (!std::isnan(x) && static_cast<double>(static_cast<float>(x)) != x) return DType::kF64;
  return DType::kF32;
}

TensorMap path_tensors(const InspectArgs& a, const std::vector<Point>& points) {
  std::vector<PathChoice> paths = parse_paths(a.export_from);
  if (paths.size() != 1) throw UsageError(fmt::format("--export-path {}: name one path", a.export_from));
  const bool gold = paths[0].spec->reference;
  if (!gold) paths.insert(paths.begin(), PathChoice{&reference_path(), {}});
  RunnerOptions ro;
  ro.threads = 0;
  Runner runner(paths, ro);
  const Plan plan = runner.plan(points);
  const size_t want = gold ? 0 : 1;
  std::vector<size_t> tasks;
  const auto& group = plan.groups[0];
  for (size_t t = 0; t < group.tasks.size(); ++t)
    if (group.tasks[t].path == want && (!gold || group.tasks[t].reference)) tasks.push_back(t);
  if (gold && points.size() != 1)
    throw UsageError("--export-path gold writes the gold's own L and inverse: leave out the method axis");
  if (tasks.size() != 1)
    throw UsageError(fmt::format("--export-path {}: {}", a.export_from,
                                 tasks.empty() ? (plan.skipped.empty() ? std::string("the path runs no method here") : plan.skipped[0])
                                               : std::string("give one method (-a method=M): its INV is written")));
  ExportSink sink(tasks[0]);
  runner.run(group, a.seed, {a.index, a.count}, sink);
  const int64_t n = static_cast<int64_t>(a.count), c = group.config.chunk;
  TensorMap m;
  m["L"] = {exact_type(sink.L), {n, c, c}, std::move(sink.L)};
  m["INV"] = {exact_type(sink.INV), {n, c, c}, std::move(sink.INV)};
  if (sink.decay.size() == static_cast<size_t>(n * c)) m["decay"] = {exact_type(sink.decay), {n, c}, std::move(sink.decay)};
  if (sink.inv_decay.size() == static_cast<size_t>(n * c))
    m["inv_decay"] = {exact_type(sink.inv_decay), {n, c}, std::move(sink.inv_decay)};
  return m;
}

void inspect(const InspectArgs& a) {
  if (a.format != "text" && a.format != "json")
    throw UsageError(fmt::format("--format {} is not text or json", a.format));
  if (!a.inputs.empty() && !a.family.empty() && a.family != "file")
    throw UsageError("give either --inputs PATH or --family NAME, not both");
  if (!a.export_from.empty() && a.export_path.empty()) throw UsageError("--export-path goes with --export");
  if (!a.candidate.empty() && a.inputs.empty())
    throw UsageError("--candidate goes with --inputs: the tensor set the candidate ran on");
  if (!a.candidate.empty() && !a.export_path.empty()) throw UsageError("--candidate is shown, not exported: leave out --export");
  if (a.brief && a.format != "text") throw UsageError("--brief is a text view: leave out --format json");
  // The configuration, through the same axis machinery as `run` (and its
  // default family where none is given).
  ExperimentSpec spec;
  spec.grids.push_back(!a.inputs.empty()    ? json{{"family", "file"}, {"inputs", a.inputs}}
                       : a.family.empty() ? json::object()
                                          : json{{"family", a.family}});
  for (const auto& ax : a.axes) apply_axis(spec, ax);
  const auto points = expand(spec);
  for (const Point& p : points)
    if (!(p.config == points[0].config))
      throw UsageError("inspect shows one sample: the axes give several configurations; give one value per axis "
                       "(the method axis may have several)");
  const Configuration& cfg = points[0].config;
  const Family& fam = find_family(cfg.family);
  if (const auto n = fam.available_samples(cfg); n && a.index >= *n)
    throw UsageError(fmt::format("--index {}: family {} holds {} samples (0..{})", a.index, cfg.family, *n, *n - 1));

  if (!a.export_path.empty()) {  // samples [index, index + count) as a tensor set, nothing shown
    if (a.count == 0) throw UsageError("--count must be at least 1");
    if (a.index > UINT64_MAX - a.count)
      throw UsageError(fmt::format("--count {} from --index {}: runs past the last sample index", a.count, a.index));
    if (const auto n = fam.available_samples(cfg); n && a.index + a.count > *n)
      throw UsageError(fmt::format("--count {} from --index {}: family {} holds {} samples", a.count, a.index, cfg.family, *n));
    std::error_code ec;  // a file that does not exist yet is no input
    if (!a.inputs.empty() && std::filesystem::equivalent(a.inputs, a.export_path, ec))
      throw UsageError(fmt::format("--export {}: is the --inputs being read; write elsewhere", a.export_path));
    // Every sample is held, then its tensors: refuse before allocating what cannot fit.
    const MemoryBudget budget = a.max_memory.empty() ? memory_budget(1)
                                                     : MemoryBudget{parse_size("--max-memory", a.max_memory), "--max-memory"};
    const uint64_t per = 2 * sample_memory(cfg) + uint64_t(cfg.chunk) * uint64_t(cfg.dim) * 8;
    const uint64_t usable = budget.bytes / 10 * 9, most = usable / per;
    if (a.count > most)
      throw UsageError(fmt::format("--count {}: exporting holds every sample and its tensors, {}, more than the {} this "
                                   "process may use ({}); at most {} samples of C={}, d={} fit (or raise --max-memory)",
                                   a.count, format_bytes(double(a.count) * double(per)), format_bytes(double(budget.bytes)),
                                   budget.source, most, cfg.chunk, cfg.dim));
    std::vector<Sample> samples;
    for (uint64_t i = 0; i < a.count; ++i) samples.push_back(fam.make(cfg, a.seed, a.index + i));
    const TensorMap extra = a.export_from.empty() ? TensorMap{} : path_tensors(a, points);
    write_tensor_set(a.export_path, samples, DType::kBF16, DType::kF64, extra);
    if (!a.quiet)
      std::fprintf(stderr, "wrote samples %llu..%llu (C = %d, d = %d) to %s\n", static_cast<unsigned long long>(a.index),
                   static_cast<unsigned long long>(a.index + a.count - 1), cfg.chunk, cfg.dim, a.export_path.c_str());
    return;
  }
  // Every usable path by default (with a candidate: the gold and it); the
  // gold is always there (its own entry is the reference).
  std::vector<PathChoice> paths = parse_paths(a.paths.empty() ? (a.candidate.empty() ? "all" : "gold") : a.paths);
  bool has_gold = false;
  for (const auto& p : paths) has_gold = has_gold || p.spec->reference;
  if (!has_gold) paths.insert(paths.begin(), PathChoice{&reference_path(), {}});
  if (!a.candidate.empty()) {  // read as `score` reads it: a file that does not fit is an error now
    PathChoice cand{&kCandidatePath, {{"file", a.candidate}, {"inputs", a.inputs}}};
    cand.options["tail"] = file_family_tail(cfg) == Tail::kPad ? "pad" : "drop";
    const auto set = cached_tensor_set(a.inputs);
    const auto chunks = cached_chunks(a.inputs, cfg.chunk, file_family_tail(cfg));
    (void)load_candidate(a.candidate, *set, *chunks, cfg.chunk);
    paths.push_back(cand);
  }
  RunnerOptions ro;
  ro.threads = 1;
  ro.batch = 1;
  ro.keep_intermediates = true;
  Runner runner(paths, ro);
  const Plan plan = runner.plan(points);
  if (a.quiet) return;  // -q without --export: the options are valid, and nothing is to be shown
  for (const auto& why : plan.skipped) std::fprintf(stderr, "skipped: %s\n", why.c_str());
  InspectSink sink(runner.paths());
  runner.run(plan.groups[0], a.seed, {a.index, 1}, sink);
  const Sample& sample = sink.sample;
  const GoldOutput& gold = sink.gold;

  const KeySummary ks = summarise_keys(sample);
  // What is extreme about the sample, against the family's gate bound where it has one.
  const auto floor = cfg.params.find("decay_floor");
  const WitnessSummary structure = summarise_witness(
      sample, floor != cfg.params.end() && floor->is_number() ? std::optional<double>(floor->get<double>()) : std::nullopt);
  // G cumulated per channel (one column for per-token gates), C x gate_width.
  const int gw = sample.gate_width();
  Mat g_mat(sample.chunk, gw), big_g(sample.chunk, gw);
  for (int t = 0; t < sample.chunk; ++t)
    for (int c = 0; c < gw; ++c) {
      g_mat(t, c) = sample.gate(t, c);
      big_g(t, c) = (t ? big_g(t - 1, c) : 0.0) + g_mat(t, c);
    }
  auto column_or_matrix_json = [&](const Mat& m) {
    return gw == 1 ? vec_json(std::vector<double>(m.data(), m.data() + m.size())) : mat_json(m);
  };

  if (a.format == "json") {
    json j;
    j["sample"] = {{"axes", cfg.axes()}, {"seed", a.seed}, {"index", a.index}};
    j["keys"] = {{"values", mat_json(Eigen::Map<const Mat>(sample.keys.data(), sample.chunk, sample.dim))},
                 {"norms", vec_json(ks.norms)},
                 {"cosine_min", {{"value", json_number(ks.cos_min)}, {"rows", {ks.min_i, ks.min_j}}}},
                 {"cosine_max", {{"value", json_number(ks.cos_max)}, {"rows", {ks.max_i, ks.max_j}}}}};
    j["g"] = column_or_matrix_json(g_mat);  // [C], or [C][d] for per-channel gates
    j["G"] = column_or_matrix_json(big_g);
    j["beta"] = vec_json(sample.beta);
    j["structure"] = witness_summary_json(structure);
    j["gold"] = {{"L", mat_json(gold.L)}, {"INV", mat_json(gold.inv)}};
    j["paths"] = json::object();
    for (const Shown& s : sink.shown) {
      if (s.reference) {
        j["gold"]["metrics"] = metrics_json(s.metrics->infos, s.values);
        continue;
      }
      const MethodSpec& m = *s.spec;
      json& p = j["paths"][s.path];
      if (!p.contains("L")) {
        p["decay"] = vec_json(s.out.l.decay);
        p["inv_decay"] = vec_json(s.out.l.inv_decay);
        p["L"] = mat_json(s.out.l.L);
        p["methods"] = json::object();
      }
      json r = run_json(m, s.out.on_path_l);
      r["gold_l"] = run_json(m, s.out.on_gold_l);
      r["metrics"] = metrics_json(s.metrics->infos, s.values);
      p["methods"][s.method] = std::move(r);
    }
    std::cout << j.dump() << "\n";  // compact: matrices would take a line per entry
    return;
  }

  if (a.brief) {  // one screen: what the sample is, and per path and method its figures and where its error sits
    std::string o = fmt::format("sample {} (seed {}) of {}\n", a.index, a.seed, cfg.axes().dump());
    double nmin = INFINITY, nmax = -INFINITY;
    for (double x : ks.norms) nmin = std::min(nmin, x), nmax = std::max(nmax, x);
    o += fmt::format("keys: {} x {} (BF16), norms {} to {}", sample.chunk, sample.dim, num(nmin), num(nmax));
    if (ks.min_i >= 0)
      o += fmt::format(", cosine min {} (rows {}, {}), max {} (rows {}, {})", num(ks.cos_min), ks.min_i, ks.min_j,
                       num(ks.cos_max), ks.max_i, ks.max_j);
    const auto range = [](const double* p, size_t n) {
      double lo = INFINITY, hi = -INFINITY;
      for (size_t i = 0; i < n; ++i) lo = std::min(lo, p[i]), hi = std::max(hi, p[i]);
      return lo == hi ? num(lo) : fmt::format("{} to {}", num(lo), num(hi));
    };
    const Eigen::VectorXd last = big_g.row(big_g.rows() - 1).transpose();  // every channel's G at the last token
    o += fmt::format("\ng: {}; G at the last token: {}; beta: {}\n", range(g_mat.data(), size_t(g_mat.size())),
                     range(last.data(), size_t(last.size())), range(sample.beta.data(), sample.beta.size()));
    o += witness_summary_text(structure);
    for (const Shown& s : sink.shown) {
      if (s.reference) {
        o += fmt::format("gold (FP64): {}\n", metrics_line(s.metrics->infos, s.values));
        continue;
      }
      o += fmt::format("{} / {}: {}\n", s.path, s.method, metrics_line(s.metrics->infos, s.values));
      if (s.path == kCandidatePath.name) {
        o += error_view("L", s.out.l.L, gold.L, "  ");
        o += error_view("INV", s.out.on_path_l.inv, gold.inv, "  ");
      }
    }
    std::cout << o;
    return;
  }

  std::string o;
  o += fmt::format("sample {} (seed {}) of {}\n", a.index, a.seed, cfg.axes().dump());
  o += fmt::format("\nkeys: {} x {} (BF16)\n", sample.chunk, sample.dim);
  o += fmt::format("  norms:{}\n", vec_text(ks.norms));
  if (ks.min_i >= 0)
    o += fmt::format("  pairwise cosine: min {} (rows {}, {}), max {} (rows {}, {})\n", num(ks.cos_min), ks.min_i,
                     ks.min_j, num(ks.cos_max), ks.max_i, ks.max_j);
  if (gw == 1)
    o += fmt::format("g:    {}\nG:    {}\nbeta: {}\n", vec_text(sample.g),
                     vec_text(std::vector<double>(big_g.data(), big_g.data() + big_g.size())), vec_text(sample.beta));
  else
    o += "g (per channel, C x d):\n" + mat_text(g_mat, "  ") + "G (per channel):\n" + mat_text(big_g, "  ") +
         fmt::format("beta: {}\n", vec_text(sample.beta));
  o += witness_summary_text(structure);
  o += "\ngold (FP64)\n  L:\n" + mat_text(gold.L, "  ") + "  INV = (I + L)^-1:\n" + mat_text(gold.inv, "  ");
  std::string last_path;
  for (const Shown& s : sink.shown) {
    if (s.reference) {
      o += metrics_text(s.metrics->infos, s.values, "  ");
      continue;
    }
    const MethodSpec& m = *s.spec;
    if (s.path != last_path) {
      last_path = s.path;
      o += fmt::format("\npath {}\n", s.path);
      if (!s.out.l.decay.empty())
        o += fmt::format("  decay:    {}\n  inv_decay:{}\n", vec_text(s.out.l.decay), vec_text(s.out.l.inv_decay));
      o += "  L:\n" + mat_text(s.out.l.L, "  ");
    }
    o += fmt::format("  method {} on path {}'s L\n", s.method, s.path);
    o += run_text(m, s.out.on_path_l, "  ");
    o += "  metrics:\n" + metrics_text(s.metrics->infos, s.values, "    ");
    if (s.path == kCandidatePath.name)
      o += error_view("L", s.out.l.L, gold.L, "  ") + error_view("INV", s.out.on_path_l.inv, gold.inv, "  ");
  }
  std::cout << o;
}

}  // namespace

void set_inspect_command(CLI::App& app) {
  auto args = std::make_shared<InspectArgs>();
  auto* cmd = app.add_subcommand("inspect", "Show one sample in full: inputs, gold, each path's decays and L, each method's intermediates, INV, metrics");
  cmd->add_option("--inputs", args->inputs, "tensor set (directory of .npy, .npz or .safetensors): show its sample --index");
  cmd->add_option("--family", args->family, "a family (default: run's, floor) whose sample --sample of --seed is shown");
  cmd->add_option("--candidate", args->candidate,
                  "with --inputs: a scored kernel's L and/or INV (as `score --candidate` reads them), shown beside the "
                  "gold with where its largest errors sit, by element and by band of rows and columns");
  cmd->add_flag("-q,--quiet", args->quiet, "print nothing but errors (with --export: no line saying what was written)");
  cmd->add_flag("--brief", args->brief, "one screen: the sample's summary and each path and method's figures, no matrices");
  cmd->add_option("-a,--axis", args->axes, "axis: name=value (one value each; method may list several)");
  cmd->add_option("--seed", args->seed_text, "seed (default 0)");
  cmd->add_option("--index,--sample", args->index_text, "which sample (default 0)");
  cmd->add_option("--paths", args->paths, "comma-separated paths (default: every usable one); the gold is always shown");
  cmd->add_option("--format", args->format, "text (default) or json");
  cmd->add_option("--export", args->export_path,
                  "write the sample (and the next --count - 1) as a tensor set here instead of showing it: a directory "
                  "of .npy unless the path ends in .npz or .safetensors");
  cmd->add_option("--count", args->count_text, "samples to --export (default 1)");
  cmd->add_option("--export-path", args->export_from,
                  "with --export: also write this path's L, INV (of the one method of the axis) and decays beside the "
                  "samples, as `score --candidate` reads them");
  cmd->add_option("--max-memory", args->max_memory, "memory --export may use, e.g. 8G (default: what is free)");
  cmd->callback([args] {
    InspectArgs a = *args;
    if (!a.seed_text.empty()) a.seed = parse_count("--seed", a.seed_text, 0, UINT64_MAX);
    if (!a.index_text.empty()) a.index = parse_count("--index", a.index_text, 0, UINT64_MAX);
    if (!a.count_text.empty()) a.count = parse_count("--count", a.count_text, 1, UINT64_MAX);
    if (a.count_text.size() && a.export_path.empty()) throw UsageError("--count goes with --export");
    inspect(a);
  });
}

}  // namespace chunkinv::cli
