#include "downstream/forward.hpp"

#include <algorithm>
#include <cmath>

#include "core/detmath.hpp"
#include "downstream/forward_step.hpp"

namespace chunkinv {

double default_scale(const Sequence& s) { return 1.0 / std::sqrt(static_cast<double>(s.key_dim)); }

Mat product(const Mat& a, const Mat& b) {
  Mat out = Mat::Zero(a.rows(), b.cols());
  for (Eigen::Index i = 0; i < a.rows(); ++i)
    for (Eigen::Index k = 0; k < a.cols(); ++k) {
      const double x = a(i, k);
      if (x == 0.0) continue;  // strict-lower inverses: half the work; adds of +0 change nothing
      for (Eigen::Index j = 0; j < b.cols(); ++j) out(i, j) += x * b(k, j);
    }
  return out;
}

Recurrence::Recurrence(const Sequence& s, double scale) : s_(s), scale_(scale) {
  state_ = s.h0.empty() ? Mat::Zero(s.key_dim, s.value_dim)
                        : Mat(Eigen::Map<const Mat>(s.h0.data(), s.key_dim, s.value_dim));
}

void recurrence_dots(const double* a, const Mat& S, double* out) {
  const Eigen::Index K = S.rows(), V = S.cols();
  constexpr int R = kRecurrenceSlices;
  thread_local std::vector<double> chains;  // [slice][chain][column]
  chains.assign(static_cast<size_t>(R) * 2 * V, 0.0);
  for (Eigen::Index c = 0; c < K; ++c) {
    double* chain = &chains[static_cast<size_t>((c / 2) % R * 2 + c % 2) * V];
    const double x = a[c];
    const double* row = &S(c, 0);
    for (Eigen::Index e = 0; e < V; ++e) chain[e] = std::fma(x, row[e], chain[e]);
  }
  for (Eigen::Index e = 0; e < V; ++e) {
    double p[R];
    for (int r = 0; r < R; ++r) p[r] = chains[static_cast<size_t>(2 * r) * V + e] + chains[static_cast<size_t>(2 * r + 1) * V + e];
    out[e] = ((p[0] + p[4]) + (p[1] + p[5])) + ((p[2] + p[6]) + (p[3] + p[7]));
  }
}

// Every operation is one IEEE operation, an explicit fma or a rounded * or
// + (the build contracts nothing: -ffp-contract=off), in the GPU form's
// order: S(c, e) * exp(g_c); the dots as recurrence_dots; pred = beta (v - dot);
// S(c, e) = fma(k_c, pred_e, S(c, e)); o = scale * dot.
void Recurrence::advance(int first, int count, Mat& o) {
  const int K = s_.key_dim, V = s_.value_dim;
  o.resize(count, V);
  decay_.resize(K);
  dots_.resize(V);
  std::vector<double> pred(V);
  for (int r = 0; r < count; ++r) {
    const int t = first + r;
    const double* k = &s_.k[static_cast<size_t>(t) * K];
    const double* q = &s_.q[static_cast<size_t>(t) * K];
    const double* v = &s_.v[static_cast<size_t>(t) * V];
    if (s_.gating == Gating::kToken) std::fill(decay_.begin(), decay_.end(), detmath::exp(s_.gate(t, 0)));
    else for (int c = 0; c < K; ++c) decay_[c] = detmath::exp(s_.gate(t, c));
    for (int c = 0; c < K; ++c)
      for (int e = 0; e < V; ++e) state_(c, e) *= decay_[c];  // S = diag(e^g_t) S
    recurrence_dots(k, state_, dots_.data());
    for (int e = 0; e < V; ++e) pred[e] = s_.beta[t] * (v[e] - dots_[e]);  // beta (v - S^T k), with the decayed S
    for (int c = 0; c < K; ++c)
      for (int e = 0; e < V; ++e) state_(c, e) = std::fma(k[c], pred[e], state_(c, e));
    recurrence_dots(q, state_, dots_.data());
    for (int e = 0; e < V; ++e) o(r, e) = scale_ * dots_[e];
  }
}

ChunkedForward::ChunkedForward(const Sequence& s, int chunk, const StoragePreset& preset, double scale)
    : s_(s), chunk_(chunk), p_(preset), scale_(scale) {
  state_ = s.h0.empty() ? Mat::Zero(s.key_dim, s.value_dim)
                        : Mat(Eigen::Map<const Mat>(s.h0.data(), s.key_dim, s.value_dim));
  state_ = state_.unaryExpr([&](double x) { return stored(x, p_.state); });
}

Mat ChunkedForward::final_state() const {
  return state_.unaryExpr([&](double x) { return stored(x, p_.final_state); });
}

void ChunkedForward::advance(int n, const Mat& inverse, Mat& o) {
  const int C = chunk_, K = s_.key_dim, V = s_.value_dim, W = s_.gate_width();
  const size_t t0 = size_t(n) * C;
  o.resize(C, V);
  work_.v.resize(forward_step::work_doubles(C, K, V, W));
  forward_step::Args a;
  a.q = &s_.q[t0 * K];
  a.k = &s_.k[t0 * K];
  a.v = &s_.v[t0 * V];
  a.g = &s_.g[t0 * W];
  a.beta = &s_.beta[t0];
  a.inverse = inverse.data();
  a.state = state_.data();
  a.o = o.data();
  a.work = work_.v.data();
  a.C = C;
  a.K = K;
  a.V = V;
  a.W = W;
  a.scale = scale_;
  a.p = p_;  // the preset's rounding points
  stages::Serial x;
  forward_step::step(a, x);
}

Trace recurrent_forward(const Sequence& s, int chunk, double scale) {
  Trace t;
  t.o.resize(s.tokens, s.value_dim);
  Recurrence r(s, scale);
  Mat rows;
  for (int n = 0; n < s.chunks(chunk); ++n) {
    r.advance(n * chunk, chunk, rows);
    t.o.middleRows(static_cast<Eigen::Index>(n) * chunk, chunk) = rows;
    t.boundaries.push_back(r.state());
  }
  t.final_state = r.state();
  return t;
}

Trace chunked_forward(const Sequence& s, int chunk, const std::vector<Mat>& inverses, const StoragePreset& preset,
                      double scale) {
  Trace t;
  t.o.resize(s.tokens, s.value_dim);
  ChunkedForward f(s, chunk, preset, scale);
  Mat rows;
  for (int n = 0; n < s.chunks(chunk); ++n) {
    f.advance(n, inverses[n], rows);
    t.o.middleRows(static_cast<Eigen::Index>(n) * chunk, chunk) = rows;
    t.boundaries.push_back(f.state());
  }
  t.final_state = f.final_state();
  return t;
}

}  // namespace chunkinv
