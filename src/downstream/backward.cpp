#include "downstream/backward.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/detmath.hpp"
#include "core/error.hpp"
#include "core/fp.hpp"
#include "core/rng.hpp"
#include "downstream/backward_step.hpp"
#include "downstream/forward.hpp"

namespace chunkinv {
namespace {

// The upstream gradient's stream, beside the sequence's (sources.cpp uses kUser + 8..10).
const Stream kUpstream = static_cast<Stream>(static_cast<uint32_t>(Stream::kUser) + 20);

constexpr Store F64 = Store::kFp64, F32 = Store::kFp32, B16 = Store::kBf16;

//                    acc  A    dops dL   dh_op dh   grads dg   dh0
const BackwardPreset kPresets[] = {
    {"fp64", "no rounding: the FP64 chunked backward", F64, F64, F64, F64, F64, F64, F64, F64, F64},
    {"fla_chunk_kda",
     "fla chunk_kda backward (ops/kda/chunk_bwd.py, ops/common/chunk_delta_h.py bwd_dhu): A as stored (BF16), "
     "the forward's w, u, h, v_new, kg, qg recomputed in BF16; dv, dw and dA rounded to BF16 before each product; "
     "dh stored per chunk in BF16, carried in FP32; FP32 accumulation; dq, dk, dv, dbeta returned in BF16, dg and "
     "dh0 in FP32; dL = -A^T dA A^T kept in FP32 for its products with k",
     F32, B16, B16, F32, B16, F32, B16, F32, F32},
    {"fla_chunk_gdn",
     "fla chunk_gated_delta_rule backward (ops/gated_delta_rule/wy_fast.py prepare_wy_repr_bwd, "
     "ops/common/chunk_delta_h.py bwd_dhu): as fla_chunk_kda's backward, but dL times the pair's decay "
     "exp(G_i - G_j) rounded to BF16 before its products with k; per-token gates",
     F32, B16, B16, B16, B16, F32, B16, F32, F32},
};

Mat zeros(Eigen::Index r, Eigen::Index c) { return Mat::Zero(r, c); }

Mat initial_state(const Sequence& s) {
  return s.h0.empty() ? zeros(s.key_dim, s.value_dim) : Mat(Eigen::Map<const Mat>(s.h0.data(), s.key_dim, s.value_dim));
}

}  // namespace

void recurrence_step(const Sequence& s, int t, Mat& S) {
  const int K = s.key_dim, V = s.value_dim;
  const double* k = &s.k[static_cast<size_t>(t) * K];
  const double* v = &s.v[static_cast<size_t>(t) * V];
  for (int c = 0; c < K; ++c) S.row(c) *= detmath::exp(s.gate(t, c));
  for (int e = 0; e < V; ++e) {
    double p = 0.0;
    for (int c = 0; c < K; ++c) p += k[c] * S(c, e);
    const double r = s.beta[t] * (v[e] - p);
    for (int c = 0; c < K; ++c) S(c, e) += k[c] * r;
  }
}

Upstream upstream_of(const Sequence& s, uint64_t seed, uint64_t index) {
  Upstream u;
  const int T = s.tokens, V = s.value_dim;
  if (!s.d_o.empty()) {
    u.d_o = Eigen::Map<const Mat>(s.d_o.data(), T, V);
  } else {
    u.d_o.resize(T, V);
    const Rng rng(seed, index, kUpstream);
    const size_t n = static_cast<size_t>(T) * V;
    for (size_t i = 0; i < n; i += 2) {
      const auto [a, b] = rng.normal_pair(i >> 1);
      u.d_o.data()[i] = bf16(a);
      if (i + 1 < n) u.d_o.data()[i + 1] = bf16(b);
    }
  }
  if (!s.dht.empty()) u.dht = Eigen::Map<const Mat>(s.dht.data(), s.key_dim, V);
  return u;
}

Gradients::Gradients(const Sequence& s)
    : dq(zeros(s.tokens, s.key_dim)),
      dk(zeros(s.tokens, s.key_dim)),
      dv(zeros(s.tokens, s.value_dim)),
      dg(zeros(s.tokens, s.gate_width())),
      dbeta(zeros(s.tokens, 1)),
      dh0(zeros(s.key_dim, s.value_dim)) {}

Gradients::Gradients(const Sequence& s, int rows)
    : dq(zeros(rows, s.key_dim)),
      dk(zeros(rows, s.key_dim)),
      dv(zeros(rows, s.value_dim)),
      dg(zeros(rows, s.gate_width())),
      dbeta(zeros(rows, 1)),
      dh0(zeros(s.key_dim, s.value_dim)) {}

std::vector<std::string> backward_storage_names() {
  std::vector<std::string> n;
  for (const BackwardPreset& p : kPresets) n.emplace_back(p.name);
  return n;
}

const BackwardPreset& find_backward_storage(std::string_view storage) {
  for (const BackwardPreset& p : kPresets)
    if (p.name == storage) return p;
  throw UsageError(fmt::format("axis storage = {} has no backward (presets with one: {}); FlashKDA ships no backward",
                               storage, fmt::join(backward_storage_names(), ", ")));
}

const BackwardPreset& fp64_backward() { return kPresets[0]; }

// ---------------------------------------------------------------- reference

RecurrentBackward::RecurrentBackward(const Sequence& s, const Upstream& up, double scale)
    : s_(s), up_(up), scale_(scale) {
  ds_ = up.dht.size() ? up.dht : zeros(s.key_dim, s.value_dim);
}

void RecurrentBackward::backward(int first, int count, const Mat& state_before, Gradients& out, int first_row) {
  const int K = s_.key_dim, V = s_.value_dim, W = s_.gate_width();
  std::vector<Mat> before(count);  // the state before each token of the stretch
  Mat S = state_before;
  for (int r = 0; r < count; ++r) {
    before[r] = S;
    recurrence_step(s_, first + r, S);
  }
  Vec res(V), rr(V), dr(V), dp(V), dov(V);
  for (int r = count - 1; r >= 0; --r) {
    const int t = first + r;
    const double* k = &s_.k[static_cast<size_t>(t) * K];
    const double* q = &s_.q[static_cast<size_t>(t) * K];
    const double* v = &s_.v[static_cast<size_t>(t) * V];
    const double beta = s_.beta[t];
    Mat Sp = before[r];  // S' = diag(e^g_t) S_{t-1}
    for (int c = 0; c < K; ++c) Sp.row(c) *= detmath::exp(s_.gate(t, c));
    for (int e = 0; e < V; ++e) {
      double p = 0.0;
      for (int c = 0; c < K; ++c) p += k[c] * Sp(c, e);
      res[e] = v[e] - p;
      rr[e] = beta * res[e];
      dov[e] = up_.d_o(t, e);
    }
    // o_t = scale S_t^T q: dS += scale q do^T; dq = scale S_t do (S_t = S' + k r^T).
    for (int c = 0; c < K; ++c) {
      double acc = 0.0;
      for (int e = 0; e < V; ++e) {
        acc += (Sp(c, e) + k[c] * rr[e]) * dov[e];
        ds_(c, e) += scale_ * q[c] * dov[e];
      }
      out.dq(t - first_row, c) = scale_ * acc;
    }
    // S_t = S' + k r^T: dk = dS r; dr = dS^T k.
    for (int c = 0; c < K; ++c) {
      double acc = 0.0;
      for (int e = 0; e < V; ++e) acc += ds_(c, e) * rr[e];
      out.dk(t - first_row, c) = acc;
    }
    double dbeta = 0.0;
    for (int e = 0; e < V; ++e) {
      double acc = 0.0;
      for (int c = 0; c < K; ++c) acc += ds_(c, e) * k[c];
      dr[e] = acc;
      dbeta += acc * res[e];  // r = beta (v - p)
      out.dv(t - first_row, e) = beta * acc;
      dp[e] = -beta * acc;
    }
    out.dbeta(t - first_row, 0) = dbeta;
    // p = S'^T k: dS' = dS + k dp^T; dk += S' dp. Then S' = diag(e^g) S_{t-1}.
    double dg_token = 0.0;
    for (int c = 0; c < K; ++c) {
      double acc = 0.0, dg = 0.0;
      const double a = detmath::exp(s_.gate(t, c));
      for (int e = 0; e < V; ++e) {
        acc += Sp(c, e) * dp[e];
        const double dsp = ds_(c, e) + k[c] * dp[e];
        dg += dsp * Sp(c, e);
        ds_(c, e) = a * dsp;
      }
      out.dk(t - first_row, c) += acc;
      if (W == 1) dg_token += dg;
      else out.dg(t - first_row, c) = dg;
    }
    if (W == 1) out.dg(t - first_row, 0) = dg_token;
  }
}

Gradients recurrent_backward(const Sequence& s, const Upstream& up, double scale) {
  const int T = s.tokens;
  const int stretch = std::max(1, static_cast<int>(std::ceil(std::sqrt(static_cast<double>(T)))));
  std::vector<Mat> checkpoints;  // the state before tokens 0, stretch, 2 stretch, ...
  Mat S = initial_state(s);
  for (int t = 0; t < T; ++t) {
    if (t % stretch == 0) checkpoints.push_back(S);
    recurrence_step(s, t, S);
  }
  Gradients g(s);
  RecurrentBackward b(s, up, scale);
  for (int i = static_cast<int>(checkpoints.size()) - 1; i >= 0; --i) {
    const int first = i * stretch;
    b.backward(first, std::min(stretch, T - first), checkpoints[i], g);
  }
  g.dh0 = b.state_grad();
  return g;
}

// ---------------------------------------------------------------- chunked

ChunkedBackward::ChunkedBackward(const Sequence& s, int chunk, const StoragePreset& forward,
                                 const BackwardPreset& backward, const Upstream& up, double scale)
    : s_(s), chunk_(chunk), f_(forward), b_(backward), up_(up), scale_(scale) {
  ds_ = up.dht.size() ? up.dht : zeros(s.key_dim, s.value_dim);
  ds_ = ds_.unaryExpr([&](double x) { return stored(x, b_.grad_state); });
}

void ChunkedBackward::step(int n, const Mat& A, const Mat& state_in, Gradients& out, int first_row) {
  const int C = chunk_, K = s_.key_dim, V = s_.value_dim, W = s_.gate_width();
  const size_t t0 = size_t(n) * C, row = t0 - size_t(first_row);
  work_.v.resize(backward_step::work_doubles(C, K, V, W));
  backward_step::Args a;
  a.q = &s_.q[t0 * K];
  a.k = &s_.k[t0 * K];
  a.v = &s_.v[t0 * V];
  a.g = &s_.g[t0 * W];
  a.beta = &s_.beta[t0];
  a.d_o = &up_.d_o(Eigen::Index(t0), 0);
  a.A = A.data();
  a.state_in = state_in.data();
  a.ds = ds_.data();
  a.dq = &out.dq(Eigen::Index(row), 0);
  a.dk = &out.dk(Eigen::Index(row), 0);
  a.dv = &out.dv(Eigen::Index(row), 0);
  a.dg = &out.dg(Eigen::Index(row), 0);
  a.dbeta = &out.dbeta(Eigen::Index(row), 0);
  a.work = work_.v.data();
  a.C = C;
  a.K = K;
  a.V = V;
  a.W = W;
  a.scale = scale_;
  a.p = f_;
  a.b = backward_stores_of(b_);
  stages::Serial x;
  backward_step::step(a, x);
  if (n == 0) out.dh0 = ds_.unaryExpr([&](double y) { return stored(y, b_.initial_state_gradient); });
}

Gradients chunked_backward(const Sequence& s, int chunk, const std::vector<Mat>& forward_inverses,
                           const std::vector<Mat>& backward_inverses, const StoragePreset& forward,
                           const BackwardPreset& backward, const Upstream& up, double scale) {
  const int N = s.chunks(chunk);
  const int stretch = std::max(1, static_cast<int>(std::ceil(std::sqrt(static_cast<double>(N)))));
  std::vector<ChunkedForward> checkpoints;  // the forward before chunks 0, stretch, 2 stretch, ...
  ChunkedForward f(s, chunk, forward, scale);
  Mat rows;
  for (int n = 0; n < N; ++n) {
    if (n % stretch == 0) checkpoints.push_back(f);
    f.advance(n, forward_inverses[n], rows);
  }
  Gradients g(s);
  ChunkedBackward b(s, chunk, forward, backward, up, scale);
  for (int i = static_cast<int>(checkpoints.size()) - 1; i >= 0; --i) {
    const int first = i * stretch, count = std::min(stretch, N - first);
    ChunkedForward again = checkpoints[i];
    std::vector<Mat> states;
    for (int n = first; n < first + count; ++n) {
      states.push_back(again.state());
      again.advance(n, forward_inverses[n], rows);
    }
    for (int n = first + count - 1; n >= first; --n) b.step(n, backward_inverses[n], states[n - first], g);
  }
  return g;
}

}  // namespace chunkinv
