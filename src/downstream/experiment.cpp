#include "downstream/experiment.hpp"

#include <algorithm>
#include <cmath>
#include <memory>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/signals.hpp"
#include "core/thread_pool.hpp"
#include "downstream/backward.hpp"
#include "downstream/backward_experiment.hpp"
#include "downstream/forward.hpp"
#include "downstream/scores.hpp"
#include "downstream/storage.hpp"
#include "metrics/sketch.hpp"
#include "gpu/gpu.hpp"
#include "gpu/chunked_forward.hpp"
#include "gpu/recurrence.hpp"
#include "metrics/stats.hpp"
#include "paths/gold/gold.hpp"

namespace chunkinv {
namespace {

using json = nlohmann::json;

int int_axis(const std::string& name, const json& v) {
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() != std::floor(v.get<double>()) ||
      std::fabs(v.get<double>()) > 1e9)
    throw UsageError(fmt::format("axis {} = {} must be a whole number", name, v.dump()));
  return static_cast<int>(v.get<double>());
}

std::string string_axis(const std::string& name, const json& v) {
  if (!v.is_string()) throw UsageError(fmt::format("axis {} = {} must be a string", name, v.dump()));
  return v.get<std::string>();
}

void set_axis(SeqConfig& c, const std::string& name, const json& v) {
  if (name == "family") c.family = string_axis(name, v);
  else if (name == "chunk") c.chunk = int_axis(name, v);
  else if (name == "dim") c.dim = int_axis(name, v);
  else if (name == "value_dim") c.value_dim = int_axis(name, v);
  else if (name == "seq_len") c.seq_len = int_axis(name, v);
  else if (name == "window") c.window = int_axis(name, v);
  else if (name == "storage") c.storage = string_axis(name, v);
  else if (name == "initial_state") c.initial_state = string_axis(name, v);
  else if (name == "backward") c.backward = string_axis(name, v);
  else c.params[name] = v;  // the family's own (complete() drops what it does not take)
}

std::vector<json> values_of(const json& v) { return v.is_array() ? std::vector<json>(v.begin(), v.end()) : std::vector<json>{v}; }

bool channel_gates(const SeqConfig& c) { return c.params.value("gating", json()) == "channel"; }

}  // namespace

namespace {

// What every configuration must be, whatever its sequences' source.
void validate_common(const SeqConfig& c) {
  if (c.chunk < 2 || c.chunk > 64) throw UsageError(fmt::format("axis chunk = {} is outside 2..64", c.chunk));
  if (c.seq_len < 1 || c.seq_len > kMaxSeqLen)
    throw UsageError(fmt::format("axis seq_len = {} is outside 1..{}", c.seq_len, kMaxSeqLen));
  if (c.seq_len % c.chunk != 0)
    throw UsageError(fmt::format("axis seq_len = {} is not a whole number of chunks of {} tokens", c.seq_len, c.chunk));
  if (c.dim < 1 || c.dim > 512) throw UsageError(fmt::format("axis dim = {} is outside 1..512", c.dim));
  if (c.value_dim < 1 || c.value_dim > 512)
    throw UsageError(fmt::format("axis value_dim = {} is outside 1..512", c.value_dim));
  if (c.window < 0 || c.window > c.seq_len || (c.window > 0 && c.seq_len % c.window != 0))
    throw UsageError(fmt::format("axis window = {} must divide seq_len = {} (0: seq_len / 16)", c.window, c.seq_len));
  const StoragePreset& p = find_storage(c.storage);
  if (p.per_token_only && channel_gates(c))
    throw UsageError(fmt::format("axis storage = {} takes per-token gates only (chunk_gated_delta_rule's g is [B, T, H]); "
                                 "use fla_chunk_kda for gating=channel", c.storage));
  if (c.initial_state != "zero" && c.initial_state != "random")
    throw UsageError(fmt::format("axis initial_state = \"{}\" must be \"zero\" or \"random\"", c.initial_state));
  validate_backward(c);
}

}  // namespace

