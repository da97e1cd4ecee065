// The GPU recurrence's kernel bodies (gpu/recurrence.cu, whose head says
// what they compute and how the work is dealt), one source for the device
// and for a host emulation: every thread-level primitive (indices, barrier,
// shuffle, shared memory) comes from a context `X`, every rounding from a
// named operation (mul_rn, add_rn, sub_rn, fma), so that the test
// GpuRecurrenceSource runs this very code on the CPU, thread by thread,
// against the CPU's Recurrence, with or without a GPU.
#pragma once
#include <cmath>
#include <cstddef>

#include "core/detmath_hd.hpp"
#include "core/hd.hpp"

namespace chunkinv::gpu::recurrence {

constexpr int kSlices = 8;       // slices of a column's sum (forward.hpp: kRecurrenceSlices)
constexpr int kMaxWarps = 8;     // warps a block
constexpr int kStageTokens = 8;  // tokens in shared memory at a time (version 2)
constexpr int kStageTokensV1 = 12;  // version 1's, two stages of them

// Lanes that share a column pair: 8 (version 1: a lane holds both parities of
// its slice's rows, 2 K / 8 doubles a column pair) or 16 (version 2: a lane
// holds one parity, K / 8 doubles, so twice the warps fit an SM).
template <int L>
constexpr int columns_per_warp() {
  return 32 / L * 2;  // 8 or 4
}

// Token t of sequence s = b H + h in a [B, T, H, X] tensor: row ((b T + t) H + h).
struct Layout {
  int tokens = 0, heads = 1;
  CHUNKINV_HD size_t row(int s, int t) const { return (size_t(s / heads) * tokens + t) * heads + s % heads; }
  // Sequence s's rows, token t's at first + t step: row() without its division in a token loop.
  struct Rows {
    size_t first, step;
    CHUNKINV_HD size_t of(int t) const { return first + size_t(t) * step; }
  };
  CHUNKINV_HD Rows rows(int s) const { return {row(s, 0), size_t(heads)}; }
};

struct Args {
  const double *q, *k, *d, *beta, *v;  // d: the launch's decays, [n][count][gate_width]
  double* o;
  double* state;  // [n][K][V]
  Layout layout;
  int t0, count, value_dim, gate_width;
  double scale;
};

// The launch: warps a block, columns a block, blocks a sequence, shared memory a block.
struct Shape {
  int warps, cols, blocks_per_sequence;
  size_t smem_bytes;
};
inline Shape shape_of(int K, int V, int version = 1) {
  const int cpw = version == 2 ? columns_per_warp<16>() : columns_per_warp<8>();
  const int warps = V < kMaxWarps * cpw ? (V + cpw - 1) / cpw : kMaxWarps;
  const int cols = warps * cpw;
  const size_t n = version == 2 ? kStageTokens : kStageTokensV1;
  const size_t stage = 3 * n * K + n * cols + n;
  return {warps, cols, (V + cols - 1) / cols, (version == 2 ? 1 : 2) * stage * sizeof(double)};
}

#ifdef __CUDACC__
using Pair = double2;
#else
struct alignas(16) Pair {
  double x, y;
};
#endif

// One IEEE operation each, on both (the device's intrinsics cannot be
// contracted; the host builds with -ffp-contract=off).
#ifdef __CUDA_ARCH__
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ double add_rn(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ double sub_rn(double a, double b) { return __dsub_rn(a, b); }
__device__ __forceinline__ double fma_rn(double a, double b, double c) { return fma(a, b, c); }
#else
inline double mul_rn(double a, double b) { return a * b; }
inline double add_rn(double a, double b) { return a + b; }
inline double sub_rn(double a, double b) { return a - b; }
inline double fma_rn(double a, double b, double c) { return std::fma(a, b, c); }
#endif

// d[i], i = (s count + j) width + c: exp(g of token t0 + j of sequence s, gate column c), given as
// sequence s's rows, base = s count width and rest = j width + c (no 64-bit division an element).
// gate_index is that g's index.
CHUNKINV_HD inline size_t gate_index(Layout::Rows rows, int t0, int width, int rest) {
  const int j = rest / width, c = rest - j * width;
  return rows.of(t0 + j) * width + c;
}
CHUNKINV_HD inline void decay_one(const double* g, double* d, Layout::Rows rows, int t0, int width, size_t base,
                                  int rest) {
  d[base + rest] = detmath::hd::exp(g[gate_index(rows, t0, width, rest)]);
}

// The column sum of recurrence_dots' order from the lane's slice partials
// of its own column (the one it keeps: lanes r < 4 the pair's first, r >= 4
// its second) and of the other, which lane r ^ 4 keeps: no select.
template <class X>
CHUNKINV_HD inline double column_sum(X& x, double own, double other) {
  double sum = add_rn(own, x.shfl_xor(other, 4));  // P_r + P_(r ^ 4)
  sum = add_rn(sum, x.shfl_xor(sum, 1));
  return add_rn(sum, x.shfl_xor(sum, 2));
}

// The block's shared memory: the staged tokens' k, q and decays (every
// row), v (the block's columns) and beta.
struct Staged {
  double *k, *q, *d, *v, *beta;
};
template <class X>
CHUNKINV_HD inline Staged staged(X& x, int K, int cols) {
  double* sk = x.smem();
  return {sk, sk + kStageTokens * K, sk + 2 * kStageTokens * K, sk + 3 * kStageTokens * K,
          sk + 3 * kStageTokens * K + kStageTokens * cols};
}

// Tokens [t, t + nt) of the launch into shared memory, between two barriers.
template <int K, class X>
CHUNKINV_HD inline void stage_tokens(const Args& a, X& x, const Staged& sh, int s, int cols, int col0, int t, int nt) {
  const int threads = x.threads(), tid = x.thread(), V = a.value_dim;
  double *sk = sh.k, *sq = sh.q, *sd = sh.d, *sv = sh.v, *sb = sh.beta;
  const Layout::Rows rows = a.layout.rows(s);
  x.sync();  // every lane is done with the previous stage
  for (int i = tid; i < nt * (K / 2); i += threads) {
    const int j = i / (K / 2), c = 2 * (i % (K / 2));
    const size_t row = rows.of(a.t0 + t + j);
    *reinterpret_cast<Pair*>(sk + j * K + c) = *reinterpret_cast<const Pair*>(a.k + row * K + c);
    *reinterpret_cast<Pair*>(sq + j * K + c) = *reinterpret_cast<const Pair*>(a.q + row * K + c);
    const double* dj = a.d + (size_t(s) * a.count + t + j) * a.gate_width;
    if (a.gate_width == 1) {
      sd[j * K + c] = dj[0];
      sd[j * K + c + 1] = dj[0];
    } else {
      *reinterpret_cast<Pair*>(sd + j * K + c) = *reinterpret_cast<const Pair*>(dj + c);
    }
  }
  for (int i = tid; i < nt * cols; i += threads) {
    const int j = i / cols, e = col0 + i % cols;
    sv[i] = e < V ? a.v[rows.of(a.t0 + t + j) * V + e] : 0.0;
  }
  if (tid < nt) sb[tid] = a.beta[rows.of(a.t0 + t + tid)];
  x.sync();
}

// One block of the recurrence kernel, version 1: columns [block_y cols, +
// cols) of sequence block_x, every token of the launch. K = 16 NI. Every
// lane of every warp runs every step (the shuffles need all 32); columns
// past V hold zeros and are never written. Its staging is double-buffered:
// tokens t + 12 .. t + 23 are copied into one buffer (x.copy_async: no
// register, no wait) while tokens t .. t + 11 run from the other, one
// barrier a stage.
template <int NI, class X>
CHUNKINV_HD inline void recurrence_block(const Args& a, X& x) {
  constexpr int K = 16 * NI, NR = 2 * NI, CPW = columns_per_warp<8>();
  const int threads = x.threads(), tid = x.thread();
  const int cols = CPW * (threads / 32);
  const int stage_doubles = 3 * kStageTokensV1 * K + kStageTokensV1 * cols + kStageTokensV1;
  const int s = x.block_x(), V = a.value_dim;
  const Layout::Rows rows = a.layout.rows(s);
  const int lane = tid & 31, r = lane & (kSlices - 1), kept = r >> 2;
  const int col0 = x.block_y() * cols;
  const int e0 = col0 + (tid >> 5) * CPW + (lane / kSlices) * 2;  // columns e0, e0 + 1
  const int own = e0 + kept, other = e0 + 1 - kept;  // the column the lane keeps, and its pair's other
  const bool stores = (r & 3) == 0 && own < V;        // one lane of the four that hold its sum writes it
  double* state = a.state + size_t(s) * K * V;
  double s0[NR], s1[NR];  // row 16 i + 2 r + p at [2 i + p], of column own and other
  CHUNKINV_UNROLL
  for (int i = 0; i < NI; ++i)
    CHUNKINV_UNROLL
    for (int p = 0; p < 2; ++p) {
      const size_t c = 16 * i + 2 * r + p;
      s0[2 * i + p] = own < V ? state[c * V + own] : 0.0;
      s1[2 * i + p] = other < V ? state[c * V + other] : 0.0;
    }

  // Tokens [t, t + nt) into buffer b, copied without waiting (x.copy_async):
  // they are this thread's to wait for (x.wait_copies) before the barrier
  // that makes them everyone's.
  const auto stage = [&](int t, int b) {
    const int nt = a.count - t < kStageTokensV1 ? a.count - t : kStageTokensV1;
    double* sk = x.smem() + b * stage_doubles;
    double* sq = sk + kStageTokensV1 * K;
    double* sd = sq + kStageTokensV1 * K;
    double* sv = sd + kStageTokensV1 * K;
    double* sb = sv + kStageTokensV1 * cols;
    for (int i = tid; i < nt * (K / 2); i += threads) {
      const int j = i / (K / 2), c = 2 * (i % (K / 2));
      const size_t row = rows.of(a.t0 + t + j);
      x.copy_async(sk + j * K + c, a.k + row * K + c, 2);
      x.copy_async(sq + j * K + c, a.q + row * K + c, 2);
      const double* dj = a.d + (size_t(s) * a.count + t + j) * a.gate_width;
      if (a.gate_width == 1) {
        x.copy_async(sd + j * K + c, dj, 1);
        x.copy_async(sd + j * K + c + 1, dj, 1);
      } else {
        x.copy_async(sd + j * K + c, dj + c, 2);
      }
    }
    for (int i = tid; i < nt * cols; i += threads) {
      const int j = i / cols, e = col0 + i % cols;
      if (e < V) x.copy_async(sv + i, a.v + rows.of(a.t0 + t + j) * V + e, 1);
      else sv[i] = 0.0;
    }
    if (tid < nt) x.copy_async(sb + tid, a.beta + rows.of(a.t0 + t + tid), 1);
  };

  if (a.count > 0) stage(0, 0);
  for (int t = 0, b = 0; t < a.count; t += kStageTokensV1, b ^= 1) {
    const int nt = a.count - t < kStageTokensV1 ? a.count - t : kStageTokensV1;
    x.wait_copies();  // this thread's copies of tokens [t, t + nt)
    x.sync();         // everyone's; and every lane is done with buffer b ^ 1 (tokens t - 12 on)
    if (t + kStageTokensV1 < a.count) stage(t + kStageTokensV1, b ^ 1);  // in flight while these tokens run
    const double* sk = x.smem() + b * stage_doubles;
    const double* sq = sk + kStageTokensV1 * K;
    const double* sd = sq + kStageTokensV1 * K;
    const double* sv = sd + kStageTokensV1 * K;
    const double* sb = sv + kStageTokensV1 * cols;
    double* o = a.o + rows.of(a.t0 + t) * V + own;  // token t's output in the lane's column

    for (int j = 0; j < nt; ++j, o += rows.step * V) {
      const double* kj = sk + j * K + 2 * r;
      const double* qj = sq + j * K + 2 * r;
      const double* dj = sd + j * K + 2 * r;
      // S = diag(e^g) S, then k^T S
      double c00 = 0.0, c01 = 0.0, c10 = 0.0, c11 = 0.0;  // chain of column x, parity p: cxp
      CHUNKINV_UNROLL
      for (int i = 0; i < NI; ++i) {
        const Pair dd = *reinterpret_cast<const Pair*>(dj + 16 * i);
        const Pair kk = *reinterpret_cast<const Pair*>(kj + 16 * i);
        s0[2 * i] = mul_rn(s0[2 * i], dd.x);
        s0[2 * i + 1] = mul_rn(s0[2 * i + 1], dd.y);
        s1[2 * i] = mul_rn(s1[2 * i], dd.x);
        s1[2 * i + 1] = mul_rn(s1[2 * i + 1], dd.y);
        c00 = fma_rn(kk.x, s0[2 * i], c00);
        c01 = fma_rn(kk.y, s0[2 * i + 1], c01);
        c10 = fma_rn(kk.x, s1[2 * i], c10);
        c11 = fma_rn(kk.y, s1[2 * i + 1], c11);
      }
      const double dot_k = column_sum(x, add_rn(c00, c01), add_rn(c10, c11));
      const double p0 = mul_rn(sb[j], sub_rn(sv[j * cols + (own - col0)], dot_k));  // own column's pred
      const double p1 = x.shfl_xor(p0, 4);                                          // the other's
      // S += k pred^T, then q^T S
      c00 = c01 = c10 = c11 = 0.0;
      CHUNKINV_UNROLL
      for (int i = 0; i < NI; ++i) {
        const Pair kk = *reinterpret_cast<const Pair*>(kj + 16 * i);
        const Pair qq = *reinterpret_cast<const Pair*>(qj + 16 * i);
        s0[2 * i] = fma_rn(kk.x, p0, s0[2 * i]);
        s0[2 * i + 1] = fma_rn(kk.y, p0, s0[2 * i + 1]);
        s1[2 * i] = fma_rn(kk.x, p1, s1[2 * i]);
        s1[2 * i + 1] = fma_rn(kk.y, p1, s1[2 * i + 1]);
        c00 = fma_rn(qq.x, s0[2 * i], c00);
        c01 = fma_rn(qq.y, s0[2 * i + 1], c01);
        c10 = fma_rn(qq.x, s1[2 * i], c10);
        c11 = fma_rn(qq.y, s1[2 * i + 1], c11);
      }
      const double dot_q = column_sum(x, add_rn(c00, c01), add_rn(c10, c11));
      if (stores) *o = mul_rn(a.scale, dot_q);
    }
  }

  CHUNKINV_UNROLL
  for (int i = 0; i < NI; ++i)
    CHUNKINV_UNROLL
    for (int p = 0; p < 2; ++p) {
      const size_t c = 16 * i + 2 * r + p;
      if (own < V) state[c * V + own] = s0[2 * i + p];
      if (other < V) state[c * V + other] = s1[2 * i + p];
    }
}

// Version 2's column sum: lane (r, p) of a column pair's 16 (lane r + 8 p)
// holds chain p of slice r of both columns; it keeps column p. The first
// shuffle (lane ^ 8) trades the other column's chain, so that P_r = chain 0
// + chain 1 of the kept column (either order: IEEE addition commutes); the
// rest is version 1's tree over the slices.
template <class X>
CHUNKINV_HD inline double column_sum_split(X& x, double chain0, double chain1, int kept) {
  const double mine = kept ? chain1 : chain0, other = kept ? chain0 : chain1;
  double sum = add_rn(mine, x.shfl_xor(other, 8));        // P_r of the kept column
  sum = add_rn(sum, x.shfl_xor(sum, 4));                 // P_r + P_(r ^ 4)
  sum = add_rn(sum, x.shfl_xor(sum, 1));
  return add_rn(sum, x.shfl_xor(sum, 2));
}

// One block of the recurrence kernel, version 2: as version 1, but 16 lanes
// a column pair, lane r + 8 p holding rows 16 i + 2 r + p (one parity) of
// both columns, K / 8 doubles: half the registers, so more warps an SM hide
// the chains' latency (docs/notes/gpu-notes.md, "v1 under Nsight Compute").
// Each chain is the same fma chain over the same rows as version 1's, so
// the same bits.
template <int NI, class X>
CHUNKINV_HD inline void recurrence_block_v2(const Args& a, X& x) {
  constexpr int K = 16 * NI, CPW = columns_per_warp<16>();
  const int threads = x.threads(), tid = x.thread();
  const int cols = CPW * (threads / 32);
  const Staged sh = staged(x, K, cols);
  const double *sk = sh.k, *sq = sh.q, *sd = sh.d, *sv = sh.v, *sb = sh.beta;
  const int s = x.block_x(), V = a.value_dim;
  const Layout::Rows rows = a.layout.rows(s);
  const int lane = tid & 31, r = lane & (kSlices - 1), p = (lane >> 3) & 1;
  const int col0 = x.block_y() * cols;
  const int e0 = col0 + (tid >> 5) * CPW + (lane >> 4) * 2;  // columns e0, e0 + 1
  double* state = a.state + size_t(s) * K * V;
  double s0[NI], s1[NI];  // row 16 i + 2 r + p at [i], of column e0 and e0 + 1
  CHUNKINV_UNROLL
  for (int i = 0; i < NI; ++i) {
    const size_t c = 16 * i + 2 * r + p;
    s0[i] = e0 < V ? state[c * V + e0] : 0.0;
    s1[i] = e0 + 1 < V ? state[c * V + e0 + 1] : 0.0;
  }

  for (int t = 0; t < a.count; t += kStageTokens) {
    const int nt = a.count - t < kStageTokens ? a.count - t : kStageTokens;
    stage_tokens<K>(a, x, sh, s, cols, col0, t, nt);

    for (int j = 0; j < nt; ++j) {
      const double* kj = sk + j * K + 2 * r + p;
      const double* qj = sq + j * K + 2 * r + p;
      const double* dj = sd + j * K + 2 * r + p;
      // S = diag(e^g) S, then k^T S: chain p of column e0 (c0) and e0 + 1 (c1)
      double c0 = 0.0, c1 = 0.0;
      CHUNKINV_UNROLL
      for (int i = 0; i < NI; ++i) {
        const double dd = dj[16 * i], kk = kj[16 * i];
        s0[i] = mul_rn(s0[i], dd);
        s1[i] = mul_rn(s1[i], dd);
        c0 = fma_rn(kk, s0[i], c0);
        c1 = fma_rn(kk, s1[i], c1);
      }
      const double dot_k = column_sum_split(x, c0, c1, p);
      const double pred = mul_rn(sb[j], sub_rn(sv[j * cols + (e0 - col0) + p], dot_k));
      const double pred_other = x.shfl_xor(pred, 8);
      const double p0 = p ? pred_other : pred, p1 = p ? pred : pred_other;
      // S += k pred^T, then q^T S
      c0 = c1 = 0.0;
      CHUNKINV_UNROLL
      for (int i = 0; i < NI; ++i) {
        const double kk = kj[16 * i], qq = qj[16 * i];
        s0[i] = fma_rn(kk, p0, s0[i]);
        s1[i] = fma_rn(kk, p1, s1[i]);
        c0 = fma_rn(qq, s0[i], c0);
        c1 = fma_rn(qq, s1[i], c1);
      }
      const double dot_q = column_sum_split(x, c0, c1, p);
      const int e = e0 + p;
      if (r == 0 && e < V) a.o[rows.of(a.t0 + t + j) * V + e] = mul_rn(a.scale, dot_q);
    }
  }

  CHUNKINV_UNROLL
  for (int i = 0; i < NI; ++i) {
    const size_t c = 16 * i + 2 * r + p;
    if (e0 < V) state[c * V + e0] = s0[i];
    if (e0 + 1 < V) state[c * V + e0 + 1] = s1[i];
  }
}

}  // namespace chunkinv::gpu::recurrence
