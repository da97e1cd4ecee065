// The programs that one block of threads runs for one sample: the gold
// (compute_gold), the metrics of a (path, neumann) entry (evaluate) and the
// gold's own (evaluate_reference). One source for the GPU
// (metrics/device_metrics.cu runs them with a __syncthreads barrier) and the
// CPU (the tests run the threads of a block one after another), so that the
// layout and indexing are checked here too, not only on a GPU.
//
// A program is a sequence of phases, `blk.each([&](int t) {...})`: every
// thread t runs the phase's function, then all wait. A phase reads only what
// earlier phases wrote. State a thread keeps from phase to phase lives in
// `blk.local<V>()[t]` (registers on the GPU, one V per thread on the CPU).
// Shared memory: `sm` (doubles, the sizes below) and `fl` (flags and counts).
//
// Work split, keeping every sum in the CPU's order:
//  - gold L: 2 x 2 tiles of pairs (i, j) per thread, each pair's dot over k
//    in order; keys (and per-channel cumulated gates) staged in shared
//    memory 32 channels at a time, as doubles, channel-major;
//  - inverses: one thread per column (fp64::unit_lower_solve_column); the
//    threads of a warp walk the same (i, j) so that L's entry is one
//    broadcast read; on a finite L a warp skips the rows above its first
//    column (exact, see fp64_order.hpp);
//  - residual product: one thread per entry (fp64::unit_plus_times);
//  - each rel_rmse is a serial sum over C^2 entries: the metrics of a sample
//    run at once, one thread each, on different warps where there are.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "core/detmath_hd.hpp"
#include "core/hd.hpp"
#include "gpu/pack.hpp"
#include "metrics/device_metrics.hpp"
#include "metrics/fp64_order.hpp"