void validate_sequence_config(const SeqConfig& c) {
  const SequenceSource& src = find_source(c.family);
  validate_common(c);
  src.validate(c);
}

std::vector<SeqGroup> expand_inputs(std::shared_ptr<const SequenceSet> set, const json& axes) {
  for (const auto& [name, v] : axes.items())
    if (name != "chunk" && name != "storage" && name != "window" && name != "method" && name != "backward")
      throw UsageError(fmt::format("axis {} is not for --inputs: the sequences are the file's (axes: chunk, storage, "
                                   "window, method, backward)", name));
  const Sequence& first = set->sequences.front();
  int longest = 0;
  for (const Sequence& s : set->sequences) longest = std::max(longest, s.tokens);
  std::vector<Method> methods;
  for (const json& m : axes.contains("method") ? values_of(axes["method"]) : std::vector<json>{"neumann"}) {
    Method parsed = parse_method(string_axis("method", m));
    if (std::find(methods.begin(), methods.end(), parsed) == methods.end()) methods.push_back(std::move(parsed));
  }
  std::vector<SeqGroup> groups;
  for (const json& chunk : axes.contains("chunk") ? values_of(axes["chunk"]) : std::vector<json>{64})
    for (const json& storage : axes.contains("storage") ? values_of(axes["storage"]) : std::vector<json>{"fla_chunk_kda"})
      for (const json& window : axes.contains("window") ? values_of(axes["window"]) : std::vector<json>{0})
      for (const json& backward : axes.contains("backward") ? values_of(axes["backward"]) : std::vector<json>{"none"}) {
        SeqConfig c;
        c.backward = string_axis("backward", backward);
        c.family = "inputs";
        c.params = {{"inputs", set->source}};
        if (first.gating == Gating::kChannel) c.params["gating"] = "channel";
        c.chunk = int_axis("chunk", chunk);
        c.storage = string_axis("storage", storage);
        c.window = set->same_length() ? int_axis("window", window) : 0;
        c.dim = first.key_dim;
        c.value_dim = first.value_dim;
        c.seq_len = longest;
        c.initial_state = first.h0.empty() ? "zero" : "given";
        for (size_t i = 0; i < set->sequences.size(); ++i)
          if (c.chunk > 0 && set->sequences[i].tokens % c.chunk != 0)
            throw UsageError(fmt::format("inputs {}: sequence {} (head {}) has {} tokens, not a whole number of chunks of {}",
                                         set->source, i / set->heads, i % set->heads, set->sequences[i].tokens, c.chunk));
        SeqConfig checked = c;
        checked.initial_state = "zero";  // "given": the file's
        validate_common(checked);
        groups.push_back({c, methods, set});
      }
  return groups;
}

std::vector<SeqGroup> expand_sequences(const json& axes) {
  if (!axes.is_object()) throw UsageError("the axes must be an object of axis -> value or list of values");
  // Every axis must be one of the sequence's or a parameter of a family of the grid.
  const std::vector<json> families = axes.contains("family") ? values_of(axes["family"]) : std::vector<json>{"model_like"};
  std::vector<std::string> known = sequence_axes();
  for (const json& f : families)
    for (const FamilyParam& p : find_source(string_axis("family", f)).params()) known.push_back(p.name);
  for (const auto& [name, v] : axes.items()) {
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    const std::string near = nearest_of(name, known);
    throw UsageError(near.empty() ? fmt::format("axis {} is taken by no family of the grid", name)
                                  : fmt::format("axis {} is taken by no family of the grid (did you mean \"{}\"?)", name, near));
  }
  std::vector<Method> methods;
  for (const json& m : axes.contains("method") ? values_of(axes["method"]) : std::vector<json>{"neumann"}) {
    Method parsed = parse_method(string_axis("method", m));
    if (std::find(methods.begin(), methods.end(), parsed) == methods.end()) methods.push_back(std::move(parsed));
  }
  // The Cartesian product, family outermost, then the other axes by name.
  std::vector<std::pair<std::string, std::vector<json>>> dims{{"family", families}};
  for (const auto& [name, v] : axes.items())
    if (name != "family" && name != "method") dims.emplace_back(name, values_of(v));
  std::vector<SeqGroup> groups;
  std::vector<size_t> at(dims.size(), 0);
  for (;;) {
    SeqConfig c;
    for (size_t d = 0; d < dims.size(); ++d) set_axis(c, dims[d].first, dims[d].second[at[d]]);
    complete(c);
    validate_sequence_config(c);
    if (std::none_of(groups.begin(), groups.end(), [&](const SeqGroup& g) { return g.config.axes() == c.axes(); }))
      groups.push_back({c, methods, nullptr});
    size_t d = dims.size();
    while (d > 0 && ++at[d - 1] == dims[d - 1].second.size()) at[--d] = 0;
    if (d == 0) break;
  }
  return groups;
}

