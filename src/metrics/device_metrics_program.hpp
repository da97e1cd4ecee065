// The full metrics programs: evaluate(neumann, gold, path) for one entry
// (metrics_program) and evaluate_reference(gold) (reference_program), each
// rel_rmse one thread's sum over C^2 entries; and the pieces the fast programs
// share with them (the counts, the diagnostics, the residual's product).
#pragma once

#include "metrics/device_blocks_common.hpp"

namespace chunkinv::gpu::blocks {

// One rel_rmse(a, e) over C^2 entries, its sums in classes
// (fp64::ChunkSums); a is FP64 (a64) or FP16 bits (a16); e is FP64 (e64)
// or the identity (e64 null).
CHUNKINV_HD inline double rel_rmse_serial(int C, const double* a64, const uint16_t* a16, const double* e64) {
  fp64::ChunkSums r;
  for (int i = 0, e = 0; i < C; ++i)
    for (int j = 0; j < C; ++j, ++e) {
      const double x = a64 ? a64[e] : fp64::fp16_value(a16[e]);
      const double y = e64 ? e64[e] : i == j ? 1.0 : 0.0;
      r.add(C, i, j, x, y);
    }
  return r.value(C);
}

// Thread t's share of a path's decay counts (decays == 0, non-finite
// inverse decays), added to fl->zeros and fl->nonfinite.
template <class Block>
CHUNKINV_HD void count_decays(const Block& blk, const PathOnDevice& p, long s, int t, BlockFlags* fl) {
  const int T = blk.threads;
  int zeros = 0, nonfinite = 0;
  if (p.decay)
    for (int e = t; e < p.decays; e += T) zeros += (p.decay[size_t(s) * p.decays + e] & 0x7FFF) == 0;
  if (p.inv_decay)
    for (int e = t; e < p.decays; e += T) nonfinite += (p.inv_decay[size_t(s) * p.decays + e] & 0x7F80) == 0x7F80;
  if (zeros) blk.add(&fl->zeros, zeros);
  if (nonfinite) blk.add(&fl->nonfinite, nonfinite);
}

// A (path, neumann) entry's values that are not rel_rmse sums: the counts,
// the finite flags and the diagnostics.
CHUNKINV_HD inline void write_counts_and_diagnostics(double* o, const PathOnDevice& p, long s, const BlockFlags* fl,
                                                     bool l_ok, bool inv_ok) {
  o[id::kDecayZeros] = static_cast<double>(fl->zeros);
  o[id::kInvDecayNonfinite] = static_cast<double>(fl->nonfinite);
  o[id::kLFinite] = l_ok ? 1.0 : 0.0;
  o[id::kInvFinite] = inv_ok ? 1.0 : 0.0;
  o[id::kHighestPower] = p.highest_power ? static_cast<double>(p.highest_power[s]) : NAN;
  o[id::kPowerMax] = p.power_max ? static_cast<double>(p.power_max[s]) : NAN;
  o[id::kGoldLHighestPower] = p.gold_l_highest_power ? static_cast<double>(p.gold_l_highest_power[s]) : NAN;
  o[id::kGoldLPowerMax] = p.gold_l_power_max ? static_cast<double>(p.gold_l_power_max[s]) : NAN;
}

// Thread t's entries of R = (I + gold L) * B, all C x C, each over every k
// (the full programs' residual product: fp64::residual_entry's definition).
CHUNKINV_HD inline void residual_product(int C, int T, int t, const double* gl, const double* B, double* R) {
  for (size_t e = t; e < size_t(C) * C; e += T) {
    const int i = int(e / C), j = int(e % C);
    R[e] = fp64::residual_entry(
        i, j, 0, C, [&](int r, int k) { return gl[size_t(r) * C + k]; },
        [&](int k, int c) { return B[size_t(k) * C + c]; });
  }
}

// Thread of a block that computes the q-th serial metric: one per warp
// first, so that they run side by side.
CHUNKINV_HD inline int serial_thread(int q, int T) { return (q * 32) % T + (q * 32) / T; }

// Whether the path's L is the gold L itself (the gold path's entry): its
// exact inverse is then the gold inverse.
CHUNKINV_HD inline bool path_l_is_gold_l(const GoldRead& g, const PathOnDevice& p) {
  return p.l_f64 != nullptr && p.l_f64 == g.gold_l;
}

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
  const bool own_gold_l = path_l_is_gold_l(g, p);

  blk.each([&](int t) {
    if (t == 0) fl->l_bad = fl->inv_bad = fl->zeros = fl->nonfinite = 0;
  });
  blk.each([&](int t) {
    count_decays(blk, p, s, t, fl);
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
    if (!fl->inv_bad) residual_product(C, T, t, gl, S0, S2);
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
          o[id::kLRelRmse] = v;
          break;
        case 1:  // inv_total_rel_rmse: path INV vs gold inverse
          if (inv_ok) v = rel_rmse_serial(C, S0, nullptr, gi);
          o[id::kInvTotalRelRmse] = v;
          break;
        case 2:  // inv_method_only_rel_rmse: path INV vs the exact inverse of I + path L
          if (l_ok && inv_ok) v = rel_rmse_serial(C, S0, nullptr, own_gold_l ? gi : S1);
          o[id::kInvMethodOnlyRelRmse] = v;
          break;
        case 3:  // inv_gold_l_rel_rmse: the method on the gold L vs gold inverse
          v = p.gold_l_inv ? rel_rmse_serial(C, nullptr, p.gold_l_inv + at, gi) : NAN;
          o[id::kInvGoldLRelRmse] = v;
          break;
        default:  // inverse_residual: rel_rmse((I + gold L) * INV, I)
          if (inv_ok) v = rel_rmse_serial(C, S2, nullptr, nullptr);
          o[id::kInverseResidual] = v;
          break;
      }
    }
    if (t == 0) write_counts_and_diagnostics(o, p, s, fl, l_ok, inv_ok);
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
    if (!fl->inv_bad) residual_product(C, T, t, gl, S0, S1);
  });
  blk.each([&](int t) {
    double* o = out + size_t(s) * kReferenceMetricCount;
    const bool inv_ok = fl->inv_bad == 0;
    if (t == serial_thread(0, T)) o[id::kRefInverseResidual] = inv_ok ? rel_rmse_serial(C, S1, nullptr, nullptr) : INFINITY;
    if (t == serial_thread(1, T)) {
      o[id::kRefLFinite] = fl->l_bad ? 0.0 : 1.0;
      o[id::kRefInvFinite] = inv_ok ? 1.0 : 0.0;
      o[id::kRefInvMaxAbs] = inv_ok ? hd::from_bits(fl->max_bits) : INFINITY;
    }
  });
}

}  // namespace chunkinv::gpu::blocks
