// One chunk of the chunked backward (docs/downstream.md, "Backward"), one
// source for the host and (next) the device, as forward_step.hpp is for the
// forward: ChunkedBackward runs it on one thread. Every value is formed
// element by element, each by the same IEEE operations in the same order
// whatever thread forms it:
// - a product's entry is a sum from +0, k ascending, the terms whose left
//   factor is exactly zero left out;
// - the gradients the CPU form scatters over the chunk's (i, j) pairs (dq,
//   dk, dg, dbeta) are gathered here per element, their terms taken in the
//   scatter's order: pairs (i, j), j <= i, in row order, a pair left out
//   where both its dL and its score gradient are zero; within pair (r, r)
//   r's role as i before its role as j.
#pragma once
#include <cstddef>

#include "core/detmath_hd.hpp"
#include "core/hd.hpp"
#include "downstream/stages_hd.hpp"
#include "downstream/store_hd.hpp"

namespace chunkinv::backward_step {

using stages::each;
using stages::each2;
using stages::each4;

// A backward preset's rounding points (BackwardPreset's fields, in its order).
struct BackwardStores {
  Store accumulate, inverse, grad_operands, dl_operand, grad_state_operand, grad_state, gradients, gate_gradient,
      initial_state_gradient;
};

// One chunk's inputs and outputs, all row-major, doubles.
struct Args {
  const double *q, *k;   // C x K
  const double* v;       // C x V
  const double* g;       // C x W
  const double* beta;    // C
  const double* d_o;     // C x V: the chunk's rows of the upstream gradient
  const double* A;       // C x C: the inverse as the backward's products read it
  const double* state_in;  // K x V: the state entering the chunk, as the forward carried it
  double* ds;            // K x V: the state gradient leaving the chunk in, entering it out
  double *dq, *dk;       // C x K
  double* dv;            // C x V
  double* dg;            // C x W
  double* dbeta;         // C
  double* work;          // work_doubles(C, K, V, W)
  int C = 0, K = 0, V = 0, W = 1;
  double scale = 1.0;
  Stores p{};            // the forward's storage (what the backward recomputes)
  BackwardStores b{};
};

CHUNKINV_HD inline size_t work_doubles(int C, int K, int V, int W) {
  const size_t c = size_t(C), k = size_t(K), v = size_t(V), w = size_t(W);
  // G, from, to_end (C x W); lastbase (K); E (C x C x W); P, dP, dA, dAA, l, sp, dL (C x C); kb, qg, kg, w,
  // doh, xds, dw, dkb, dG (C x K); vb, u, xs, dx, dvb (C x V); h, dsh (K x V)
  return 3 * c * w + k + c * c * w + 7 * c * c + 9 * c * k + 5 * c * v + 2 * k * v;
}

// Entries (r, e0 .. e0 + m - 1) of a product at once, m <= 4: a(k) the left
// factor's row r, brow(k) the right factor's row k from column e0. Each is
// sum_k a(k) b(k) from +0, k ascending, the terms with a(k) == 0 left out;
// four independent chains (the host's speed), each the same operations as alone.
template <class FA, class FB>
CHUNKINV_HD inline void gather4(int n, int m, FA&& a, FB&& brow, double* out) {
  const int o1 = m > 1 ? 1 : 0, o2 = m > 2 ? 2 : 0, o3 = m > 3 ? 3 : 0;
  double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
  for (int k = 0; k < n; ++k) {
    const double x = a(k);
    if (x == 0.0) continue;
    const double* bk = brow(k);
    s0 = s0 + x * bk[0];
    s1 = s1 + x * bk[o1];
    s2 = s2 + x * bk[o2];
    s3 = s3 + x * bk[o3];
  }
  out[0] = s0, out[1] = s1, out[2] = s2, out[3] = s3;
}

// The same where the right factor's four entries of row k are b(k, 0..m-1) (any layout).
template <class FA, class FB>
CHUNKINV_HD inline void gather4f(int n, int m, FA&& a, FB&& b, double* out) {
  const int o1 = m > 1 ? 1 : 0, o2 = m > 2 ? 2 : 0, o3 = m > 3 ? 3 : 0;
  double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
  for (int k = 0; k < n; ++k) {
    const double x = a(k);
    if (x == 0.0) continue;
    s0 = s0 + x * b(k, 0);
    s1 = s1 + x * b(k, o1);
    s2 = s2 + x * b(k, o2);
    s3 = s3 + x * b(k, o3);
  }
  out[0] = s0, out[1] = s1, out[2] = s2, out[3] = s3;
}


template <class X>
CHUNKINV_HD inline void step(const Args& a, X& x) {
  const int C = a.C, K = a.K, V = a.V, W = a.W;
  const Stores& p = a.p;
  const BackwardStores& b = a.b;
  const auto acc = [&](double y) { return stored(y, b.accumulate); };
  const auto col = [&](int c) { return W == 1 ? 0 : c; };
  const auto Q = [&](int i, int c) { return a.q[size_t(i) * K + c]; };
  const auto Kk = [&](int i, int c) { return a.k[size_t(i) * K + c]; };
  const auto Vv = [&](int i, int e) { return a.v[size_t(i) * V + e]; };
  const auto Do = [&](int i, int e) { return a.d_o[size_t(i) * V + e]; };
  const auto Am = [&](int i, int j) { return a.A[size_t(i) * C + j]; };

  double* G = a.work;                 // C x W
  double* from = G + C * W;           // C x W
  double* to_end = from + C * W;      // C x W
  double* lastbase = to_end + C * W;  // K
  double* E = lastbase + K;           // C x C x W: exp(G_i - G_j), j <= i
  double* P = E + size_t(C) * C * W;  // C x C
  double* dP = P + C * C;             // C x C
  double* dA = dP + C * C;            // C x C
  double* dAA = dA + C * C;           // C x C
  double* l = dAA + C * C;            // C x C: dL as its products read it (j < i)
  double* sp = l + C * C;             // C x C: scale dP
  double* dL = sp + C * C;            // C x C
  double* kb = dL + C * C;            // C x K
  double* qg = kb + C * K;            // C x K
  double* kg = qg + C * K;            // C x K
  double* w = kg + C * K;             // C x K
  double* doh = w + C * K;            // C x K
  double* xds = doh + C * K;          // C x K
  double* dw = xds + C * K;           // C x K
  double* dkb = dw + C * K;           // C x K
  double* dG = dkb + C * K;           // C x K
  double* vb = dG + C * K;            // C x V
  double* u = vb + C * V;             // C x V
  double* xs = u + C * V;             // C x V
  double* dx = xs + C * V;            // C x V
  double* dvb = dx + C * V;           // C x V
  double* h = dvb + C * V;            // K x V
  double* dsh = h + K * V;            // K x V
  const auto Ee = [&](int i, int j, int c) { return E[(size_t(i) * C + j) * W + c]; };

  // ---- The forward's values, recomputed as the forward stores them.
  each(x, size_t(W), [&](size_t c) {
    double sum = 0.0;
    for (int i = 0; i < C; ++i) G[i * W + c] = sum = stored(sum + a.g[i * W + c], p.gates);
  });
  each2(x, K, V, [&](int, int, int i) {
    h[i] = stored(a.state_in[i], p.state_operand);
    dsh[i] = stored(a.ds[i], b.grad_state_operand);
  });
  x.sync();
  const auto decay = [&](int ra, int rb, int c) {
    return stored(detmath::hd::exp(stored(G[ra * W + c] - G[rb * W + c], p.gates)), p.gates);
  };
  each(x, size_t(C) * C, [&](size_t ij) {  // a thread a pair, its channels in turn
    const int r = int(ij / C), j = int(ij % C);
    if (j <= r)
      for (int c = 0; c < W; ++c) E[ij * W + c] = decay(r, j, c);
  });
  each2(x, C, W, [&](int r, int c, int i) {
    from[i] = stored(detmath::hd::exp(G[i]), p.gates);
    to_end[i] = decay(C - 1, r, c);
  });
  x.sync();
  each2(x, C, K, [&](int j, int c, int i) {
    kb[i] = stored(acc(acc(a.beta[j] * a.k[i]) * from[j * W + col(c)]), p.operands);
    qg[i] = stored(acc(a.q[i] * from[j * W + col(c)]), p.operands);
    kg[i] = stored(acc(a.k[i] * to_end[j * W + col(c)]), p.update);
  });
  each2(x, C, V, [&](int j, int, int i) { vb[i] = stored(acc(a.beta[j] * a.v[i]), p.operands); });
  each(x, size_t(C) * C, [&](size_t ij) {  // the scores as stored, j <= i
    const int i = int(ij / C), j = int(ij % C);
    if (j > i) {
      P[ij] = 0.0;
      return;
    }
    double d = 0.0;
    for (int c = 0; c < K; ++c) d = d + Q(i, c) * Kk(j, c) * Ee(i, j, col(c));
    P[ij] = stored(acc(a.scale * acc(d)), p.qk);
  });
  x.sync();
  each4(x, C, K, [&](int r, int c0, int m) {
    double d[4];
    gather4(C, m, [&](int k) { return Am(r, k); }, [&](int k) { return kb + k * K + c0; }, d);
    for (int t = 0; t < m; ++t) w[r * K + c0 + t] = stored(acc(d[t]), p.w_u);
  });
  each4(x, C, V, [&](int r, int e0, int m) {
    double d[4];
    gather4(C, m, [&](int k) { return Am(r, k); }, [&](int k) { return vb + k * V + e0; }, d);
    for (int t = 0; t < m; ++t) u[r * V + e0 + t] = stored(acc(d[t]), p.w_u);
  });
  x.sync();
  each4(x, C, V, [&](int j, int e0, int m) {
    double d[4];
    gather4(K, m, [&](int k) { return w[j * K + k]; }, [&](int k) { return h + k * V + e0; }, d);
    for (int t = 0; t < m; ++t) xs[j * V + e0 + t] = stored(acc(u[j * V + e0 + t] - acc(d[t])), p.v_new);
  });
  x.sync();

  // ---- The backward.
  each4(x, C, V, [&](int j, int e0, int m) {  // dx = P^T do + k dS (as the kernel decays it)
    double local[4], kds[4];
    gather4(C, m, [&](int k) { return P[k * C + j]; }, [&](int k) { return a.d_o + size_t(k) * V + e0; }, local);
    if (p.per_token_only) gather4(K, m, [&](int c) { return Kk(j, c); }, [&](int c) { return dsh + c * V + e0; }, kds);
    else gather4(K, m, [&](int c) { return kg[j * K + c]; }, [&](int c) { return dsh + c * V + e0; }, kds);
    for (int t = 0; t < m; ++t) {
      const double kd = p.per_token_only ? acc(acc(kds[t]) * to_end[j * W]) : acc(kds[t]);
      dx[j * V + e0 + t] = stored(acc(stored(acc(local[t]), b.grad_operands) + kd), b.grad_operands);
    }
  });
  each4(x, C, C, [&](int i, int j0, int m) {  // dP = do x^T
    double d[4];
    gather4f(V, m, [&](int e) { return Do(i, e); }, [&](int e, int t) { return xs[(j0 + t) * V + e]; }, d);
    for (int t = 0; t < m; ++t) dP[i * C + j0 + t] = acc(d[t]);
  });
  each4(x, C, K, [&](int r, int c0, int m) {  // do h^T, x dS^T
    double d[4], f[4];
    gather4f(V, m, [&](int e) { return Do(r, e); }, [&](int e, int t) { return h[(c0 + t) * V + e]; }, d);
    gather4f(V, m, [&](int e) { return xs[r * V + e]; }, [&](int e, int t) { return dsh[(c0 + t) * V + e]; }, f);
    for (int t = 0; t < m; ++t) doh[r * K + c0 + t] = acc(d[t]), xds[r * K + c0 + t] = acc(f[t]);
  });
  each(x, size_t(K), [&](size_t c) {  // diag(e^G_C) S0's share of dG_C
    double last = 0.0;
    for (int e = 0; e < V; ++e) last = last + h[c * V + e] * dsh[c * V + e];
    lastbase[c] = acc(acc(last) * from[(C - 1) * W + col(int(c))]);
  });
  x.sync();
  each4(x, K, V, [&](int c, int e0, int m) {  // the state gradient to the previous chunk
    double qdo[4], wdx[4];
    gather4(C, m, [&](int k) { return qg[k * K + c]; }, [&](int k) { return a.d_o + size_t(k) * V + e0; }, qdo);
    gather4(C, m, [&](int k) { return w[k * K + c]; }, [&](int k) { return dx + k * V + e0; }, wdx);
    for (int t = 0; t < m; ++t) {
      const size_t i = size_t(c) * V + e0 + t;
      a.ds[i] = stored(acc(acc(a.ds[i] * from[(C - 1) * W + col(c)]) + acc(acc(a.scale * acc(qdo[t])) - acc(wdx[t]))),
                       b.grad_state);
    }
  });
  each4(x, C, K, [&](int j, int c0, int m) {  // dw = -dx S0^T
    double d[4];
    gather4f(V, m, [&](int e) { return dx[j * V + e]; }, [&](int e, int t) { return h[(c0 + t) * V + e]; }, d);
    for (int t = 0; t < m; ++t) dw[j * K + c0 + t] = stored(acc(d[t]), b.grad_operands) * -1.0;
  });
  each4(x, C, V, [&](int j, int e0, int m) {  // dvb = A^T du, du = dx
    double d[4];
    gather4(C, m, [&](int k) { return Am(k, j); }, [&](int k) { return dx + k * V + e0; }, d);
    for (int t = 0; t < m; ++t) dvb[j * V + e0 + t] = acc(d[t]);
  });
  x.sync();
  each4(x, C, K, [&](int j, int c0, int m) {  // dkb = A^T dw
    double d[4];
    gather4(C, m, [&](int k) { return Am(k, j); }, [&](int k) { return dw + k * K + c0; }, d);
    for (int t = 0; t < m; ++t) dkb[j * K + c0 + t] = acc(d[t]);
  });
  each4(x, C, C, [&](int i, int j0, int m) {  // dA = dw kb^T + du vb^T, strictly lower
    double d1[4], d2[4];
    const int n = i - j0 < m ? (i - j0 > 0 ? i - j0 : 0) : m;  // entries j0 .. j0 + n - 1 lie below the diagonal
    if (n > 0) {
      gather4f(K, n, [&](int c) { return dw[i * K + c]; }, [&](int c, int t) { return kb[(j0 + t) * K + c]; }, d1);
      gather4f(V, n, [&](int e) { return dx[i * V + e]; }, [&](int e, int t) { return vb[(j0 + t) * V + e]; }, d2);
    }
    for (int t = 0; t < m; ++t) dA[i * C + j0 + t] = t < n ? stored(acc(acc(d1[t]) + acc(d2[t])), b.grad_operands) : 0.0;
  });
  x.sync();
  each4(x, C, C, [&](int i, int j0, int m) {  // dA A^T
    double d[4];
    gather4f(C, m, [&](int k) { return dA[i * C + k]; }, [&](int k, int t) { return Am(j0 + t, k); }, d);
    for (int t = 0; t < m; ++t) dAA[i * C + j0 + t] = stored(acc(d[t]), b.grad_operands);
  });
  x.sync();
  each4(x, C, C, [&](int i, int j0, int m) {  // dL = -A^T (dA A^T); the pair's l and score gradient
    double d[4];
    gather4(C, m, [&](int k) { return Am(k, i); }, [&](int k) { return dAA + k * C + j0; }, d);
    for (int t = 0; t < m; ++t) {
      const int j = j0 + t, ij = i * C + j;
      dL[ij] = acc(d[t]) * -1.0;
      sp[ij] = a.scale * dP[ij];
      l[ij] = j < i ? stored(W == 1 ? acc(dL[ij] * Ee(i, j, 0)) : dL[ij], b.dl_operand) : 0.0;
    }
  });
  x.sync();

  // ---- The gradients, gathered per element in the scatter's order.
  const auto skipped = [&](int i, int j) { return l[i * C + j] == 0.0 && sp[i * C + j] == 0.0; };
  const auto le = [&](int i, int j, int c) { return W == 1 ? l[i * C + j] : l[i * C + j] * Ee(i, j, col(c)); };
  // Four channels of a row a thread: each channel's sums in their own order, the pairs' loads shared.
  each4(x, C, K, [&](int r, int c0, int m) {
    double dq[4], dk[4], dGv[4];
    for (int t = 0; t < m; ++t) {
      const int c = c0 + t, idx = r * K + c;
      const double d1 = acc(acc(doh[idx] * from[r * W + col(c)]) * a.scale);
      dq[t] = 0.0 + d1;
      dGv[t] = 0.0 + d1 * Q(r, c);
      dk[t] = 0.0 + xds[idx] * to_end[r * W + col(c)];
      const double t_own = xds[idx] * (p.per_token_only ? Kk(r, c) * to_end[r * W] : kg[idx]);
      dGv[t] = dGv[t] - t_own;
      if (r == C - 1) {  // + diag(e^G_C) S0's share and every token's update share, in token order
        double last = lastbase[c];
        for (int j = 0; j < C; ++j)
          last = last + xds[j * K + c] * (p.per_token_only ? Kk(j, c) * to_end[j * W] : kg[j * K + c]);
        dGv[t] = dGv[t] + last;
      }
      dk[t] = dk[t] + dkb[idx] * a.beta[r] * from[r * W + col(c)];
      dGv[t] = dGv[t] + dkb[idx] * kb[idx];
    }
    const auto dgt = [&](int i, int j, int c) {
      const double e = Ee(i, j, col(c)), kk = Kk(i, c) * Kk(j, c);
      return le(i, j, c) * a.beta[i] * kk + sp[i * C + j] * Q(i, c) * Kk(j, c) * e;
    };
    for (int j = 0; j <= r; ++j) {  // pairs (r, j): r as i
      if (skipped(r, j)) continue;
      for (int t = 0; t < m; ++t) {
        const int c = c0 + t;
        const double e = Ee(r, j, col(c));
        dk[t] = dk[t] + le(r, j, c) * a.beta[r] * Kk(j, c);
        dq[t] = dq[t] + sp[r * C + j] * Kk(j, c) * e;
        dGv[t] = dGv[t] + dgt(r, j, c);
        if (j == r) {  // pair (r, r): r as j too
          dk[t] = dk[t] + (le(r, r, c) * a.beta[r] * Kk(r, c) + sp[r * C + r] * Q(r, c) * e);
          dGv[t] = dGv[t] - dgt(r, r, c);
        }
      }
    }
    for (int i = r + 1; i < C; ++i) {  // pairs (i, r): r as j
      if (skipped(i, r)) continue;
      for (int t = 0; t < m; ++t) {
        const int c = c0 + t;
        const double e = Ee(i, r, col(c));
        dk[t] = dk[t] + (le(i, r, c) * a.beta[i] * Kk(i, c) + sp[i * C + r] * Q(i, c) * e);
        dGv[t] = dGv[t] - dgt(i, r, c);
      }
    }
    for (int t = 0; t < m; ++t) {
      const int idx = r * K + c0 + t;
      dG[idx] = dGv[t];
      a.dq[idx] = stored(acc(dq[t]), b.gradients);
      a.dk[idx] = stored(acc(dk[t]), b.gradients);
    }
  });
  each(x, size_t(C), [&](size_t rr) {
    const int r = int(rr);
    double db = 0.0;
    for (int c = 0; c < K; ++c) db = db + dkb[r * K + c] * Kk(r, c) * from[r * W + col(c)];
    for (int e = 0; e < V; ++e) db = db + dvb[r * V + e] * Vv(r, e);
    for (int j = 0; j <= r; ++j) {
      if (skipped(r, j)) continue;
      double lsum = 0.0;
      for (int c = 0; c < K; ++c) lsum = lsum + le(r, j, c) * (Kk(r, c) * Kk(j, c));
      db = db + lsum;
    }
    a.dbeta[r] = stored(acc(db), b.gradients);
  });
  each2(x, C, V, [&](int j, int, int i) { a.dv[i] = stored(acc(a.beta[j] * dvb[i]), b.gradients); });
  x.sync();
  // G is the chunk's inclusive cumsum: dg_t = sum_{i >= t} dG_i, per channel, or summed over channels in order.
  each(x, size_t(C) * W, [&](size_t idx) {
    const int r = int(idx / W), cw = int(idx % W);
    double out = 0.0;
    for (int c = (W == 1 ? 0 : cw); c < (W == 1 ? K : cw + 1); ++c) {
      double sum = 0.0;
      for (int i = C - 1; i >= r; --i) sum = sum + dG[i * K + c];
      out = out + sum;
    }
    a.dg[idx] = stored(acc(out), b.gate_gradient);
  });
  x.sync();
}

}  // namespace chunkinv::backward_step