namespace {

// The recurrence a sequence is scored against: the CPU's, or the GPU's
// (bit for bit the same, gpu/recurrence.hpp), one sequence advanced a chunk
// at a time with its state brought back at every boundary.
class Reference {
 public:
  Reference(const Sequence& s, double scale, bool device) : s_(s), cpu_(s, scale) {
    if (!device) return;
    gpu_ = std::make_unique<gpu::DeviceRecurrence>(1, s.key_dim, s.value_dim, s.gating == Gating::kChannel, scale,
                                                    s.h0.empty() ? nullptr : s.h0.data());
    state_.resize(s.key_dim, s.value_dim);
  }
  void advance(int first, int count, Mat& o) {
    if (!gpu_) return cpu_.advance(first, count, o);
    const size_t t = static_cast<size_t>(first), K = s_.key_dim, V = s_.value_dim, W = s_.gate_width();
    o.resize(count, s_.value_dim);
    gpu_->advance(count, &s_.q[t * K], &s_.k[t * K], &s_.g[t * W], &s_.beta[t], &s_.v[t * V], o.data());
    gpu_->state(state_.data());
  }
  const Mat& state() const { return gpu_ ? state_ : cpu_.state(); }

 private:
  const Sequence& s_;
  Recurrence cpu_;
  std::unique_ptr<gpu::DeviceRecurrence> gpu_;
  Mat state_;
};

// The chunks' inverses come in blocks of about this many tokens: memory
// O(block), never O(T), whatever the chunk.
constexpr int kBlockTokens = 4096;

// One sequence: every task's values (downstream_metrics(), then the windows).
std::vector<std::vector<double>> run_one(const Sequence& s, const SeqConfig& cfg, int window,
                                         const std::vector<InverseTask>& tasks,
                                         const std::vector<std::vector<const Method*>>& path_methods,
                                         std::vector<std::unique_ptr<Path>>& paths, ThreadPool& pool, bool device) {
  const int C = cfg.chunk, N = s.chunks(C), K = s.key_dim, V = s.value_dim, W = s.gate_width();
  const double scale = default_scale(s);
  const StoragePreset& preset = find_storage(cfg.storage);
  // Variant 0: the exact inverse with the preset's storage; then per task
  // its total (preset) and its inverse only (FP64).
  const size_t nv = 1 + 2 * tasks.size();
  std::vector<const StoragePreset*> presets{&preset};
  for (size_t t = 0; t < tasks.size(); ++t) presets.insert(presets.end(), {&preset, &fp64_storage()});
  std::vector<VariantScore> scores(nv, VariantScore(s.tokens, window));
  // The forwards on the host (ChunkedForward), or on the GPU, every variant at once (the same bits).
  std::vector<ChunkedForward> forwards;
  std::unique_ptr<gpu::DeviceChunkedForward> on_gpu;
  std::vector<double> gpu_inverses, gpu_o, gpu_states;
  std::vector<Mat> states(nv);
  if (device) {
    std::vector<Stores> stores;
    for (const StoragePreset* p : presets) stores.push_back(*p);  // its rounding points
    on_gpu = std::make_unique<gpu::DeviceChunkedForward>(C, K, V, W, scale, stores, s.h0.empty() ? nullptr : s.h0.data());
    gpu_o.resize(nv * C * V);
    gpu_states.resize(nv * K * V);
  } else {
    forwards.reserve(nv);
    for (const StoragePreset* p : presets) forwards.emplace_back(s, C, *p, scale);
  }
  Reference ref(s, scale, device);
  Mat ref_rows;
  std::vector<Mat> rows(nv);
  const int block = std::max(1, std::min(N, kBlockTokens / C));
  std::vector<std::vector<PathOutput>> outs(paths.size());
  for (int b0 = 0; b0 < N; b0 += block) {
    const int nb = std::min(block, N - b0);
    std::vector<Sample> chunks(nb);
    std::vector<GoldOutput> gold(nb);
    pool.parallel_for(nb, [&](size_t j) {
      chunks[j] = chunk_sample(s, C, b0 + static_cast<int>(j));
      gold[j] = compute_gold(chunks[j]);
    });
    for (size_t p = 0; p < paths.size(); ++p) {
      if (path_methods[p].empty()) continue;
      outs[p].assign(path_methods[p].size() * nb, PathOutput{});
      paths[p]->run_batch(Batch{chunks, gold, static_cast<uint64_t>(b0)}, path_methods[p], outs[p], pool, false);
    }
    for (int j = 0; j < nb; ++j) {
      const int n = b0 + j;
      ref.advance(n * C, C, ref_rows);
      const auto inverse = [&](size_t v) -> const Mat& {
        return v == 0 ? gold[j].inv : outs[tasks[(v - 1) / 2].path][tasks[(v - 1) / 2].method * nb + j].on_path_l.inv;
      };
      if (on_gpu) {
        const size_t t0 = size_t(n) * C;
        on_gpu->advance(&s.q[t0 * K], &s.k[t0 * K], &s.v[t0 * V], &s.g[t0 * W], &s.beta[t0],
                        pack_inverses(nv, C, inverse, gpu_inverses), gpu_o.data(), gpu_states.data());
      }
      pool.parallel_for(nv, [&](size_t v) {
        if (on_gpu) {
          rows[v] = Eigen::Map<const Mat>(gpu_o.data() + v * C * V, C, V);
          states[v] = Eigen::Map<const Mat>(gpu_states.data() + v * K * V, K, V);
        } else {
          forwards[v].advance(n, inverse(v), rows[v]);
        }
        scores[v].add_rows(n * C, rows[v], ref_rows);
        scores[v].add_boundary(on_gpu ? states[v] : forwards[v].state(), ref.state());
      });
    }
  }
  for (size_t v = 0; v < nv; ++v) {
    const Mat ht = on_gpu ? Mat(states[v].unaryExpr([&](double x) { return stored(x, presets[v]->final_state); }))
                          : forwards[v].final_state();
    scores[v].set_final(ht, ref.state());
  }
  std::vector<std::vector<double>> values(tasks.size());
  for (size_t t = 0; t < tasks.size(); ++t)
    values[t] = evaluate_downstream(scores[1 + 2 * t], scores[2 + 2 * t], scores[0], s.tokens);
  return values;
}

}  // namespace