namespace chunkinv::gpu::blocks {

inline constexpr int kKeyTile = 32;  // channels staged per step of the gold's dot products

struct BlockFlags {
  int l_bad;          // some entry of an L is not finite
  int inv_bad;        // some entry of an inverse is not finite
  int zeros;          // decays == 0
  int nonfinite;      // non-finite inverse decays
  unsigned long long max_bits;  // bits of max |entry| (non-negative doubles order as their bits)
};
inline constexpr size_t kFlagsBytes = 32;  // sizeof(BlockFlags) rounded up to 16
static_assert(sizeof(BlockFlags) <= kFlagsBytes);

CHUNKINV_HD inline int block_threads(int C) { return C <= 16 ? 32 : C <= 32 ? 64 : 128; }
CHUNKINV_HD inline int tile_rows(int C) { return (C + 1) / 2; }
CHUNKINV_HD inline int pair_tiles(int C) { return tile_rows(C) * (tile_rows(C) + 1) / 2; }
CHUNKINV_HD inline int tiles_per_thread(int C) {
  return (pair_tiles(C) + block_threads(C) - 1) / block_threads(C);
}
// Tile q of the lower triangle of tiles, row by row: (ti, tj), tj <= ti; it
// holds the pairs (2ti + r, 2tj + c), r, c in {0, 1}.
CHUNKINV_HD inline void tile_coords(int q, int& ti, int& tj) {
  ti = 0;
  while ((ti + 1) * (ti + 2) / 2 <= q) ++ti;
  tj = q - ti * (ti + 1) / 2;
}

// The gold's shared memory (doubles): L, then X (the inverse) sharing its
// space with the staged keys and cumulated gates, then cum and beta.
struct GoldSmem {
  double *L, *X, *keyt, *cumt, *cum, *beta;
};
CHUNKINV_HD inline size_t gold_staging(int C, bool channel) {
  return size_t(kKeyTile) * 2 * tile_rows(C) * (channel ? 2 : 1);
}
CHUNKINV_HD inline size_t gold_smem_doubles(int C, bool channel) {
  const size_t csq = size_t(C) * C, staging = gold_staging(C, channel);
  return csq + (csq > staging ? csq : staging) + 2 * size_t(C);
}
CHUNKINV_HD inline GoldSmem gold_smem(double* sm, int C, bool channel) {
  const size_t csq = size_t(C) * C, staging = gold_staging(C, channel);
  GoldSmem m;
  m.L = sm;
  m.X = m.keyt = sm + csq;
  m.cumt = m.keyt + size_t(kKeyTile) * 2 * tile_rows(C);
  m.cum = m.X + (csq > staging ? csq : staging);
  m.beta = m.cum + C;
  return m;
}
CHUNKINV_HD inline size_t metrics_smem_doubles(int C) { return 3 * size_t(C) * C; }
CHUNKINV_HD inline size_t reference_smem_doubles(int C) { return 2 * size_t(C) * C; }

// compute_gold for sample s. kMaxTiles >= tiles_per_thread(C); kChannel is
// gate_width != 1 (compute_gold's own test: per-channel gates with d = 1
// take the per-token formula there too).
template <int kMaxTiles, bool kChannel, class Block>
CHUNKINV_HD void gold_program(const Block& blk, const GoldOnDevice& a, long s, double* sm, BlockFlags* fl) {
  const int C = a.chunk, d = a.dim, T = blk.threads;
  const int CP = 2 * tile_rows(C), tiles = pair_tiles(C);
  const size_t csq = size_t(C) * C;
  const GoldSmem m = gold_smem(sm, C, kChannel);
  const uint16_t* keys = a.keys + size_t(s) * C * d;
  struct Acc {
    double v[kMaxTiles][4];
  };
  auto acc = blk.template local<Acc>();

  blk.each([&](int t) {
    if (t == 0) {
      fl->l_bad = 0;
      if (!kChannel) {  // G cumulated in FP64, token order
        double c = 0.0;
        for (int i = 0; i < C; ++i) m.cum[i] = c += a.g[size_t(s) * C + i];
      }
    }
    for (int i = t; i < C; i += T) m.beta[i] = a.beta[size_t(s) * C + i];
    for (size_t e = t; e < csq; e += T) m.L[e] = 0.0;
    CHUNKINV_UNROLL
    for (int q = 0; q < kMaxTiles; ++q)
      for (int r = 0; r < 4; ++r) acc[t].v[q][r] = 0.0;
  });

  for (int k0 = 0; k0 < d; k0 += kKeyTile) {
    const int kn = d - k0 < kKeyTile ? d - k0 : kKeyTile;
    blk.each([&](int t) {
      // Keys of channels k0..k0+kn-1 as doubles, channel-major; rows C..CP-1 zero.
      for (int e = t; e < CP * kn; e += T) {
        const int r = e / kn, kk = e % kn;
        m.keyt[kk * CP + r] = r < C ? fp64::bf16_value(keys[size_t(r) * d + k0 + kk]) : 0.0;
      }
      if (kChannel)  // G cumulated per channel in FP64, token order
        for (int kk = t; kk < kn; kk += T) {
          double c = 0.0;
          for (int r = 0; r < C; ++r) m.cumt[kk * CP + r] = c += a.g[(size_t(s) * C + r) * d + k0 + kk];
          for (int r = C; r < CP; ++r) m.cumt[kk * CP + r] = 0.0;
        }
    });
    blk.each([&](int t) {
      Acc& A = acc[t];
      int ti[kMaxTiles], tj[kMaxTiles];
      CHUNKINV_UNROLL
      for (int q = 0; q < kMaxTiles; ++q) {
        ti[q] = tj[q] = 0;
        if (t + q * T < tiles) tile_coords(t + q * T, ti[q], tj[q]);
      }
      for (int kk = 0; kk < kn; ++kk) {
        const double* kr = m.keyt + kk * CP;
        CHUNKINV_UNROLL
        for (int q = 0; q < kMaxTiles; ++q) {
          if (t + q * T >= tiles) continue;
          const int i0 = 2 * ti[q], j0 = 2 * tj[q];
          const double ki[2] = {kr[i0], kr[i0 + 1]}, kj[2] = {kr[j0], kr[j0 + 1]};
          if (!kChannel) {
            // dot += k_i k_j; pairs outside j < i < C are formed too (zero rows) and never read.
            CHUNKINV_UNROLL
            for (int r = 0; r < 4; ++r) A.v[q][r] += ki[r >> 1] * kj[r & 1];
          } else {
            // dot += k_i k_j exp(min(G_i - G_j, 0)), only where j < i < C (the exp is the cost).
            const double* cr = m.cumt + kk * CP;
            CHUNKINV_UNROLL
            for (int r = 0; r < 4; ++r) {
              const int i = i0 + (r >> 1), j = j0 + (r & 1);
              if (i < C && j < i)
                A.v[q][r] += ki[r >> 1] * kj[r & 1] * detmath::hd::exp(fp64::min0(cr[i] - cr[j]));
            }
          }
        }
      }
    });
  }

  // L_ij = beta_i dot exp(min(G_i - G_j, 0)) (per channel: beta_i dot), into L's strict lower part.
  blk.each([&](int t) {
    bool bad = false;
    CHUNKINV_UNROLL
    for (int q = 0; q < kMaxTiles; ++q) {
      if (t + q * T >= tiles) continue;
      int ti, tj;
      tile_coords(t + q * T, ti, tj);
      CHUNKINV_UNROLL
      for (int r = 0; r < 4; ++r) {
        const int i = 2 * ti + (r >> 1), j = 2 * tj + (r & 1);
        if (!(i < C && j < i)) continue;
        const double v = kChannel ? m.beta[i] * acc[t].v[q][r]
                                  : m.beta[i] * acc[t].v[q][r] * detmath::hd::exp(fp64::min0(m.cum[i] - m.cum[j]));
        m.L[size_t(i) * C + j] = v;
        bad |= !std::isfinite(v);
      }
    }
    if (bad) blk.set(&fl->l_bad);
  });

  blk.each([&](int t) {
    for (size_t e = t; e < csq; e += T) {
      a.gold_l[size_t(s) * csq + e] = m.L[e];
      if (a.gold_l_fp16) a.gold_l_fp16[size_t(s) * csq + e] = fp16_bits_rn(m.L[e]);
    }
    const bool finite = fl->l_bad == 0;
    for (int c = t; c < C; c += T)
      fp64::unit_lower_solve_column(
          C, c, finite ? (c & ~31) : 0, [&](int i, int j) { return m.L[size_t(i) * C + j]; },
          [&](int i) -> double& { return m.X[size_t(i) * C + c]; });
  });

  blk.each([&](int t) {
    for (size_t e = t; e < csq; e += T) a.gold_inv[size_t(s) * csq + e] = m.X[e];
  });
}

// One rel_rmse(a, e) over C^2 entries in data order; a is FP64 (a64) or
// FP16 bits (a16); e is FP64 (e64) or the identity (e64 null).
CHUNKINV_HD inline double rel_rmse_serial(int C, const double* a64, const uint16_t* a16, const double* e64) {
  const int n = C * C;
  fp64::RelRmse r;
  int diagonal = 0;
  for (int e = 0; e < n; ++e) {
    const double x = a64 ? a64[e] : fp64::fp16_value(a16[e]);
    double y;
    if (e64) {
      y = e64[e];
    } else {
      y = e == diagonal ? 1.0 : 0.0;
      if (e == diagonal) diagonal += C + 1;
    }
    r.add(x, y);
  }
  return r.value(n);
}

// Thread of a block that computes the q-th serial metric: one per warp
// first, so that they run side by side.
CHUNKINV_HD inline int serial_thread(int q, int T) { return (q * 32) % T + (q * 32) / T; }

// evaluate(neumann, gold, path) for sample s into out[s * kNeumannMetricCount ...].
template <class Block>
CHUNKINV_HD void metrics_program(const Block& blk, const GoldRead& g, const PathOnDevice& p, double* out, long s,
                                 double* sm, BlockFlags* fl) {
  const int C = g.chunk, T = blk.threads;
  const size_t csq = size_t(C) * C, at = size_t(s) * csq;
  double* const S0 = sm;            // the path's L, then its INV as doubles
  double* const S1 = sm + csq;      // the exact inverse of I + path L
  double* const S2 = sm + 2 * csq;  // (I + gold L) * INV
  const double* gl = g.gold_l + at;
  const double* gi = g.gold_inv + at;
  // The gold path's own L is the gold L: its exact inverse is the gold inverse, bit for bit.
  const bool own_gold_l = p.l_f64 != nullptr && p.l_f64 == g.gold_l;

  blk.each([&](int t) {
    if (t == 0) fl->l_bad = fl->inv_bad = fl->zeros = fl->nonfinite = 0;
  });
  blk.each([&](int t) {
    int zeros = 0, nonfinite = 0;
    if (p.decay)
      for (int e = t; e < p.decays; e += T) zeros += (p.decay[size_t(s) * p.decays + e] & 0x7FFF) == 0;
    if (p.inv_decay)
      for (int e = t; e < p.decays; e += T) nonfinite += (p.inv_decay[size_t(s) * p.decays + e] & 0x7F80) == 0x7F80;
    if (zeros) blk.add(&fl->zeros, zeros);
    if (nonfinite) blk.add(&fl->nonfinite, nonfinite);
    bool l_bad = false, inv_bad = false;
    for (size_t e = t; e < csq; e += T) {
      const double l = p.l_f64 ? p.l_f64[at + e] : fp64::fp16_value(p.l_fp16[at + e]);
      S0[e] = l;
      l_bad |= !std::isfinite(l);
      inv_bad |= (p.inv[at + e] & 0x7C00) == 0x7C00;
    }
    if (l_bad) blk.set(&fl->l_bad);
    if (inv_bad) blk.set(&fl->inv_bad);
  });
  blk.each([&](int t) {  // unit_lower_inverse(path L): only where inv_method_only_rel_rmse reads it
    if (fl->l_bad || fl->inv_bad || own_gold_l) return;
    for (int c = t; c < C; c += T)
      fp64::unit_lower_solve_column(
          C, c, c & ~31, [&](int i, int j) { return S0[size_t(i) * C + j]; },
          [&](int i) -> double& { return S1[size_t(i) * C + c]; });
  });
  blk.each([&](int t) {
    if (fl->inv_bad) return;
    for (size_t e = t; e < csq; e += T) S0[e] = fp64::fp16_value(p.inv[at + e]);
  });
  blk.each([&](int t) {  // the residual's product; INV is finite here, gold L strictly lower
    if (fl->inv_bad) return;
    for (size_t e = t; e < csq; e += T) {
      const int i = int(e / C), j = int(e % C);
      S2[e] = fp64::unit_plus_times(
          C, i, j, i + 1, [&](int r, int k) { return gl[size_t(r) * C + k]; },
          [&](int k, int c) { return S0[size_t(k) * C + c]; });
    }
  });
  blk.each([&](int t) {
    double* o = out + size_t(s) * kNeumannMetricCount;
    const bool l_ok = fl->l_bad == 0, inv_ok = fl->inv_bad == 0;
    const uint16_t* l16 = p.l_fp16 ? p.l_fp16 + at : nullptr;
    const double* l64 = p.l_f64 ? p.l_f64 + at : nullptr;
    for (int q = 0; q < 5; ++q) {
      if (t != serial_thread(q, T)) continue;
      double v = INFINITY;
      switch (q) {
        case 0:  // l_rel_rmse: path L vs gold L
          if (l_ok) v = rel_rmse_serial(C, l64, l16, gl);
          o[4] = v;
          break;
        case 1:  // inv_total_rel_rmse: path INV vs gold inverse
          if (inv_ok) v = rel_rmse_serial(C, S0, nullptr, gi);
          o[5] = v;
          break;
        case 2:  // inv_method_only_rel_rmse: path INV vs the exact inverse of I + path L
          if (l_ok && inv_ok) v = rel_rmse_serial(C, S0, nullptr, own_gold_l ? gi : S1);
          o[6] = v;
          break;
        case 3:  // inv_gold_l_rel_rmse: the method on the gold L vs gold inverse
          v = p.gold_l_inv ? rel_rmse_serial(C, nullptr, p.gold_l_inv + at, gi) : NAN;
          o[7] = v;
          break;
        default:  // inverse_residual: rel_rmse((I + gold L) * INV, I)
          if (inv_ok) v = rel_rmse_serial(C, S2, nullptr, nullptr);
          o[8] = v;
          break;
      }
    }
    if (t == 0) {
      o[0] = static_cast<double>(fl->zeros);
      o[1] = static_cast<double>(fl->nonfinite);
      o[2] = l_ok ? 1.0 : 0.0;
      o[3] = inv_ok ? 1.0 : 0.0;
      o[9] = p.highest_power ? static_cast<double>(p.highest_power[s]) : NAN;
      o[10] = p.power_max ? static_cast<double>(p.power_max[s]) : NAN;
      o[11] = p.gold_l_highest_power ? static_cast<double>(p.gold_l_highest_power[s]) : NAN;
      o[12] = p.gold_l_power_max ? static_cast<double>(p.gold_l_power_max[s]) : NAN;
    }
  });
}

// evaluate_reference(gold) for sample s into out[s * kReferenceMetricCount ...].
template <class Block>
CHUNKINV_HD void reference_program(const Block& blk, const GoldRead& g, double* out, long s, double* sm,
                                   BlockFlags* fl) {
  const int C = g.chunk, T = blk.threads;
  const size_t csq = size_t(C) * C, at = size_t(s) * csq;
  double* const S0 = sm;        // the gold inverse
  double* const S1 = sm + csq;  // (I + gold L) * gold inverse
  const double* gl = g.gold_l + at;

  blk.each([&](int t) {
    if (t == 0) {
      fl->l_bad = fl->inv_bad = 0;
      fl->max_bits = 0;
    }
  });
  blk.each([&](int t) {
    bool l_bad = false, inv_bad = false;
    uint64_t max_bits = 0;  // of |entry|: max over non-negative doubles is the max of their bits
    for (size_t e = t; e < csq; e += T) {
      const double v = g.gold_inv[at + e];
      S0[e] = v;
      if (!std::isfinite(v)) inv_bad = true;
      else if (const uint64_t b = hd::bits(std::fabs(v)); b > max_bits) max_bits = b;
      l_bad |= !std::isfinite(gl[e]);
    }
    if (l_bad) blk.set(&fl->l_bad);
    if (inv_bad) blk.set(&fl->inv_bad);
    if (max_bits) blk.max(&fl->max_bits, max_bits);
  });
  blk.each([&](int t) {
    if (fl->inv_bad) return;
    for (size_t e = t; e < csq; e += T) {
      const int i = int(e / C), j = int(e % C);
      S1[e] = fp64::unit_plus_times(
          C, i, j, i + 1, [&](int r, int k) { return gl[size_t(r) * C + k]; },
          [&](int k, int c) { return S0[size_t(k) * C + c]; });
    }
  });
  blk.each([&](int t) {
    double* o = out + size_t(s) * kReferenceMetricCount;
    const bool inv_ok = fl->inv_bad == 0;
    if (t == serial_thread(0, T)) o[2] = inv_ok ? rel_rmse_serial(C, S1, nullptr, nullptr) : INFINITY;
    if (t == serial_thread(1, T)) {
      o[0] = fl->l_bad ? 0.0 : 1.0;
      o[1] = inv_ok ? 1.0 : 0.0;
      o[3] = inv_ok ? hd::from_bits(fl->max_bits) : INFINITY;
    }
  });
}

}  // namespace chunkinv::gpu::blocks
