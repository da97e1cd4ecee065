#include "downstream/backward.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/detmath.hpp"
#include "core/error.hpp"
#include "core/fp.hpp"
#include "core/rng.hpp"
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
  const int C = chunk_, K = s_.key_dim, V = s_.value_dim, W = s_.gate_width(), t0 = n * C;
  const StoragePreset& p = f_;
  const BackwardPreset& b = b_;
  const auto acc = [&](double x) { return stored(x, b.accumulate); };
  const auto as = [](Store st) { return [st](double x) { return stored(x, st); }; };
  const auto col = [&](int c) { return W == 1 ? 0 : c; };

  // ---- The forward's values, recomputed as the forward stores them
  // (ChunkedForward::advance; fla's recompute_w_u_fwd and fwd_h).
  Mat G(C, W);
  for (int c = 0; c < W; ++c) {
    double sum = 0.0;
    for (int i = 0; i < C; ++i) G(i, c) = sum = stored(sum + s_.gate(t0 + i, c), p.gates);
  }
  const auto decay = [&](int a, int bb, int c) {  // exp(G_a - G_b), a >= b, per pair
    return stored(detmath::exp(stored(G(a, c) - G(bb, c), p.gates)), p.gates);
  };
  std::vector<double> pair_decay(static_cast<size_t>(C) * C * W);  // (i, j, c), j <= i: formed once
  for (int i = 0; i < C; ++i)
    for (int j = 0; j <= i; ++j)
      for (int c = 0; c < W; ++c) pair_decay[(static_cast<size_t>(i) * C + j) * W + c] = decay(i, j, c);
  const auto E = [&](int i, int j, int c) { return pair_decay[(static_cast<size_t>(i) * C + j) * W + c]; };
  Mat from_start(C, W), to_end(C, W);
  for (int a = 0; a < C; ++a)
    for (int c = 0; c < W; ++c) {
      from_start(a, c) = stored(detmath::exp(G(a, c)), p.gates);
      to_end(a, c) = decay(C - 1, a, c);
    }
  Mat k(C, K), q(C, K), v(C, V), kb(C, K), vb(C, V), qg(C, K), kg(C, K);
  std::vector<double> beta(C);
  for (int j = 0; j < C; ++j) {
    beta[j] = s_.beta[t0 + j];
    for (int c = 0; c < K; ++c) {
      k(j, c) = s_.k[static_cast<size_t>(t0 + j) * K + c];
      q(j, c) = s_.q[static_cast<size_t>(t0 + j) * K + c];
      kb(j, c) = stored(acc(acc(beta[j] * k(j, c)) * from_start(j, col(c))), p.operands);
      qg(j, c) = stored(acc(q(j, c) * from_start(j, col(c))), p.operands);
      kg(j, c) = stored(acc(k(j, c) * to_end(j, col(c))), p.update);
    }
    for (int e = 0; e < V; ++e) {
      v(j, e) = s_.v[static_cast<size_t>(t0 + j) * V + e];
      vb(j, e) = stored(acc(beta[j] * v(j, e)), p.operands);
    }
  }
  const Mat w = product(A, kb).unaryExpr(acc).unaryExpr(as(p.w_u));
  const Mat u = product(A, vb).unaryExpr(acc).unaryExpr(as(p.w_u));
  const Mat h = state_in.unaryExpr(as(p.state_operand));
  const Mat ws = product(w, h).unaryExpr(acc);
  Mat xs(C, V);  // v_new as stored
  for (int j = 0; j < C; ++j)
    for (int e = 0; e < V; ++e) xs(j, e) = stored(acc(u(j, e) - ws(j, e)), p.v_new);
  // The scores P_ij = scale sum_c q_ic k_jc e^(G_ic - G_jc), j <= i, as stored.
  Mat P = zeros(C, C);
  for (int i = 0; i < C; ++i)
    for (int j = 0; j <= i; ++j) {
      double dot = 0.0;
      for (int c = 0; c < K; ++c) dot += q(i, c) * k(j, c) * E(i, j, col(c));
      P(i, j) = stored(acc(scale_ * acc(dot)), p.qk);
    }

  // ---- The backward. o = scale qg h + P x; S_C = diag(e^G_C) S0 + kg^T x;
  // x = u - w S0; w = A kb; u = A vb.
  const Mat& d_o = up_.d_o;
  const Mat dob = d_o.middleRows(t0, C);
  const Mat dsh = ds_.unaryExpr(as(b.grad_state_operand));  // fla's dh of this chunk
  // dx = P^T do + kg dS (fla: chunk_kda_bwd_dAv's dv, then bwd_dhu's dv2)
  const Mat dx_local = product(P.transpose(), dob).unaryExpr(acc).unaryExpr(as(b.grad_operands));
  // chunk_gated_delta_rule (per-token gates) multiplies k dh by the decay to the chunk's end in FP32
  // after the product; chunk_kda reads the decayed key kg (BF16) in it.
  Mat kds;
  if (p.per_token_only) {
    kds = product(k, dsh).unaryExpr(acc);
    for (int j = 0; j < C; ++j)
      for (int e = 0; e < V; ++e) kds(j, e) = acc(kds(j, e) * to_end(j, 0));
  } else {
    kds = product(kg, dsh).unaryExpr(acc);
  }
  Mat dx(C, V);
  for (int j = 0; j < C; ++j)
    for (int e = 0; e < V; ++e) dx(j, e) = stored(acc(dx_local(j, e) + kds(j, e)), b.grad_operands);
  // dP = do x^T (i >= j), the scores' gradient.
  const Mat dP = product(dob, xs.transpose()).unaryExpr(acc);

  // The state gradient to the previous chunk: dS0 = diag(e^G_C) dS + scale qg^T do - w^T dx.
  const Mat qdo = product(qg.transpose(), dob).unaryExpr(acc);
  const Mat wdx = product(w.transpose(), dx).unaryExpr(acc);
  Mat ds_prev(K, V);
  for (int c = 0; c < K; ++c)
    for (int e = 0; e < V; ++e)
      ds_prev(c, e) = stored(acc(acc(ds_(c, e) * from_start(C - 1, col(c))) + acc(acc(scale_ * qdo(c, e)) - wdx(c, e))),
                             b.grad_state);

  // Per-token sums in FP64, rounded once at the end (FP32 accumulation, modelled).
  Mat dq = zeros(C, K), dk = zeros(C, K), dG = zeros(C, K), dv(C, V);
  std::vector<double> dbeta(C, 0.0);
  // qg = q e^G (inter-chunk output): dq = scale (do h^T) e^G; dG += dq q.
  const Mat doh = product(dob, h.transpose()).unaryExpr(acc);
  for (int i = 0; i < C; ++i)
    for (int c = 0; c < K; ++c) {
      const double d = acc(acc(doh(i, c) * from_start(i, col(c))) * scale_);
      dq(i, c) += d;
      dG(i, c) += d * q(i, c);
    }
  // kg = k e^(G_C - G_j) (the update): dk += (x dS^T) e^(G_C - G_j); dG_j -= .. kg; dG_C += sum_j .. kg.
  // diag(e^G_C) S0: dG_C += e^G_C sum_e dS S0.
  const Mat xds = product(xs, dsh.transpose()).unaryExpr(acc);
  for (int c = 0; c < K; ++c) {
    double last = 0.0;
    for (int e = 0; e < V; ++e) last += h(c, e) * dsh(c, e);
    last = acc(acc(last) * from_start(C - 1, col(c)));
    for (int j = 0; j < C; ++j) {
      dk(j, c) += xds(j, c) * to_end(j, col(c));
      const double t = xds(j, c) * (p.per_token_only ? k(j, c) * to_end(j, 0) : kg(j, c));
      dG(j, c) -= t;
      last += t;
    }
    dG(C - 1, c) += last;
  }
  // x = u - w S0: du = dx, dw = -dx S0^T (fla rounds dw to A's dtype).
  const Mat dw = product(dx, h.transpose()).unaryExpr(acc).unaryExpr(as(b.grad_operands)) * -1.0;
  const Mat& du = dx;
  // w = A kb, u = A vb: dA = dw kb^T + du vb^T; dkb = A^T dw; dvb = A^T du.
  const Mat dA1 = product(dw, kb.transpose()).unaryExpr(acc), dA2 = product(du, vb.transpose()).unaryExpr(acc);
  const Mat dkb = product(A.transpose(), dw).unaryExpr(acc), dvb = product(A.transpose(), du).unaryExpr(acc);
  for (int j = 0; j < C; ++j) {
    for (int c = 0; c < K; ++c) {
      const double e = from_start(j, col(c));
      dk(j, c) += dkb(j, c) * beta[j] * e;
      dbeta[j] += dkb(j, c) * k(j, c) * e;
      dG(j, c) += dkb(j, c) * kb(j, c);
    }
    for (int e = 0; e < V; ++e) {
      dv(j, e) = acc(beta[j] * dvb(j, e));
      dbeta[j] += dvb(j, e) * v(j, e);
    }
  }
  // The inverse's backward: A = (I + L)^-1, so dL = -A^T dA A^T, its strict lower part
  // (fla: dA rounded to A's dtype before each of the two products).
  Mat dA = zeros(C, C);
  for (int i = 0; i < C; ++i)
    for (int j = 0; j < i; ++j) dA(i, j) = stored(acc(dA1(i, j) + dA2(i, j)), b.grad_operands);
  const Mat dAA = product(dA, A.transpose()).unaryExpr(acc).unaryExpr(as(b.grad_operands));
  const Mat dL = product(A.transpose(), dAA).unaryExpr(acc) * -1.0;
  // L_ij = beta_i sum_c k_ic k_jc e^(G_ic - G_jc), i > j; P_ij = scale sum_c q_ic k_jc e^(G_ic - G_jc), i >= j.
  for (int i = 0; i < C; ++i)
    for (int j = 0; j <= i; ++j) {
      const double sp = scale_ * dP(i, j);
      // dL as its products with k read it: per-token gates fold the pair's decay in first (GDN's kernel).
      const double l = j < i ? stored(W == 1 ? acc(dL(i, j) * E(i, j, 0)) : dL(i, j), b.dl_operand) : 0.0;
      if (l == 0.0 && sp == 0.0) continue;
      double lsum = 0.0;
      for (int c = 0; c < K; ++c) {
        const double e = E(i, j, col(c)), le = W == 1 ? l : l * e;  // dL_ij e_ijc
        const double kk = k(i, c) * k(j, c);
        lsum += le * kk;
        dk(i, c) += le * beta[i] * k(j, c);
        dk(j, c) += le * beta[i] * k(i, c) + sp * q(i, c) * e;
        dq(i, c) += sp * k(j, c) * e;
        const double dgt = le * beta[i] * kk + sp * q(i, c) * k(j, c) * e;
        dG(i, c) += dgt;
        dG(j, c) -= dgt;
      }
      dbeta[i] += lsum;
    }

  // G is the chunk's inclusive cumsum: dg_t = sum_{i >= t} dG_i (over the chunk only), per channel or summed.
  Mat dg = zeros(C, W);
  for (int c = 0; c < K; ++c) {
    double sum = 0.0;
    for (int i = C - 1; i >= 0; --i) {
      sum += dG(i, c);
      dg(i, col(c)) += sum;
    }
  }
  const auto out_g = [&](double x) { return stored(acc(x), b.gradients); };
  for (int i = 0; i < C; ++i) {
    for (int c = 0; c < K; ++c) {
      out.dq(t0 + i - first_row, c) = out_g(dq(i, c));
      out.dk(t0 + i - first_row, c) = out_g(dk(i, c));
    }
    for (int e = 0; e < V; ++e) out.dv(t0 + i - first_row, e) = stored(dv(i, e), b.gradients);
    for (int c = 0; c < W; ++c) out.dg(t0 + i - first_row, c) = stored(acc(dg(i, c)), b.gate_gradient);
    out.dbeta(t0 + i - first_row, 0) = out_g(dbeta[i]);
  }
  ds_ = ds_prev;
  if (n == 0) out.dh0 = ds_.unaryExpr(as(b.initial_state_gradient));
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