VariantScore score_candidate(const Sequence& s, int window, const Mat& o, const Mat* ht, bool device_reference) {
  if (o.rows() != s.tokens || o.cols() != s.value_dim)
    throw UsageError(fmt::format("candidate o is {} x {}, the sequence's is {} x {}", o.rows(), o.cols(), s.tokens, s.value_dim));
  if (ht && (ht->rows() != s.key_dim || ht->cols() != s.value_dim))
    throw UsageError(fmt::format("candidate ht is {} x {}, the state's is {} x {}", ht->rows(), ht->cols(), s.key_dim,
                                 s.value_dim));
  Reference ref(s, default_scale(s), device_reference);
  Mat ref_o;
  ref.advance(0, s.tokens, ref_o);
  VariantScore score(s.tokens, window);
  score.add_rows(0, o, ref_o);
  if (ht) score.set_final(*ht, ref.state());
  return score;
}

namespace {

// The metric names and infos of a group's entries: the table, then its windows.
void entry_metrics(const SeqGroup& g, std::vector<std::string>& names, std::vector<MetricInfo>& infos,
                   bool backward) {
  infos.assign(downstream_metrics().begin(), downstream_metrics().end());
  names.clear();
  for (const MetricInfo& m : infos) names.emplace_back(m.name);
  const bool one_length = !g.inputs || g.inputs->same_length();
  const int window = one_length ? g.config.window_or_default() : g.config.seq_len;
  for (int w = 0; w < (one_length ? g.config.seq_len / window : 1); ++w) {
    names.push_back(window_metric_name(w * window));
    infos.push_back(window_metric_info());
  }
  if (!backward) return;
  for (const MetricInfo& m : backward_metrics()) {
    names.emplace_back(m.name);
    infos.push_back(m);
  }
  for (std::string& n : backward_window_names(one_length ? g.config.seq_len : window, window)) {
    names.push_back(std::move(n));
    infos.push_back(backward_window_info());
  }
}

// A sequence's window: the configuration's, or the whole sequence where the
// inputs' sequences differ in length.
int window_of(const SeqGroup& g, const Sequence& s) {
  return !g.inputs || g.inputs->same_length() ? g.config.window_or_default() : s.tokens;
}

json entry_axes(const SeqGroup& g, const std::string& path, const std::string& method) {
  json a = g.config.axes();
  a["path"] = path;
  a["method"] = method;
  return a;
}

ReportEntry entry_of(const SeqGroup& g, const std::string& path, const std::string& method, uint64_t seed,
                     const std::vector<std::string>& names, const std::vector<MetricInfo>& infos,
                     const std::vector<std::vector<double>>& values, bool per_sample, bool keep_state = false) {
  ReportEntry e;
  e.axes = entry_axes(g, path, method);
  e.samples = values.front().size();
  e.seed = seed;
  for (size_t k = 0; k < names.size(); ++k) {
    if (values[k].empty()) continue;  // a metric the entry does not have (a candidate without ht)
    if (per_sample) e.per_sample[names[k]] = values[k];
    if (keep_state) {  // a shard's: merge adds them up
      StreamStats st;
      for (double x : values[k]) st.add(x);
      e.state[names[k]] = st.state();
    }
    std::vector<double> sorted = values[k];
    e.metrics[names[k]] = aggregate(sorted, infos[k].kind == MetricKind::kFlag);
  }
  return e;
}

}  // namespace

