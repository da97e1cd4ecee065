#include "downstream/forward.hpp"

#include <algorithm>
#include <cmath>

#include "core/detmath.hpp"

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
  const int C = chunk_, K = s_.key_dim, V = s_.value_dim, W = s_.gate_width(), t0 = n * C;
  const StoragePreset& p = p_;
  const auto acc = [&](double x) { return stored(x, p.accumulate); };
  const auto as = [](Store st) { return [st](double x) { return stored(x, st); }; };
  const auto col = [&](int c) { return W == 1 ? 0 : c; };
  // G: the inclusive cumulative gate within the chunk, per channel (one
  // column for per-token gates). Every decay is exp(G_a - G_b) with a >= b,
  // formed per pair: exp(G) exp(-G) would overflow (real gates reach -167 a token).
  Mat G(C, W);
  for (int c = 0; c < W; ++c) {
    double sum = 0.0;
    for (int i = 0; i < C; ++i) G(i, c) = sum = stored(sum + s_.gate(t0 + i, c), p.gates);
  }
  const auto decay = [&](int a, int b, int c) {  // exp(G_a - G_b), a >= b
    return stored(detmath::exp(stored(G(a, c) - G(b, c), p.gates)), p.gates);
  };
  // exp(G_a) and exp(G_C - G_a) per token and gate column, formed once.
  Mat from_start_m(C, W), to_end_m(C, W);
  for (int a = 0; a < C; ++a)
    for (int c = 0; c < W; ++c) {
      from_start_m(a, c) = stored(detmath::exp(G(a, c)), p.gates);
      to_end_m(a, c) = decay(C - 1, a, c);
    }
  const auto from_start = [&](int a, int c) { return from_start_m(a, c); };

  const Mat A = inverse.unaryExpr(as(p.inverse));
  Mat kb(C, K), vb(C, V), q(C, K), k(C, K);
  for (int j = 0; j < C; ++j) {
    const double b = s_.beta[t0 + j];
    for (int c = 0; c < K; ++c) {
      k(j, c) = s_.k[static_cast<size_t>(t0 + j) * K + c];
      q(j, c) = s_.q[static_cast<size_t>(t0 + j) * K + c];
      kb(j, c) = stored(acc(acc(b * k(j, c)) * from_start(j, col(c))), p.operands);
    }
    for (int e = 0; e < V; ++e) vb(j, e) = stored(acc(b * s_.v[static_cast<size_t>(t0 + j) * V + e]), p.operands);
  }
  // w = A (beta k e^G), u = A (beta v); x = u - w S (fla's v_new).
  const Mat w = product(A, kb).unaryExpr(acc).unaryExpr(as(p.w_u));
  const Mat u = product(A, vb).unaryExpr(acc).unaryExpr(as(p.w_u));
  const Mat h = state_.unaryExpr(as(p.state_operand));
  const Mat ws = product(w, h).unaryExpr(acc);
  Mat x(C, V);
  for (int j = 0; j < C; ++j)
    for (int e = 0; e < V; ++e) x(j, e) = acc(u(j, e) - ws(j, e));
  const Mat xs = x.unaryExpr(as(p.v_new));

  // o_i = scale (q_i e^G_i)^T S + scale sum_{j <= i} (sum_c q_ic k_jc e^(G_ic - G_jc)) x_j
  Mat qk = Mat::Zero(C, C), inter;
  if (!p.per_token_only) {
    Mat qg(C, K);
    for (int i = 0; i < C; ++i)
      for (int c = 0; c < K; ++c) qg(i, c) = stored(acc(q(i, c) * from_start(i, col(c))), p.operands);
    inter = product(qg, h).unaryExpr(acc);
    for (int i = 0; i < C; ++i)
      for (int j = 0; j <= i; ++j) {
        const double one = W == 1 ? decay(i, j, 0) : 0.0;  // per-token gates: one decay for every channel
        double dot = 0.0;
        for (int c = 0; c < K; ++c) dot += q(i, c) * k(j, c) * (W == 1 ? one : decay(i, j, c));
        qk(i, j) = stored(acc(scale_ * acc(dot)), p.qk);
      }
  } else {  // chunk_gated_delta_rule: (q h) e^G and (q.k) e^(G_i - G_j), one gate per token
    inter = product(q, h).unaryExpr(acc);
    for (int i = 0; i < C; ++i) {
      for (int e = 0; e < V; ++e) inter(i, e) = acc(inter(i, e) * from_start(i, 0));
      for (int j = 0; j <= i; ++j) {
        double dot = 0.0;
        for (int c = 0; c < K; ++c) dot += q(i, c) * k(j, c);
        qk(i, j) = stored(acc(acc(dot) * decay(i, j, 0)), p.qk);
      }
    }
  }
  const Mat intra = product(qk, xs).unaryExpr(acc);
  o.resize(C, V);
  for (int i = 0; i < C; ++i)
    for (int e = 0; e < V; ++e) {
      const double a = acc(scale_ * inter(i, e)), b = p.per_token_only ? acc(scale_ * intra(i, e)) : intra(i, e);
      o(i, e) = stored(acc(a + b), p.output);
    }

  // S_C = diag(e^G_C) S + sum_j (k_j e^(G_C - G_j)) x_j^T
  Mat upd;
  if (!p.per_token_only) {
    Mat kg(K, C);  // fla's kg, transposed
    for (int j = 0; j < C; ++j)
      for (int c = 0; c < K; ++c) kg(c, j) = stored(acc(k(j, c) * to_end_m(j, col(c))), p.update);
    upd = product(kg, xs).unaryExpr(acc);
  } else {
    Mat xd(C, V);
    for (int j = 0; j < C; ++j)
      for (int e = 0; e < V; ++e) xd(j, e) = stored(acc(x(j, e) * to_end_m(j, 0)), p.update);
    upd = product(k.transpose(), xd).unaryExpr(acc);
  }
  for (int c = 0; c < K; ++c)
    for (int e = 0; e < V; ++e)
      state_(c, e) = stored(acc(acc(state_(c, e) * from_start(C - 1, col(c))) + upd(c, e)), p.state);
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
