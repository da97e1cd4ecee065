#include "downstream/backward_experiment.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/thread_pool.hpp"
#include "downstream/forward.hpp"
#include "downstream/storage.hpp"
#include "gpu/chunked_backward.hpp"
#include "gpu/chunked_forward.hpp"
#include "metrics/metrics.hpp"
#include "paths/gold/gold.hpp"

namespace chunkinv {
namespace {

double share(double total, double inverse_only) {
  if (!std::isfinite(total)) return std::isfinite(inverse_only) ? 0.0 : 1.0;
  return total > 0 ? inverse_only / total : 0.0;
}

// The inverses of chunks [b0, b0 + nb): the gold's, and each path's methods'.
struct BlockInverses {
  std::vector<GoldOutput> gold;
  std::vector<std::vector<PathOutput>> outs;  // [path][method * nb + j]
  int nb = 0;
  const Mat& of(const InverseTask& t, int j) const { return outs[t.path][t.method * nb + j].on_path_l.inv; }
};

BlockInverses block_inverses(const Sequence& s, int C, int b0, int nb,
                             const std::vector<std::vector<const Method*>>& path_methods,
                             std::vector<std::unique_ptr<Path>>& paths, ThreadPool& pool) {
  BlockInverses b;
  b.nb = nb;
  std::vector<Sample> chunks(nb);
  b.gold.resize(nb);
  pool.parallel_for(nb, [&](size_t j) {
    chunks[j] = chunk_sample(s, C, b0 + static_cast<int>(j));
    b.gold[j] = compute_gold(chunks[j]);
  });
  b.outs.resize(paths.size());
  for (size_t p = 0; p < paths.size(); ++p) {
    if (path_methods[p].empty()) continue;
    b.outs[p].assign(path_methods[p].size() * nb, PathOutput{});
    paths[p]->run_batch(Batch{chunks, b.gold, static_cast<uint64_t>(b0)}, path_methods[p], b.outs[p], pool, false);
  }
  return b;
}

// The chunks' inverses come in blocks of about this many tokens (as the forward's).
constexpr int kBlockTokens = 4096;

}  // namespace

const std::vector<std::string>& backward_modes() {
  static const std::vector<std::string> m{"none", "stored", "recomputed"};
  return m;
}

void validate_backward(const SeqConfig& c) {
  const auto& m = backward_modes();
  if (std::find(m.begin(), m.end(), c.backward) == m.end())
    throw UsageError(fmt::format("axis backward = \"{}\" must be none, stored or recomputed", c.backward));
  if (c.backward != "none") find_backward_storage(c.storage);
}

std::span<const MetricInfo> backward_metrics() { return gradient_metrics(); }

std::vector<std::string> backward_window_names(int seq_len, int window) {
  std::vector<std::string> n;
  for (const std::string& g : gradient_names())
    for (int w = 0; w < seq_len / window; ++w) n.push_back(fmt::format("{}_rel_rmse_from_{}", g, w * window));
  return n;
}

const MetricInfo& backward_window_info() { return gradient_window_metric_info(); }

void GradientScore::add_rows(int first, const Mat& a, const Mat& ref) {
  all_.add(a, ref);
  for (Eigen::Index r = 0; r < a.rows();) {
    const int t = first + static_cast<int>(r);
    const int w = t / window_;
    const Eigen::Index n = std::min<Eigen::Index>(a.rows() - r, (w + 1) * window_ - t);
    windows_[w].add(a.middleRows(r, n), ref.middleRows(r, n));
    r += n;
  }
  for (Eigen::Index r = 0; r < a.rows(); ++r)
    if (!a.row(r).allFinite()) {
      const int64_t t = first + r;
      if (first_nonfinite_ < 0 || t < first_nonfinite_) first_nonfinite_ = t;
      break;
    }
}

void GradientScores::add(int first, const Gradients& a, const Gradients& ref) {
  g[0].add_rows(first, a.dq, ref.dq);
  g[1].add_rows(first, a.dk, ref.dk);
  g[2].add_rows(first, a.dv, ref.dv);
  g[3].add_rows(first, a.dg, ref.dg);
  g[4].add_rows(first, a.dbeta, ref.dbeta);
}

int64_t GradientScores::first_nonfinite() const {
  int64_t f = -1;
  for (const GradientScore& s : g)
    if (s.first_nonfinite() >= 0 && (f < 0 || s.first_nonfinite() < f)) f = s.first_nonfinite();
  return f;
}

std::vector<double> evaluate_backward(const GradientScores& total, const GradientScores& inverse_only,
                                      const GradientScores& storage, int tokens) {
  std::vector<double> v;
  for (size_t i = 0; i < total.g.size(); ++i) {
    const double t = total.g[i].rel_rmse(), io = inverse_only.g[i].rel_rmse();
    v.insert(v.end(), {t, io, storage.g[i].rel_rmse(), share(t, io)});
  }
  const int64_t f = total.first_nonfinite();
  v.insert(v.end(), {total.dh0, inverse_only.dh0, f < 0 ? 1.0 : 0.0, static_cast<double>(f < 0 ? tokens : f)});
  for (const GradientScore& g : total.g)
    for (size_t w = 0; w < g.windows(); ++w) v.push_back(g.window_rel_rmse(w));
  return v;
}

std::vector<std::vector<double>> run_backward_one(const Sequence& s, const Upstream& up, const SeqConfig& cfg,
                                                  int window, const std::vector<InverseTask>& tasks,
                                                  const std::vector<std::vector<const Method*>>& path_methods,
                                                  std::vector<std::unique_ptr<Path>>& paths, ThreadPool& pool,
                                                  bool device) {
  const int C = cfg.chunk, N = s.chunks(C);
  const double scale = default_scale(s);
  const StoragePreset& fwd = find_storage(cfg.storage);
  const BackwardPreset& bwd = find_backward_storage(cfg.storage);
  const bool stored_a = cfg.backward == "stored";
  // Variant 0: the exact inverse with the presets (storage); then per task
  // its total (presets) and its inverse only (FP64).
  const size_t nv = 1 + 2 * tasks.size();
  const auto forward_of = [&](size_t v) -> const StoragePreset& { return v == 0 || v % 2 == 1 ? fwd : fp64_storage(); };
  const auto backward_of = [&](size_t v) -> const BackwardPreset& { return v == 0 || v % 2 == 1 ? bwd : fp64_backward(); };
  const auto inverse_of = [&](const BlockInverses& b, size_t v, int j) -> const Mat& {
    return v == 0 ? b.gold[j].inv : b.of(tasks[(v - 1) / 2], j);
  };
  // A as the backward reads it: as the forward stored it (then in the
  // backward's format), or as the method makes it.
  const auto backward_inverse = [&](const Mat& a, size_t v) {
    if (!stored_a) return a;
    const Store f = forward_of(v).inverse, b = backward_of(v).inverse;
    return Mat(a.unaryExpr([&](double x) { return stored(stored(x, f), b); }));
  };

  // The variants' forwards and backwards on the host (ChunkedForward,
  // ChunkedBackward), or on the GPU, every variant at once (the same bits).
  const size_t K = s.key_dim, V = s.value_dim, W = s.gate_width(), kv = K * V;
  std::unique_ptr<gpu::DeviceChunkedForward> forward_gpu;
  std::unique_ptr<gpu::DeviceChunkedBackward> backward_gpu;
  if (device) {
    std::vector<Stores> f;
    std::vector<backward_step::BackwardStores> b;
    for (size_t v = 0; v < nv; ++v) f.push_back(forward_of(v)), b.push_back(backward_stores_of(backward_of(v)));
    forward_gpu = std::make_unique<gpu::DeviceChunkedForward>(C, int(K), int(V), int(W), scale, f,
                                                              s.h0.empty() ? nullptr : s.h0.data());
    backward_gpu = std::make_unique<gpu::DeviceChunkedBackward>(C, int(K), int(V), int(W), scale, f, b,
                                                                up.dht.size() ? up.dht.data() : nullptr);
  }
  std::vector<double> packed, gpu_o(nv * C * V);  // every variant's inverse of a chunk; its outputs
  const auto gpu_advance = [&](const BlockInverses& inv, int n, int j, double* states_after) {
    const size_t t0 = size_t(n) * C;
    const double* a = pack_inverses(nv, C, [&](size_t v) -> const Mat& { return inverse_of(inv, v, j); }, packed);
    forward_gpu->advance(&s.q[t0 * K], &s.k[t0 * K], &s.v[t0 * V], &s.g[t0 * W], &s.beta[t0], a, gpu_o.data(),
                         states_after);
  };

  const size_t variant_tasks = device ? 1 : nv;  // the pool's tasks of the variants: the GPU's are one

  // Pass 1: the forwards, checkpointed at every block's start.
  const int block = std::max(1, std::min(N, kBlockTokens / C));
  std::vector<std::vector<ChunkedForward>> checkpoints(nv);
  std::vector<std::vector<double>> gpu_checkpoints;  // per block, [variants][K][V]
  std::vector<Mat> ref_checkpoints;
  std::vector<ChunkedForward> forwards;
  forwards.reserve(nv);
  for (size_t v = 0; v < nv && !device; ++v) forwards.emplace_back(s, C, forward_of(v), scale);
  Mat ref = s.h0.empty() ? Mat::Zero(s.key_dim, s.value_dim) : Mat(Eigen::Map<const Mat>(s.h0.data(), s.key_dim, s.value_dim));
  std::vector<Mat> rows(nv);
  std::vector<double> gpu_states(nv * kv);
  for (int b0 = 0; b0 < N; b0 += block) {
    const int nb = std::min(block, N - b0);
    const BlockInverses inv = block_inverses(s, C, b0, nb, path_methods, paths, pool);
    ref_checkpoints.push_back(ref);
    if (device) {
      gpu_checkpoints.emplace_back(nv * kv);
      forward_gpu->states(gpu_checkpoints.back().data());
    }
    for (size_t v = 0; v < nv && !device; ++v) checkpoints[v].push_back(forwards[v]);
    pool.parallel_for(variant_tasks + 1, [&](size_t v) {
      if (v == variant_tasks) {
        for (int t = b0 * C; t < (b0 + nb) * C; ++t) recurrence_step(s, t, ref);
      } else if (device) {
        for (int j = 0; j < nb; ++j) gpu_advance(inv, b0 + j, j, gpu_states.data());
      } else {
        for (int j = 0; j < nb; ++j) forwards[v].advance(b0 + j, inverse_of(inv, v, j), rows[v]);
      }
    });
  }

  // Pass 2: the blocks in reverse, each chunk's gradient rows scored as they come.
  std::vector<GradientScores> scores(nv, GradientScores(s.tokens, window));
  std::vector<ChunkedBackward> backs;
  backs.reserve(nv);
  for (size_t v = 0; v < nv && !device; ++v) backs.emplace_back(s, C, forward_of(v), backward_of(v), up, scale);
  RecurrentBackward ref_back(s, up, scale);
  Gradients ref_rows(s, C);
  std::vector<Gradients> var_rows(nv, Gradients(s, C));
  std::vector<double> gpu_dq(nv * C * K), gpu_dk(nv * C * K), gpu_dv(nv * C * V), gpu_dg(nv * C * W), gpu_dbeta(nv * C);
  for (int bi = static_cast<int>(ref_checkpoints.size()) - 1; bi >= 0; --bi) {
    const int b0 = bi * block, nb = std::min(block, N - b0);
    const BlockInverses inv = block_inverses(s, C, b0, nb, path_methods, paths, pool);
    // The states entering each chunk of the block, recomputed from the
    // checkpoints (on the GPU: [chunk][variants][K][V]).
    std::vector<std::vector<Mat>> states(nv + 1, std::vector<Mat>(nb));
    std::vector<std::vector<double>> gpu_entering(device ? nb : 0, std::vector<double>(nv * kv));
    pool.parallel_for(variant_tasks + 1, [&](size_t v) {
      if (v == variant_tasks) {
        Mat S = ref_checkpoints[bi];
        for (int j = 0; j < nb; ++j) {
          states[nv][j] = S;
          for (int t = (b0 + j) * C; t < (b0 + j + 1) * C; ++t) recurrence_step(s, t, S);
        }
      } else if (device) {
        gpu_entering[0] = gpu_checkpoints[bi];
        forward_gpu->set_states(gpu_entering[0].data());
        for (int j = 0; j + 1 < nb; ++j) gpu_advance(inv, b0 + j, j, gpu_entering[j + 1].data());
      } else {
        ChunkedForward f = checkpoints[v][bi];
        Mat o;
        for (int j = 0; j < nb; ++j) {
          states[v][j] = f.state();
          f.advance(b0 + j, inverse_of(inv, v, j), o);
        }
      }
    });
    for (int j = nb - 1; j >= 0; --j) {
      const int n = b0 + j;
      ref_back.backward(n * C, C, states[nv][j], ref_rows, n * C);
      if (device) {
        const size_t t0 = size_t(n) * C;
        const gpu::ChunkRows in{&s.q[t0 * K], &s.k[t0 * K], &s.v[t0 * V], &s.g[t0 * W], &s.beta[t0],
                                &up.d_o(Eigen::Index(t0), 0)};
        const double* a = pack_inverses(nv, C, [&](size_t v) { return backward_inverse(inverse_of(inv, v, j), v); }, packed);
        backward_gpu->step(in, a, gpu_entering[j].data(),
                           {gpu_dq.data(), gpu_dk.data(), gpu_dv.data(), gpu_dg.data(), gpu_dbeta.data()});
      }
      pool.parallel_for(nv, [&](size_t v) {
        Gradients& g = var_rows[v];
        if (device) {
          const auto take = [&](Mat& m, const std::vector<double>& from) {
            std::copy(from.data() + v * m.size(), from.data() + (v + 1) * m.size(), m.data());
          };
          take(g.dq, gpu_dq), take(g.dk, gpu_dk), take(g.dv, gpu_dv), take(g.dg, gpu_dg), take(g.dbeta, gpu_dbeta);
        } else {
          backs[v].step(n, backward_inverse(inverse_of(inv, v, j), v), states[v][j], g, n * C);
        }
        scores[v].add(n * C, g, ref_rows);
      });
    }
  }
  if (device) {  // dh0: the state gradient entering chunk 0, as returned
    backward_gpu->state_grad(gpu_states.data());
    for (size_t v = 0; v < nv; ++v)
      var_rows[v].dh0 = Eigen::Map<const Mat>(gpu_states.data() + v * kv, K, V).unaryExpr([&](double x) {
        return stored(x, backward_of(v).initial_state_gradient);
      });
  }
  const Mat dh0 = ref_back.state_grad();
  for (size_t v = 0; v < nv; ++v) scores[v].dh0 = rel_rmse(var_rows[v].dh0, dh0);
  std::vector<std::vector<double>> values(tasks.size());
  for (size_t t = 0; t < tasks.size(); ++t)
    values[t] = evaluate_backward(scores[1 + 2 * t], scores[2 + 2 * t], scores[0], s.tokens);
  return values;
}

}  // namespace chunkinv