void require_device_reference(const std::vector<SeqGroup>& groups) {
  for (const SeqGroup& g : groups)
    if (const std::string why = gpu::recurrence_unsupported(g.config.dim, g.config.value_dim); !why.empty())
      throw UsageError("--pipeline device: " + why);
  if (const std::string why = gpu::unavailable_reason(); !why.empty())
    throw UsageError("--pipeline device: the GPU recurrence needs a CUDA GPU: " + why);
}

std::vector<ReportEntry> score_candidates(const std::vector<SeqGroup>& groups, const CandidateOutputs& outputs,
                                          const std::string& method, bool device_reference) {
  std::vector<ReportEntry> entries;
  for (const SeqGroup& g : groups) {
    std::vector<std::string> names;
    std::vector<MetricInfo> infos;
    const bool grads = !outputs.dq.empty();
    entry_metrics(g, names, infos, grads);
    std::vector<std::vector<double>> values(names.size());
    const auto put = [&](const std::string& name, double v) {
      values[std::find(names.begin(), names.end(), name) - names.begin()].push_back(v);
    };
    for (size_t i = 0; i < g.inputs->sequences.size(); ++i) {
      const Sequence& s = g.inputs->sequences[i];
      const VariantScore score = score_candidate(s, window_of(g, s), outputs.o[i], outputs.ht.empty() ? nullptr : &outputs.ht[i],
                                                 device_reference);
      put("o_rel_rmse", score.o_rel_rmse());
      if (!outputs.ht.empty()) put("ht_rel_rmse", score.ht_rel_rmse());
      put("o_finite", score.first_nonfinite() < 0 ? 1.0 : 0.0);
      put("o_first_nonfinite", static_cast<double>(score.first_nonfinite() < 0 ? s.tokens : score.first_nonfinite()));
      for (size_t w = 0; w < score.windows(); ++w) values[downstream_metrics().size() + w].push_back(score.window_rel_rmse(w));
      if (grads) {
        // The kernel's gradients against the recurrence's, of the inputs' own do (and dht).
        if (s.d_o.empty())
          throw UsageError(fmt::format("the candidate holds gradients: --inputs {} must hold the upstream do they "
                                       "were computed from", g.inputs->source));
        const Gradients ref = recurrent_backward(s, upstream_of(s, 0, i), default_scale(s));
        Gradients kernel;
        kernel.dq = outputs.dq[i], kernel.dk = outputs.dk[i], kernel.dv = outputs.dv[i];
        kernel.dg = outputs.dg[i], kernel.dbeta = outputs.dbeta[i];
        const int window = window_of(g, s);
        GradientScores gs(s.tokens, window);
        gs.add(0, kernel, ref);
        const char* gradient_names[] = {"dq", "dk", "dv", "dg", "dbeta"};
        for (size_t k = 0; k < 5; ++k) {
          put(fmt::format("{}_rel_rmse", gradient_names[k]), gs.g[k].rel_rmse());
          for (size_t w = 0; w < gs.g[k].windows(); ++w)
            put(fmt::format("{}_rel_rmse_from_{}", gradient_names[k], w * window), gs.g[k].window_rel_rmse(w));
        }
        put("grad_finite", gs.first_nonfinite() < 0 ? 1.0 : 0.0);
        put("grad_first_nonfinite", static_cast<double>(gs.first_nonfinite() < 0 ? s.tokens : gs.first_nonfinite()));
      }
    }
    entries.push_back(entry_of(g, "candidate", method, 0, names, infos, values, false));
  }
  return entries;
}

