// One chunk of the chunked forward (docs/downstream.md, "The chunked
// forward"), one source for the host and the device: the CPU's
// ChunkedForward runs it on one thread, the GPU's (gpu/chunked_forward.cu)
// a block a variant. Every intermediate is formed element by element, each
// by the same IEEE operations in the same order whatever thread forms it,
// so every thread count gives the same bits. A context `X` gives the
// thread's index, the block's size and the barrier between stages.
//
// The operation order is the CPU forward's, written once here:
// - product(a, b)(i, j): from +0, k ascending, the terms a(i, k) == 0
//   left out (an exactly zero term adds nothing to a sum that starts at
//   +0; a strict-lower inverse is half zeros), each term one rounded
//   multiply, then one rounded add;
// - every other formula as written below, each * and + rounded once (the
//   host builds with -ffp-contract=off, the device uses no fma here);
// - `acc` rounds to the preset's accumulator, `stored` to the format the
//   kernel stores the intermediate in (downstream/storage.hpp).
#pragma once
#include <cstddef>

#include "core/detmath_hd.hpp"
#include "core/hd.hpp"
#include "downstream/stages_hd.hpp"
#include "downstream/store_hd.hpp"

namespace chunkinv::forward_step {

using stages::each;
using stages::each2;
using stages::each4;

// One chunk's inputs and outputs, all row-major, doubles.
struct Args {
  const double *q, *k;     // C x K: the chunk's queries and keys
  const double* v;         // C x V
  const double* g;         // C x W: its gates (W = 1: one a token; K: one a channel)
  const double* beta;      // C
  const double* inverse;   // C x C: A = (I + L)^-1, as the path and method gave it
  double* state;           // K x V: the state as carried in, replaced by the state after the chunk
  double* o;               // C x V: the chunk's outputs
  double* work;            // work_doubles(C, K, V, W) doubles
  int C = 0, K = 0, V = 0, W = 1;
  double scale = 1.0;
  Stores p{};
};

// The work a chunk needs: G, e^G and the decays to the chunk's end (C x W
// each), A and qk (C x C), qg and w (C x K), kg, k^T and (beta k e^G)^T
// (K x C), u and inter (C x V), (beta v)^T, xs^T and xd^T (V x C) and h^T
// (V x K). A product's right factor is held transposed, so that both of
// its factors are read along rows.
CHUNKINV_HD inline size_t work_doubles(int C, int K, int V, int W) {
  const size_t c = size_t(C), k = size_t(K), v = size_t(V), w = size_t(W);
  return 3 * c * w + 2 * c * c + 5 * c * k + 5 * c * v + k * v;
}


// Entries (r, e0), ..., (r, e0 + m - 1) of a product, m <= 4, from the left
// factor's row r (a) and the right factor's columns e0.. (its transpose's
// rows, at bT, bT + n, ...). Each entry is sum_k a[k] b[k] from +0, k
// ascending, the terms with a[k] == 0 left out, each term one rounded
// multiply and one rounded add; four at once are four independent chains
// (the host's speed), each the same operations as alone.
CHUNKINV_HD inline void dots4(const double* a, const double* bT, int n, int m, double* out) {
  const double* b0 = bT;
  const double* b1 = bT + (m > 1 ? n : 0);
  const double* b2 = bT + (m > 2 ? 2 * n : 0);
  const double* b3 = bT + (m > 3 ? 3 * n : 0);
  double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
  for (int k = 0; k < n; ++k) {
    const double x = a[k];
    if (x == 0.0) continue;
    s0 = s0 + x * b0[k];
    s1 = s1 + x * b1[k];
    s2 = s2 + x * b2[k];
    s3 = s3 + x * b3[k];
  }
  out[0] = s0, out[1] = s1, out[2] = s2, out[3] = s3;
}


template <class X>
CHUNKINV_HD inline void step(const Args& a, X& x) {
  const int C = a.C, K = a.K, V = a.V, W = a.W;
  const Stores& p = a.p;
  const auto acc = [&](double y) { return stored(y, p.accumulate); };
  const auto col = [&](int c) { return W == 1 ? 0 : c; };
  double* G = a.work;             // C x W: the inclusive cumulative gate within the chunk
  double* from = G + C * W;       // C x W: e^G_a
  double* to_end = from + C * W;  // C x W: e^(G_(C-1) - G_a)
  double* A = to_end + C * W;     // C x C
  double* qk = A + C * C;         // C x C
  double* qg = qk + C * C;        // C x K: q e^G (per channel)
  double* w = qg + C * K;         // C x K
  double* kg = w + C * K;         // K x C: k e^(G_C - G_j), transposed (per channel)
  double* kT = kg + K * C;        // K x C: k^T (per token)
  double* kbT = kT + K * C;       // K x C: (beta k e^G)^T
  double* u = kbT + K * C;        // C x V
  double* inter = u + C * V;      // C x V: the state's share of o
  double* vbT = inter + C * V;    // V x C: (beta v)^T
  double* xsT = vbT + V * C;      // V x C: x = u - w S (fla's v_new) as stored, transposed
  double* xdT = xsT + V * C;      // V x C: x e^(G_C - G_j), transposed (per token)
  double* hT = xdT + V * C;       // V x K: the state as the products read it, transposed
  // exp(G_a - G_b), a >= b, formed per pair: exp(G) exp(-G) would overflow.
  const auto decay = [&](int ra, int rb, int c) {
    return stored(detmath::hd::exp(stored(G[ra * W + c] - G[rb * W + c], p.gates)), p.gates);
  };

  // G per gate column; the inverse, beta v and the state as read.
  each(x, size_t(W), [&](size_t c) {
    double sum = 0.0;
    for (int i = 0; i < C; ++i) G[i * W + c] = sum = stored(sum + a.g[i * W + c], p.gates);
  });
  each(x, size_t(C) * C, [&](size_t i) { A[i] = stored(a.inverse[i], p.inverse); });
  each2(x, C, V, [&](int j, int e, int i) { vbT[e * C + j] = stored(acc(a.beta[j] * a.v[i]), p.operands); });
  each2(x, K, V, [&](int c, int e, int i) { hT[e * K + c] = stored(a.state[i], p.state_operand); });
  x.sync();
  each2(x, C, W, [&](int r, int c, int i) {
    from[i] = stored(detmath::hd::exp(G[i]), p.gates);
    to_end[i] = decay(C - 1, r, c);
  });
  x.sync();
  // beta k e^G, q e^G, k e^(G_C - G_j); the intra-chunk scores
  each2(x, C, K, [&](int j, int c, int i) {
    kbT[size_t(c) * C + j] = stored(acc(acc(a.beta[j] * a.k[i]) * from[j * W + col(c)]), p.operands);
    if (!p.per_token_only) {
      qg[i] = stored(acc(a.q[i] * from[j * W + col(c)]), p.operands);
      kg[size_t(c) * C + j] = stored(acc(a.k[i] * to_end[j * W + col(c)]), p.update);
    } else {
      kT[size_t(c) * C + j] = a.k[i];
    }
  });
  each(x, size_t(C) * C, [&](size_t ij) {
    const int i = int(ij / C), j = int(ij % C);
    if (j > i) {
      qk[ij] = 0.0;
      return;
    }
    const double* qi = a.q + size_t(i) * K;
    const double* kj = a.k + size_t(j) * K;
    double d = 0.0;
    if (!p.per_token_only) {
      const double one = W == 1 ? decay(i, j, 0) : 0.0;  // per-token gates: one decay for every channel
      for (int c = 0; c < K; ++c) d = d + qi[c] * kj[c] * (W == 1 ? one : decay(i, j, c));
      qk[ij] = stored(acc(a.scale * acc(d)), p.qk);
    } else {
      for (int c = 0; c < K; ++c) d = d + qi[c] * kj[c];
      qk[ij] = stored(acc(acc(d) * decay(i, j, 0)), p.qk);
    }
  });
  x.sync();
  // w = A (beta k e^G), u = A (beta v); the state's share of o
  each4(x, C, K, [&](int r, int c0, int m) {
    double d[4];
    dots4(A + r * C, kbT + c0 * C, C, m, d);
    for (int t = 0; t < m; ++t) w[r * K + c0 + t] = stored(acc(d[t]), p.w_u);
  });
  each4(x, C, V, [&](int r, int e0, int m) {
    double d[4], h4[4];
    dots4(A + r * C, vbT + e0 * C, C, m, d);
    dots4((p.per_token_only ? a.q : qg) + r * K, hT + e0 * K, K, m, h4);
    for (int t = 0; t < m; ++t) {
      const size_t i = size_t(r) * V + e0 + t;
      u[i] = stored(acc(d[t]), p.w_u);
      // chunk_gated_delta_rule: (q h) e^G; chunk_kda: (q e^G) h
      inter[i] = p.per_token_only ? acc(acc(h4[t]) * from[r * W]) : acc(h4[t]);
    }
  });
  x.sync();
  // x = u - w S, as stored; per token its decay to the chunk's end
  each4(x, C, V, [&](int j, int e0, int m) {
    double d[4];
    dots4(w + j * K, hT + e0 * K, K, m, d);
    for (int t = 0; t < m; ++t) {
      const int e = e0 + t;
      const double xv = acc(u[j * V + e] - acc(d[t]));
      xsT[e * C + j] = stored(xv, p.v_new);
      if (p.per_token_only) xdT[e * C + j] = stored(acc(xv * to_end[j * W]), p.update);
    }
  });
  x.sync();
  // o = scale (q e^G) S + (qk) x; S_C = diag(e^G_C) S + (k e^(G_C - G_j))^T x
  each4(x, C, V, [&](int r, int e0, int m) {
    double d[4];
    dots4(qk + r * C, xsT + e0 * C, C, m, d);
    for (int t = 0; t < m; ++t) {
      const size_t i = size_t(r) * V + e0 + t;
      const double intra = acc(d[t]);
      const double s = acc(a.scale * inter[i]), s2 = p.per_token_only ? acc(a.scale * intra) : intra;
      a.o[i] = stored(acc(s + s2), p.output);
    }
  });
  each4(x, K, V, [&](int c, int e0, int m) {
    double d[4];
    if (p.per_token_only) dots4(kT + c * C, xdT + e0 * C, C, m, d);
    else dots4(kg + c * C, xsT + e0 * C, C, m, d);
    for (int t = 0; t < m; ++t) {
      const size_t i = size_t(c) * V + e0 + t;
      a.state[i] = stored(acc(acc(a.state[i] * from[(C - 1) * W + col(c)]) + acc(d[t])), p.state);
    }
  });
  x.sync();
}

}  // namespace chunkinv::forward_step
