// The fast programs, for the samples whose matrices are zero above the
// diagonal: one entry's metrics (metrics_fast_program), the kernel path's
// and the gold path's entries at once (pair_fast_program), and the gold's
// own (reference_fast_program); each rel_rmse over the lower triangle.
#pragma once

#include "metrics/device_metrics_program.hpp"

namespace chunkinv::gpu::blocks {

// ---- The fast metrics program ----------------------------------------------
//
// evaluate(neumann, gold, path) again, for the samples where every matrix it
// reads is zero above its diagonal (the path's L, the gold L, both inverses
// and the run on the gold L) and the gold L is finite: all of them, unless
// a path writes junk above the diagonal or an inverse overflows there. On
// those the same bits come from less work, each step exact:
//  - a rel_rmse's sums skip the entries above the diagonal: their terms are
//    (+-0 - +-0)^2 = +0 and the sums, which start at +0 and add squares, are
//    never -0, so adding +0 changes no bit (fp64::ChunkSums: the upper
//    classes' total is +0, and lower + +0 the lower's bits). Each lower
//    class takes its terms in ascending packed index, as on the host;
//  - the residual's product takes the terms k of the tiles holding j .. i
//    only: INV(k, j) is +-0 for k < j and L(i, k) +0 for k > i, the gold L
//    finite, so the others are fused multiply-adds of zeros to
//    accumulators that start at +0 (fp64::residual_entry);
//  - entries above the diagonal are not formed at all: the product is zero
//    there and (I + gold L) * INV's term (0 - 0)^2.
// What runs in parallel changes too: a phase computes every term of a slab
// of the lower triangle at once (all threads, the operands read once,
// coalesced), then eight threads a sum add the slab's terms of their
// classes in order (add_classes). The sums' order, the one thing the bits
// depend on, is the host's.
//
// A sample that fails the test is flagged in `slow[s]` and left to
// metrics_program (the caller runs it on the flagged samples). A matrix
// that is not finite needs no test: the metrics that read it are +inf
// whatever their sums (fast_rules_hold).

// The fast program's sums, err and ref of the five rel_rmse metrics, less
// those equal to another's term for term: inv_gold_l's reference sum is
// inv_total's (the gold inverse's squares), and the residual's is C
// (residual_ref). A sum is formed only where a value read needs it and no
// other sum holds it (metrics_fast_program).
enum FastSum { kFastLErr, kFastInvErr, kFastMethodErr, kFastRunErr, kFastResErr, kFastLRef, kFastGiRef, kFastMethodRef, kFastSums };
// What the fast program's test found (BlockFlags::upper): nonzeros above
// the diagonal of the path's L, the gold L, the path's INV, the gold
// inverse, the run on the gold L; a non-finite gold L.
inline constexpr int kUpperL = 1, kUpperGoldL = 2, kUpperInv = 4, kUpperGoldInv = 8, kUpperGoldRun = 16,
                     kGoldLBad = 32;
// Whether the fast program's rules hold for the sums the metrics read: a
// metric whose value is +inf or NaN whatever its sums (its matrix not
// finite, or absent) does not need them.
CHUNKINV_HD inline bool fast_rules_hold(int upper, bool l_ok, bool inv_ok, bool gold_run_ok) {
  int needs = 0;
  if (l_ok) needs |= kUpperL | kUpperGoldL;                                 // l_rel_rmse
  if (inv_ok) needs |= kUpperInv | kUpperGoldInv | kUpperGoldL | kGoldLBad;  // total, method only, residual
  if (gold_run_ok) needs |= kUpperGoldRun | kUpperGoldInv;                  // inv_gold_l_rel_rmse
  return (upper & needs) == 0;
}
// A rel_rmse over a C x C matrix from its two sums (fp64::RelRmse, as evaluate forms it).
CHUNKINV_HD inline double rel_rmse_value(double err, double ref, bool finite, int C) {
  fp64::RelRmse r;
  r.err = err;
  r.ref = ref;
  r.finite = finite;
  return r.value(C * C);
}
// The sums metrics_fast_program forms, FastSum q's bit 1 << q: those the
// values read, each once (l: l_rel_rmse asked for and the path's L finite;
// inv: INV finite; run: the run on the gold L there and finite; method:
// inv_method_only's; tiles: the residual's errors in the slabs; own_gold_l:
// the path's L is the gold L; run_is_inv: its INV is the run on the gold L).
CHUNKINV_HD inline unsigned fast_sums_formed(bool l, bool inv, bool run, bool method, bool tiles, bool own_gold_l,
                                             bool run_is_inv) {
  unsigned f = 0;
  auto form = [&](bool on, FastSum q) {
    if (on) f |= 1u << q;
  };
  form(l && !own_gold_l, kFastLErr);
  form(l, kFastLRef);
  form(inv, kFastInvErr);
  form(inv || run, kFastGiRef);
  form(method && !own_gold_l, kFastMethodErr);
  form(method && !own_gold_l, kFastMethodRef);
  form(run && !run_is_inv, kFastRunErr);
  form(tiles, kFastResErr);
  return f;
}
// Thread t's share of a fast program's staging: each entry e of the sample
// (path L, gold L, gold inverse, INV bits, bits of the run on the gold L or
// none) loaded kU entries at a time, all their loads issued before any is
// used; the finiteness flags and the kUpper* bits of what is nonzero above
// the diagonal set in fl; store(k, l, gold l, gold inv, INV bits, run bits)
// called for each entry on or below the diagonal, k its packed index. A
// gold L not read (gl null) is taken as +0 everywhere: no flag, and its
// store argument +0; no value that reads it may be asked for.
template <class Block, class PathL, class Store>
CHUNKINV_HD void stage_entries(const Block& blk, int C, int t, const PathL& path_l, const double* gl, const double* gi,
                               const uint16_t* inv, const uint16_t* run, BlockFlags* fl, const Store& store) {
  const int T = blk.threads;
  const size_t csq = size_t(C) * C;
  bool l_bad = false, inv_bad = false, run_bad = false;
  int upper = 0;
  constexpr int kU = 4;
  // (i, j) of entry e0 + u T, stepped with e0 (no division per entry).
  const int step = kU * T, di = step / C, dj = step % C;
  int ri[kU], rj[kU];
  CHUNKINV_UNROLL
  for (int u = 0; u < kU; ++u) {
    ri[u] = (t + u * T) / C;
    rj[u] = (t + u * T) % C;
  }
  for (size_t e0 = t; e0 < csq; e0 += size_t(kU) * T) {
    double l[kU], gle[kU], gie[kU];
    uint16_t ib[kU], sb[kU];
    CHUNKINV_UNROLL
    for (int u = 0; u < kU; ++u) {
      const size_t e = e0 + size_t(u) * T < csq ? e0 + size_t(u) * T : e0;
      l[u] = path_l(e);
      gle[u] = gl ? gl[e] : 0.0;
      gie[u] = gi[e];
      ib[u] = inv[e];
      sb[u] = run ? run[e] : uint16_t(0);
    }
    CHUNKINV_UNROLL
    for (int u = 0; u < kU; ++u) {
      const size_t e = e0 + size_t(u) * T;
      const int i = ri[u], j = rj[u];
      ri[u] += di;
      rj[u] += dj;
      if (rj[u] >= C) {
        rj[u] -= C;
        ++ri[u];
      }
      if (e >= csq) continue;
      l_bad |= !std::isfinite(l[u]);
      inv_bad |= (ib[u] & 0x7C00) == 0x7C00;
      run_bad |= (sb[u] & 0x7C00) == 0x7C00;
      if (!std::isfinite(gle[u])) upper |= kGoldLBad;
      if (j > i) {
        if (l[u] != 0.0) upper |= kUpperL;
        if (gle[u] != 0.0) upper |= kUpperGoldL;
        if ((ib[u] & 0x7FFF) != 0) upper |= kUpperInv;
        if (gie[u] != 0.0) upper |= kUpperGoldInv;
        if ((sb[u] & 0x7FFF) != 0) upper |= kUpperGoldRun;
      } else {
        store(packed_at(i, j), l[u], gle[u], gie[u], ib[u], sb[u]);
      }
    }
  }
  if (l_bad) blk.set(&fl->l_bad);
  if (inv_bad) blk.set(&fl->inv_bad);
  if (run_bad) blk.set(&fl->sinv_bad);
  if (upper) blk.set_bits(&fl->upper, upper);
}

// Column c of the exact inverse of I + L (L finite, its lower triangle
// packed in lp) into s1, lower triangle packed by rows. The solve starts at
// row c & ~31 (a warp's threads walk the same (i, j)), and its rows above c
// are +0 on a finite L (fp64_order.hpp: the products x_j a_ij of the zero
// head add +-0 to sums that never hold -0, and x_i = 0.0 - those sums), so
// they go to one scratch double, which holds +0 whenever it is read.
CHUNKINV_HD inline void solve_column_packed(int C, int c, const double* lp, double* s1) {
  double above = 0.0;
  fp64::unit_lower_solve_column(
      C, c, c & ~31, [&](int i, int j) { return lp[packed_at(i, j)]; },
      [&](int i) -> double& { return i >= c ? s1[packed_at(i, c)] : above; });
}

// Up to C = 16 the fast program also keeps the gold L and the gold inverse
// in shared memory (packed), for the residual's products and the terms.
// Above, the blocks an SM holds would drop by a third (C = 32, run 39 on
// the H200: kernel-path metrics 53.6 -> 70.7 ns a sample).
CHUNKINV_HD inline bool fast_stages_gold(int C) { return C <= 16; }
// Whether the fast program forms the residual's product into R in shared
// memory (residual_tiles: its squared errors then go into the slabs beside
// the other sums) or two rows at a time after the slabs (residual_pass: no
// space for R, its errors a serial sum of their own). Up to C = 32: R's
// P doubles cost the C = 64 programs blocks an SM (the kernel entry's
// metrics 116.6 -> 149.4 ns a sample with R at C = 64, on an H100), and
// the pass's serial sum cost the C <= 32 ones (the pair at C = 16: 13.67
// ns with the pass, 11.20 with R; docs/notes/gpu-notes.md, "Sixth lease").
CHUNKINV_HD inline bool fast_residual_tiles(int C) { return C <= 32; }
// The fast metrics program's instantiation for chunk C: calls
// f.template operator()<fast_stages_gold(C), fast_residual_tiles(C)>()
// (the gold is staged only at C <= 16, where R is formed too). The launch
// and the CPU tests both dispatch through it.
template <class F>
void with_fast_metrics_shape(int C, F&& f) {
  if (fast_stages_gold(C)) f.template operator()<true, true>();
  else if (fast_residual_tiles(C)) f.template operator()<false, true>();
  else f.template operator()<false, false>();
}
struct FastSmem {
  double *inv, *s1, *lp, *terms, *acc, *r, *gl, *gi;
};
// The fast program's slabs: slab_size(C), but 128 entries above C = 32
// where the path's L is the gold L. That program keeps neither the exact
// inverse of its L nor its L packed for the solve, so its slabs' terms are
// what its scratch holds: 26.5 instead of 37.3 KB a block at C = 64 (run 52:
// 121.3 -> 110.9 ns a sample; the kernel path's entry, held at four blocks
// an SM by its other blocks, went 93.9 -> 97.4 with the smaller slabs).
CHUNKINV_HD inline int fast_slab_size(int C, bool with_s1) {
  const int s = slab_size(C);
  return !with_s1 && s > 128 ? 128 : s;
}
CHUNKINV_HD inline int fast_slab_stride(int C, bool with_s1) { return fast_slab_size(C, with_s1) | 1; }
// The path's L packed (for the solve; with_s1 only), then the slabs' terms.
CHUNKINV_HD inline size_t fast_scratch(int C, bool with_s1) {
  const size_t a = with_s1 ? size_t(packed_size(C)) : 0, b = size_t(kFastSums) * fast_slab_stride(C, with_s1);
  return a > b ? a : b;
}
// with_s1: the exact inverse of I + path L has its lower triangle, packed
// (solve_column_packed); false where the path's L is the gold L (its exact
// inverse is the gold inverse, read from there).
CHUNKINV_HD inline size_t fast_metrics_smem_doubles(int C, bool with_s1 = true) {
  return size_t(packed_size(C)) + (with_s1 ? size_t(packed_size(C)) : 0) + fast_scratch(C, with_s1) +
         kFastSums * fp64::kSumClasses +
         (fast_residual_tiles(C) ? size_t(packed_size(C)) : 0) + (fast_stages_gold(C) ? 2 * size_t(packed_size(C)) : 0);
}
CHUNKINV_HD inline FastSmem fast_smem(double* sm, int C, bool with_s1 = true) {
  FastSmem m;
  m.inv = sm;                             // the path's INV as doubles, lower triangle packed by rows
  m.s1 = m.inv + packed_size(C);          // the exact inverse of I + path L, packed (with_s1)
  m.lp = m.terms = m.s1 + (with_s1 ? packed_size(C) : 0);  // the path's L packed (for the solve, with_s1), then the slabs' terms
  m.acc = m.lp + fast_scratch(C, with_s1);  // the sums' classes, kFastSums x 8 (add_classes)
  m.r = m.acc + kFastSums * fp64::kSumClasses;  // (I + gold L) * INV, packed (residual_tiles)
  m.gl = m.r + (fast_residual_tiles(C) ? packed_size(C) : 0);  // the gold L, packed (fast_stages_gold)
  m.gi = m.gl + packed_size(C);           // the gold inverse, packed (fast_stages_gold)
  return m;
}

// The gold L and inverse of a sample as the fast programs read them: from
// their packed copies in shared memory (kStaged) or from device memory.
template <bool kStaged>
struct FastGold {
  int C;
  const double *gl, *gi;    // C x C, device memory
  const double *sgl, *sgi;  // packed, shared memory (kStaged)
  // L's entry (r, c), c <= r; the inverse's entry (i, j), j <= i, at e =
  // i C + j (device) or k packed (shared).
  CHUNKINV_HD double l(int r, int c) const { return kStaged ? sgl[packed_at(r, c)] : gl[size_t(r) * C + c]; }
  CHUNKINV_HD double inv(size_t e, int k) const { return kStaged ? sgi[k] : gi[e]; }
};

// Above C = 32 the fast program leaves inv_method_only's sums, where it
// needs them, to a program of their own (method_fast_program), over the
// samples it lists: the exact inverse of I + path L and the path's L
// packed for its solve take 33 KB of shared memory at C = 64, which held
// the fast program to four blocks an SM whether a sample needed them or
// not (model_like's kernel L is not finite at C = 64, so none does); without
// them it holds eight. At C <= 32 that space costs no block the registers
// would allow, and a second pass over the operands would cost time. The
// shapes that defer are those without R (fast_residual_tiles), so that the
// instantiation for them holds no code of the method's sums.
CHUNKINV_HD inline bool fast_defers_method(int C) { return !fast_residual_tiles(C); }
// Whether the fast program solves for the exact inverse of I + path L:
// where the path's L is not the gold L and inv_method_only_rel_rmse is
// asked for, at C <= 32.
CHUNKINV_HD inline bool fast_with_s1(const GoldRead& g, const PathOnDevice& p) {
  return !path_l_is_gold_l(g, p) && p.method_only && !fast_defers_method(g.chunk);
}
// Whether it leaves inv_method_only's sums to method_fast_program (above C = 32).
CHUNKINV_HD inline bool fast_defers(const GoldRead& g, const PathOnDevice& p) {
  return !path_l_is_gold_l(g, p) && p.method_only && fast_defers_method(g.chunk);
}

// kStaged = fast_stages_gold(C), kTiles = fast_residual_tiles(C): each a
// template parameter, so that an instantiation holds one residual form
// only (with both, the program took 20-24 bytes of spills under its
// 64-register bound, where either alone takes none). sm holds
// fast_metrics_smem_doubles(C, fast_with_s1(g, p)) doubles. The values p
// does not ask for (its l_rel_rmse, method_only, residual; gold_l_inv
// null) are NaN. Where fast_defers(g, p), defer[s] is 1 for a sample whose
// inv_method_only the program leaves to method_fast_program (NaN until
// then), else 0; defer may be null where it cannot.
template <bool kStaged, bool kTiles, class Block>
CHUNKINV_HD void metrics_fast_program(const Block& blk, const GoldRead& g, const PathOnDevice& p, double* out, long s,
                                      double* sm, BlockFlags* fl, int* slow, int* defer) {
  const size_t csq = size_t(g.chunk) * g.chunk, at = size_t(s) * csq;
  const bool own_gold_l = path_l_is_gold_l(g, p), with_s1 = fast_with_s1(g, p);
  const int C = g.chunk, T = blk.threads, P = packed_size(C), S = fast_slab_size(C, with_s1),
            SS = fast_slab_stride(C, with_s1);
  const FastSmem m = fast_smem(sm, C, with_s1);
  const double* gl = g.gold_l + at;
  const double* gi = g.gold_inv + at;
  const FastGold<kStaged> gold{C, gl, gi, m.gl, m.gi};
  auto path_l = [&](size_t e) { return p.l_f64 ? p.l_f64[at + e] : fp64::fp16_value(p.l_fp16[at + e]); };
  // The L's read only for the values asked for that need them (PathOnDevice);
  // one not read is +0 to the staging, which then sets none of its flags.
  const bool read_l = p.l_rel_rmse || p.method_only || p.l_finite, read_gold_l = p.l_rel_rmse || p.residual;
  auto staged_l = [&](size_t e) { return read_l ? path_l(e) : 0.0; };

  blk.each([&](int t) {
    if (t == 0) fl->l_bad = fl->inv_bad = fl->zeros = fl->nonfinite = fl->upper = fl->sinv_bad = fl->s2_bad = 0;
    for (int q = t; q < kFastSums * fp64::kSumClasses; q += T) m.acc[q] = 0.0;
  });
  blk.each([&](int t) {
    count_decays(blk, p, s, t, fl);
    stage_entries(blk, C, t, staged_l, read_gold_l ? gl : nullptr, gi, p.inv + at,
                  p.gold_l_inv ? p.gold_l_inv + at : nullptr, fl,
                  [&](int k, double l, double gle, double gie, uint16_t ib, uint16_t) {
                    if (kTiles && with_s1) m.lp[k] = l;  // for the solve
                    m.inv[k] = fp64::fp16_value(ib);
                    if (kStaged) {
                      m.gl[k] = gle;
                      m.gi[k] = gie;
                    }
                  });
  });
  const bool l_ok = fl->l_bad == 0, inv_ok = fl->inv_bad == 0, method = l_ok && inv_ok && p.method_only;
  const bool gold_run_ok = p.gold_l_inv != nullptr && fl->sinv_bad == 0;
  // inv_method_only's sums left to method_fast_program: formed neither here
  // nor there where INV or the path's L is not finite (its value is +inf).
  const bool deferred = method && fast_defers(g, p);
  if (!fast_rules_hold(fl->upper, l_ok, inv_ok, gold_run_ok)) {
    blk.each([&](int t) {
      if (t != 0) return;
      slow[s] = 1;
      if (defer) defer[s] = 0;
    });
    return;
  }
  blk.each([&](int t) {  // unit_lower_inverse(path L), as metrics_program
    if (t == 0) {
      slow[s] = 0;
      if (defer) defer[s] = deferred;
    }
    if constexpr (kTiles) {  // deferred above C = 32 (fast_defers_method)
      if (!method || own_gold_l) return;
      for (int c = t; c < C; c += T) solve_column_packed(C, c, m.lp, m.s1);
    }
  });

  // The sums formed: those the values read, each once. The gold path's
  // entry (its L the gold L) needs no l_rel_rmse error sum (every term is
  // (x - x)^2 = +0 on a finite gold L) and no inv_method_only sums (its L's
  // exact inverse is the gold inverse: inv_total's sums); where its INV is
  // the run on the gold L (the pipeline's gold path), inv_gold_l's error
  // sum is inv_total's too. No sum at all where none is read (the INV and
  // the run on the gold L not finite, and no l_rel_rmse asked for, as with
  // --metrics inv_total_rel_rmse,inv_finite at C = 64): no slab is formed.
  const bool residual = inv_ok && p.residual, tiles = kTiles && residual;
  const unsigned formed = fast_sums_formed(l_ok && p.l_rel_rmse, inv_ok, gold_run_ok, method && !deferred, tiles,
                                           own_gold_l, p.gold_l_inv == p.inv);
  auto has = [formed](FastSum q) { return (formed >> q & 1u) != 0; };
  const int nsums = hd::popcount(formed);
  auto sum_of = [formed](int i) { return hd::nth_bit(formed, i); };
  // The residual's product on the tensor cores, into R before the slabs.
  auto gold_l = [&](int r, int c) { return gold.l(r, c); };
  auto inv_kj = [&](int k, int j) { return m.inv[packed_at(k, j)]; };
  if (tiles) residual_tiles(blk, C, gold_l, inv_kj, m.r);
  for (int k0 = 0; nsums > 0 && k0 < P; k0 += S) {
    const int len = P - k0 < S ? P - k0 : S;
    blk.each([&](int t) {
      bool s2_bad = false;
      slab_entries(k0, len, T, t, [&](int k, int i, int j) {
        const size_t e = size_t(i) * C + j;
        // The gold inverse's entry: read first above C = 32, where that
        // keeps the program in its 64 registers; in its branch below
        // (C <= 32), where the first read spills (`-Xptxas -v`).
        const double gie_first = kTiles ? 0.0 : gold.inv(e, k), inv = m.inv[k];
        double* q = m.terms + (k - k0);
        double d;
        if (has(kFastLRef)) {  // l_rel_rmse
          const double gle = gold.l(i, j);
          if (has(kFastLErr)) {
            d = path_l(e) - gle;
            q[kFastLErr * SS] = d * d;
          }
          q[kFastLRef * SS] = gle * gle;
        }
        if (has(kFastGiRef)) {  // inv_total_rel_rmse, inv_gold_l_rel_rmse
          const double gie = kTiles ? gold.inv(e, k) : gie_first;
          q[kFastGiRef * SS] = gie * gie;
          if (has(kFastInvErr)) {
            d = inv - gie;
            q[kFastInvErr * SS] = d * d;
          }
          if (has(kFastRunErr)) {
            d = fp64::fp16_value(p.gold_l_inv[at + e]) - gie;
            q[kFastRunErr * SS] = d * d;
          }
        }
        if (kTiles && has(kFastMethodErr)) {  // inv_method_only_rel_rmse (deferred above C = 32)
          const double x = m.s1[k];
          d = inv - x;
          q[kFastMethodErr * SS] = d * d;
          q[kFastMethodRef * SS] = x * x;
        }
        if (has(kFastResErr)) {  // inverse_residual: (I + gold L) * INV against I, its entry from R
          const double r = m.r[k];
          s2_bad |= !std::isfinite(r);
          d = r - (i == j ? 1.0 : 0.0);
          q[kFastResErr * SS] = d * d;
        }
      });
      if (s2_bad) blk.set(&fl->s2_bad);
    });
    // The sums formed, each in its classes' order.
    blk.each([&](int t) { add_classes(t, T, nsums, sum_of, m.terms, SS, k0, len, m.acc); });
  }
  // Without the space for R: the residual's pass over the (now free) slab
  // terms, its errors into the kFastResErr sum.
  constexpr int K = fp64::kSumClasses;
  if (!kTiles && residual) residual_pass(blk, C, gold_l, inv_kj, m.terms, kFastSums * SS, m.acc + kFastResErr * K, fl, 1);

  blk.each([&](int t) {
    if (t != 0) return;
    double* o = out + size_t(s) * kNeumannMetricCount;
    auto sum = [&](FastSum q) { return fp64::class_total(m.acc + q * K); };
    auto value = [&](double err, double ref, bool finite) { return rel_rmse_value(err, ref, finite, C); };
    const double inv_err = sum(kFastInvErr), gi_ref = sum(kFastGiRef);
    write_counts_and_diagnostics(o, p, s, fl, l_ok, inv_ok);
    if (!read_l) o[id::kLFinite] = NAN;  // l_finite, not asked for
    o[id::kLRelRmse] = !p.l_rel_rmse ? NAN : l_ok ? value(own_gold_l ? 0.0 : sum(kFastLErr), sum(kFastLRef), true) : INFINITY;
    o[id::kInvTotalRelRmse] = inv_ok ? value(inv_err, gi_ref, true) : INFINITY;
    o[id::kInvMethodOnlyRelRmse] = !p.method_only ? NAN
                                   : !method      ? INFINITY
                                   : own_gold_l   ? value(inv_err, gi_ref, true)
                                   : deferred     ? NAN  // method_fast_program's
                                                  : value(sum(kFastMethodErr), sum(kFastMethodRef), true);
    o[id::kInvGoldLRelRmse] = p.gold_l_inv ? value(has(kFastRunErr) ? sum(kFastRunErr) : inv_err, gi_ref, gold_run_ok) : NAN;
    o[id::kInverseResidual] =
        !p.residual ? NAN : inv_ok ? value(sum(kFastResErr), residual_ref(C), fl->s2_bad == 0) : INFINITY;
  });
}

// inv_method_only_rel_rmse of a sample metrics_fast_program deferred
// (defer[s] = 1: the rules hold, the path's L and INV are finite, above
// C = 32): the exact inverse of I + path L (solve_column_packed) and the
// two sums, err and ref, each in its classes' order, over fast_smem(sm, C,
// true)'s space (the same layout and slabs as the program that forms them
// itself at C <= 32, so the same bits). Writes that value alone.
CHUNKINV_HD inline size_t method_smem_doubles(int C) { return fast_metrics_smem_doubles(C, true); }
template <class Block>
CHUNKINV_HD void method_fast_program(const Block& blk, const GoldRead& g, const PathOnDevice& p, double* out, long s,
                                     double* sm) {
  const int C = g.chunk, T = blk.threads, P = packed_size(C), S = fast_slab_size(C, true),
            SS = fast_slab_stride(C, true);
  const size_t at = size_t(s) * size_t(C) * C;
  const FastSmem m = fast_smem(sm, C, true);
  constexpr int K = fp64::kSumClasses;
  blk.each([&](int t) {
    for (int q = t; q < kFastSums * K; q += T) m.acc[q] = 0.0;
    slab_entries(0, P, T, t, [&](int k, int i, int j) {
      const size_t e = at + size_t(i) * C + j;
      m.lp[k] = p.l_f64 ? p.l_f64[e] : fp64::fp16_value(p.l_fp16[e]);
      m.inv[k] = fp64::fp16_value(p.inv[e]);
    });
  });
  blk.each([&](int t) {
    for (int c = t; c < C; c += T) solve_column_packed(C, c, m.lp, m.s1);
  });
  const unsigned formed = 1u << kFastMethodErr | 1u << kFastMethodRef;
  auto sum_of = [formed](int i) { return hd::nth_bit(formed, i); };
  for (int k0 = 0; k0 < P; k0 += S) {
    const int len = P - k0 < S ? P - k0 : S;
    blk.each([&](int t) {
      slab_entries(k0, len, T, t, [&](int k, int, int) {
        const double x = m.s1[k], d = m.inv[k] - x;
        double* q = m.terms + (k - k0);
        q[kFastMethodErr * SS] = d * d;
        q[kFastMethodRef * SS] = x * x;
      });
    });
    blk.each([&](int t) { add_classes(t, T, 2, sum_of, m.terms, SS, k0, len, m.acc); });
  }
  blk.each([&](int t) {
    if (t != 0) return;
    out[size_t(s) * kNeumannMetricCount + id::kInvMethodOnlyRelRmse] = rel_rmse_value(
        fp64::class_total(m.acc + kFastMethodErr * K), fp64::class_total(m.acc + kFastMethodRef * K), true, C);
  });
}

// ---- The kernel path's entry and the gold path's at once ------------------
//
// evaluate(neumann) of two entries of one sample by the fast program's
// rules, in one block: the kernel path's (pk: its L and INV, and the run on
// the gold L) and the gold path's (pg: the gold L, and as INV that same run
// on the gold L, pg.inv == pg.gold_l_inv == pk.gold_l_inv). Their sums share
// terms, so the block forms 9 sums instead of 20, each in its classes' order:
//  - the gold path's inv_total, inv_method_only (its L is the gold L, so its
//    exact inverse is the gold inverse) and inv_gold_l sums are all the
//    kernel entry's inv_gold_l sums, term for term;
//  - both entries' l_rel_rmse reference sums are the gold L's squares;
//  - the gold path's l_rel_rmse error sum is +0: on a finite gold L every
//    term is (x - x)^2 = +0;
//  - every inverse_residual's reference sum is C: ones on the diagonal and
//    +0 elsewhere, added in order, exactly.
// An entry the rules do not cover is flagged in its own slow array and left
// to metrics_program; the other is still done here.
enum PairSum { kKlErr, kGlRef, kKinvErr, kGiRef, kMethodErr, kS1Ref, kRunErr, kKResErr, kGResErr, kPairSums };
inline constexpr int kS2Kernel = 1, kS2Gold = 2;  // BlockFlags::s2_bad bits: whose residual is not finite

struct PairSmem {
  double *inv, *run, *s1, *lp, *terms, *acc, *rk, *rg, *gl, *gi;
};
CHUNKINV_HD inline size_t pair_scratch(int C) {
  const size_t a = size_t(packed_size(C)), b = size_t(kPairSums) * slab_stride(C);
  return a > b ? a : b;
}
CHUNKINV_HD inline size_t pair_metrics_smem_doubles(int C) {
  return 3 * size_t(packed_size(C)) + pair_scratch(C) + kPairSums * fp64::kSumClasses + 2 * size_t(packed_size(C)) +
         (fast_stages_gold(C) ? 2 * size_t(packed_size(C)) : 0);
}
CHUNKINV_HD inline PairSmem pair_smem(double* sm, int C) {
  PairSmem m;
  m.inv = sm;                             // the kernel's INV as doubles, packed
  m.run = m.inv + packed_size(C);         // the run on the gold L as doubles, packed
  m.s1 = m.run + packed_size(C);          // the exact inverse of I + kernel L, packed
  m.lp = m.terms = m.s1 + packed_size(C);  // the kernel's L packed (for the solve), then the slabs' terms
  m.acc = m.lp + pair_scratch(C);         // the sums' classes, kPairSums x 8 (add_classes)
  m.rk = m.acc + kPairSums * fp64::kSumClasses;  // (I + gold L) * INV, packed (residual_tiles)
  m.rg = m.rk + packed_size(C);           // (I + gold L) * run, packed
  m.gl = m.rg + packed_size(C);           // the gold L, packed (fast_stages_gold)
  m.gi = m.gl + packed_size(C);           // the gold inverse, packed (fast_stages_gold)
  return m;
}

// The upper-triangle bits of the gold path's entry, from those the pair
// program found for the kernel's (its L is the gold L, its INV the run).
CHUNKINV_HD inline int gold_path_upper(int upper) {
  int u = upper & (kUpperGoldInv | kUpperGoldRun | kGoldLBad);
  if (upper & kUpperGoldL) u |= kUpperL | kUpperGoldL;
  if (upper & kUpperGoldRun) u |= kUpperInv;
  return u;
}

// kStaged = fast_stages_gold(C). out_k, out_g: the two entries' values.
template <bool kStaged, class Block>
CHUNKINV_HD void pair_fast_program(const Block& blk, const GoldRead& g, const PathOnDevice& pk, const PathOnDevice& pg,
                                   double* out_k, double* out_g, long s, double* sm, BlockFlags* fl, int* slow_k,
                                   int* slow_g) {
  const int C = g.chunk, T = blk.threads, P = packed_size(C), S = slab_size(C), SS = slab_stride(C);
  const size_t csq = size_t(C) * C, at = size_t(s) * csq;
  const PairSmem m = pair_smem(sm, C);
  const double* gl = g.gold_l + at;
  const double* gi = g.gold_inv + at;
  const FastGold<kStaged> gold{C, gl, gi, m.gl, m.gi};
  auto kernel_l = [&](size_t e) { return pk.l_f64 ? pk.l_f64[at + e] : fp64::fp16_value(pk.l_fp16[at + e]); };

  blk.each([&](int t) {
    if (t == 0) fl->l_bad = fl->inv_bad = fl->zeros = fl->nonfinite = fl->upper = fl->sinv_bad = fl->s2_bad = 0;
    for (int q = t; q < kPairSums * fp64::kSumClasses; q += T) m.acc[q] = 0.0;
  });
  blk.each([&](int t) {  // as metrics_fast_program's, for the kernel's entry; the run on the gold L read once
    count_decays(blk, pk, s, t, fl);
    stage_entries(blk, C, t, kernel_l, gl, gi, pk.inv + at, pk.gold_l_inv + at, fl,
                  [&](int k, double l, double gle, double gie, uint16_t ib, uint16_t sb) {
                    m.lp[k] = l;
                    m.inv[k] = fp64::fp16_value(ib);
                    m.run[k] = fp64::fp16_value(sb);
                    if (kStaged) {
                      m.gl[k] = gle;
                      m.gi[k] = gie;
                    }
                  });
  });
  // The kernel's entry ...
  const bool l_ok = fl->l_bad == 0, inv_ok = fl->inv_bad == 0, method = l_ok && inv_ok;
  const bool run_ok = fl->sinv_bad == 0;
  const bool k_fast = fast_rules_hold(fl->upper, l_ok, inv_ok, run_ok);
  // ... and the gold path's: its L is the gold L, its INV the run.
  const int upper_g = gold_path_upper(fl->upper);
  const bool gl_ok = (fl->upper & kGoldLBad) == 0;
  const bool g_fast = fast_rules_hold(upper_g, gl_ok, run_ok, run_ok);
  blk.each([&](int t) {
    if (t == 0) {
      slow_k[s] = !k_fast;
      slow_g[s] = !g_fast;
    }
  });
  if (!k_fast && !g_fast) return;
  blk.each([&](int t) {  // unit_lower_inverse(kernel L), as metrics_program
    if (!k_fast || !method) return;
    for (int c = t; c < C; c += T) solve_column_packed(C, c, m.lp, m.s1);
  });

  const bool k_res = k_fast && inv_ok, g_res = g_fast && run_ok;
  // The residuals' products on the tensor cores, into R before the slabs:
  // (I + gold L) * kernel INV and (I + gold L) * run.
  auto gold_l = [&](int r, int c) { return gold.l(r, c); };
  if (k_res) residual_tiles(blk, C, gold_l, [&](int k, int j) { return m.inv[packed_at(k, j)]; }, m.rk);
  if (g_res) residual_tiles(blk, C, gold_l, [&](int k, int j) { return m.run[packed_at(k, j)]; }, m.rg);
  for (int k0 = 0; k0 < P; k0 += S) {
    const int len = P - k0 < S ? P - k0 : S;
    blk.each([&](int t) {
      int s2_bad = 0;
      slab_entries(k0, len, T, t, [&](int k, int i, int j) {
        const size_t e = size_t(i) * C + j;
        const double gle = gold.l(i, j), gie = gold.inv(e, k), inv = m.inv[k], run = m.run[k];
        double* q = m.terms + (k - k0);
        double d;
        if (l_ok) {
          d = kernel_l(e) - gle;
          q[kKlErr * SS] = d * d;
        }
        q[kGlRef * SS] = gle * gle;
        q[kGiRef * SS] = gie * gie;
        if (inv_ok) {
          d = inv - gie;
          q[kKinvErr * SS] = d * d;
        }
        if (method) {
          const double x = m.s1[k];
          d = inv - x;
          q[kMethodErr * SS] = d * d;
          q[kS1Ref * SS] = x * x;
        }
        if (run_ok) {
          d = run - gie;
          q[kRunErr * SS] = d * d;
        }
        const double y = i == j ? 1.0 : 0.0;
        if (k_res) {  // (I + gold L) * kernel INV against I
          const double r = m.rk[k];
          if (!std::isfinite(r)) s2_bad |= kS2Kernel;
          d = r - y;
          q[kKResErr * SS] = d * d;
        }
        if (g_res) {  // (I + gold L) * run against I
          const double r = m.rg[k];
          if (!std::isfinite(r)) s2_bad |= kS2Gold;
          d = r - y;
          q[kGResErr * SS] = d * d;
        }
      });
      if (s2_bad) blk.set_bits(&fl->s2_bad, s2_bad);
    });
    // The sums, each in its classes' order; the unused ones add what nobody reads.
    blk.each([&](int t) { add_classes(t, T, kPairSums, m.terms, SS, k0, len, m.acc); });
  }

  blk.each([&](int t) {
    auto value = [&](double err, double ref, bool finite) { return rel_rmse_value(err, ref, finite, C); };
    const double ones = residual_ref(C);  // the residuals' reference sums
    auto sum = [&](int q) { return fp64::class_total(m.acc + q * fp64::kSumClasses); };
    if (t == 0 && k_fast) {
      double* o = out_k + size_t(s) * kNeumannMetricCount;
      write_counts_and_diagnostics(o, pk, s, fl, l_ok, inv_ok);
      o[id::kLRelRmse] = l_ok ? value(sum(kKlErr), sum(kGlRef), true) : INFINITY;
      o[id::kInvTotalRelRmse] = inv_ok ? value(sum(kKinvErr), sum(kGiRef), true) : INFINITY;
      o[id::kInvMethodOnlyRelRmse] = method ? value(sum(kMethodErr), sum(kS1Ref), true) : INFINITY;
      o[id::kInvGoldLRelRmse] = value(sum(kRunErr), sum(kGiRef), run_ok);
      o[id::kInverseResidual] = inv_ok ? value(sum(kKResErr), ones, (fl->s2_bad & kS2Kernel) == 0) : INFINITY;
    }
    if (t == (T > 32 ? 32 : 1) && g_fast) {  // on another warp where there is one
      double* o = out_g + size_t(s) * kNeumannMetricCount;
      BlockFlags none{};  // the gold path forms no decays
      write_counts_and_diagnostics(o, pg, s, &none, gl_ok, run_ok);
      o[id::kLRelRmse] = gl_ok ? value(0.0, sum(kGlRef), true) : INFINITY;
      o[id::kInvTotalRelRmse] = run_ok ? value(sum(kRunErr), sum(kGiRef), true) : INFINITY;
      o[id::kInvMethodOnlyRelRmse] = gl_ok && run_ok ? value(sum(kRunErr), sum(kGiRef), true) : INFINITY;
      o[id::kInvGoldLRelRmse] = value(sum(kRunErr), sum(kGiRef), run_ok);
      o[id::kInverseResidual] = run_ok ? value(sum(kGResErr), ones, (fl->s2_bad & kS2Gold) == 0) : INFINITY;
    }
  });
}

// evaluate_reference(gold) by the fast program's rules: for samples whose
// gold L is finite and both matrices zero above the diagonal (else slow[s]
// is set, for reference_program). Shared memory: the gold inverse packed,
// then a slab of the residual's two sums' terms, then the sums.
CHUNKINV_HD inline size_t fast_reference_smem_doubles(int C) {
  return size_t(packed_size(C)) + reference_slab_doubles(C);
}

template <class Block>
CHUNKINV_HD void reference_fast_program(const Block& blk, const GoldRead& g, double* out, long s, double* sm,
                                        BlockFlags* fl, int* slow) {
  const int C = g.chunk, T = blk.threads, P = packed_size(C), SS = reference_slab_stride(C);
  const size_t csq = size_t(C) * C, at = size_t(s) * csq;
  double* const X = sm;                  // the gold inverse, packed
  double* const terms = X + P;           // 2 x SS
  double* const acc = terms + 2 * SS;    // the residual's error sum's classes, 8
  const double* gl = g.gold_l + at;

  blk.each([&](int t) {
    if (t == 0) {
      fl->inv_bad = fl->upper = fl->s2_bad = 0;
      fl->max_bits = 0;
    }
    if (t < fp64::kSumClasses) acc[t] = 0.0;
  });
  blk.each([&](int t) {
    bool inv_bad = false, upper = false;
    uint64_t max_bits = 0;
    for (size_t e = t; e < csq; e += T) {
      const int i = int(e / size_t(C)), j = int(e % size_t(C));
      const double v = g.gold_inv[at + e], l = gl[e];
      if (!std::isfinite(v)) inv_bad = true;
      else if (const uint64_t b = hd::bits(std::fabs(v)); b > max_bits) max_bits = b;
      upper |= !std::isfinite(l);
      if (j > i) upper |= v != 0.0 || l != 0.0;
      else X[packed_at(i, j)] = v;
    }
    if (inv_bad) blk.set(&fl->inv_bad);
    if (upper) blk.set(&fl->upper);
    if (max_bits) blk.max(&fl->max_bits, max_bits);
  });
  if (fl->upper) {
    blk.each([&](int t) {
      if (t == 0) slow[s] = 1;
    });
    return;
  }
  if (fl->inv_bad == 0)
    residual_pass(blk, C, [&](int r, int c) { return gl[size_t(r) * C + c]; }, [&](int k, int j) { return X[packed_at(k, j)]; },
                  terms, 2 * SS, acc, fl, 1);
  blk.each([&](int t) {
    if (t != 0) return;
    slow[s] = 0;
    write_reference_fast(out + size_t(s) * kReferenceMetricCount, C, fl, acc);
  });
}

}  // namespace chunkinv::gpu::blocks