Plan plan_sequences(const std::vector<SeqGroup>& groups, const std::vector<PathChoice>& paths,
                    const SeqRunOptions& opt) {
  Plan plan;
  for (const SeqGroup& group : groups) {
    const Configuration cc = group.config.chunk_config();
    Group g;
    g.config = cc;
    for (size_t p = 0; p < paths.size(); ++p)
      for (const Method& m : group.methods) {
        std::string why;
        if (!paths[p].spec->supports(cc, m, &why)) {
          const std::string line = fmt::format("path {} does not run method {}: {}", paths[p].label(), m.label(), why);
          if (std::find(plan.skipped.begin(), plan.skipped.end(), line) == plan.skipped.end())
            plan.skipped.push_back(line);
          continue;
        }
        Task t;
        t.path = p;
        t.method = m;
        t.axes = entry_axes(group, paths[p].label(), m.label());
        g.tasks.push_back(std::move(t));
      }
    if (g.tasks.empty()) continue;
    std::vector<std::string> names;
    std::vector<MetricInfo> infos;
    entry_metrics(group, names, infos, group.config.backward != "none");
    g.metrics = std::make_shared<const GroupMetrics>(std::move(names), infos);
    for (Task& t : g.tasks) t.metrics = t.evaluated = &g.metrics->set;
    g.sequence = std::make_shared<const SeqGroup>(group);
    // Sequence first + i of the configuration is this run's i-th: the same
    // sequence, seed and numbers whatever the split.
    const auto [first, count] = shard_span(opt.shard.value_or(Shard{}), group_samples(group, opt));
    g.first = first;
    g.count = count;
    g.seed = group.inputs ? 0 : opt.seed;
    plan.groups.push_back(std::move(g));
  }
  return plan;
}

SequenceBackend::SequenceBackend(const std::vector<PathChoice>& paths, int threads, bool device)
    : pool_(threads), device_(device) {
  for (const PathChoice& p : paths) instances_.push_back(make_path(p));
}

SequenceBackend::~SequenceBackend() = default;

void SequenceBackend::run(const Group& g, uint64_t seed, SampleRange range, Sink& sink) {
  if (!g.sequence) throw std::logic_error("the sequence back-end was handed a group of chunks");
  const SeqGroup& group = *g.sequence;
  const SeqConfig& cfg = group.config;
  // Per path, the methods it runs here; per task, where its inverses are.
  std::vector<std::vector<const Method*>> path_methods(instances_.size());
  std::vector<InverseTask> tasks;
  for (const Task& t : g.tasks) {
    tasks.push_back({t.path, path_methods[t.path].size()});
    path_methods[t.path].push_back(&t.method);
  }
  sink.begin(g, range.count);
  for (uint64_t i = 0; i < range.count; ++i) {
    const uint64_t n = range.first + i;
    const Sequence s = group.inputs ? group.inputs->sequences[n] : find_source(cfg.family).make(cfg, seed, n);
    BatchResult r;
    r.group = &g;
    r.first = n;
    r.count = 1;
    r.values = run_one(s, cfg, window_of(group, s), tasks, path_methods, instances_, pool_, device_);
    if (cfg.backward != "none") {
      const Upstream up = upstream_of(s, group.inputs ? 0 : seed, n);
      const auto b = run_backward_one(s, up, cfg, window_of(group, s), tasks, path_methods, instances_, pool_, device_);
      for (size_t t = 0; t < tasks.size(); ++t) r.values[t].insert(r.values[t].end(), b[t].begin(), b[t].end());
    }
    sink.consume(r);
    if (sink.finished()) break;
  }
  sink.end(g);
}

uint64_t group_samples(const SeqGroup& g, const SeqRunOptions& opt) {
  return g.inputs ? g.inputs->sequences.size() : opt.samples;
}

Checkpoint::Layout sequence_layout(const std::vector<SeqGroup>& groups, const std::vector<PathChoice>& paths,
                                   const SeqRunOptions& opt) {
  const Plan plan = plan_sequences(groups, paths, opt);
  uint64_t samples = 0;
  for (const Group& g : plan.groups) samples = std::max(samples, *g.count);
  return Checkpoint::layout_of(plan, paths, samples, false);
}

// The driver of `run` (run_experiment: statistics, checkpoint, stop) over
// the sequence back-end: the same sinks as a chunk run's.
SeqRunResult run_sequences(const std::vector<SeqGroup>& groups, const std::vector<PathChoice>& paths,
                           const SeqRunOptions& opt) {
  const Plan plan = plan_sequences(groups, paths, opt);
  SequenceBackend backend(paths, opt.threads, opt.device);
  StatsOptions stats;
  stats.per_sample = opt.per_sample;
  stats.keep_state = opt.shard.has_value();  // a shard's entries carry their state: merge adds them up
  RunControl control;
  control.checkpoint = opt.checkpoint;
  control.stop = opt.stop;
  RunResult r = run_experiment(backend, paths, plan, 0, opt.seed, stats, control);
  return {std::move(r.entries), std::move(r.skipped)};
}

}  // namespace chunkinv
