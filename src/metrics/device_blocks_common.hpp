// What every block program of metrics/device_metrics_blocks.hpp shares: the
// block's flags, the tiles and slabs of its work split, the shared-memory
// layouts, the loads and the residual's sums (the overview of the
// programs, their phases and work split is in device_metrics_blocks.hpp).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "core/detmath_hd.hpp"
#include "core/hd.hpp"
#include "gpu/pack.hpp"
#include "metrics/device_metrics.hpp"
#include "metrics/fp64_order.hpp"
#include "metrics/metric_ids.hpp"

// Unrolls the next loop four times on the device: four iterations' loads
// issued before the first one's use, without the registers of a full unroll.
#ifdef __CUDA_ARCH__
#define CHUNKINV_UNROLL_4 _Pragma("unroll 4")
#else
#define CHUNKINV_UNROLL_4
#endif

namespace chunkinv::gpu::blocks {

namespace id = metric_id;  // a sample's row of values, written by id



inline constexpr int kKeyTile = 32;  // channels staged per step of the gold's dot products

struct BlockFlags {
  int l_bad;          // some entry of an L is not finite
  int inv_bad;        // some entry of an inverse is not finite
  int zeros;          // decays == 0
  int nonfinite;      // non-finite inverse decays
  unsigned long long max_bits;  // bits of max |entry| (non-negative doubles order as their bits)
  int upper;          // the fast program's test: kUpper* bits, what is nonzero above a diagonal or not finite
  int sinv_bad;       // some entry of the run on the gold L is not finite
  int s2_bad;         // some entry of the residual's product is not finite
};
inline constexpr size_t kFlagsBytes = 48;  // sizeof(BlockFlags) rounded up to 16
static_assert(sizeof(BlockFlags) <= kFlagsBytes);

CHUNKINV_HD inline int block_threads(int C) { return C <= 16 ? 32 : C <= 32 ? 64 : 128; }
CHUNKINV_HD inline int tile_rows(int C) { return (C + 1) / 2; }
// Tiles strictly below the diagonal of tiles; the diagonal's tiles, one a
// row, are left to one thread each (block_threads(C) >= tile_rows(C)).
CHUNKINV_HD inline int pair_tiles(int C) { return tile_rows(C) * (tile_rows(C) - 1) / 2; }
CHUNKINV_HD inline int tiles_per_thread(int C) {
  const int n = (pair_tiles(C) + block_threads(C) - 1) / block_threads(C);
  return n > 0 ? n : 1;
}
// Tile q strictly below the diagonal of tiles, row by row: (ti, tj), tj < ti;
// it holds the pairs (2ti + r, 2tj + c), r, c in {0, 1}.
CHUNKINV_HD inline void tile_coords(int q, int& ti, int& tj) {
  ti = 1;
  while ((ti + 1) * ti / 2 <= q) ++ti;
  tj = q - ti * (ti - 1) / 2;
}

// A lower triangle packed by rows: (i, j), j <= i, at i (i + 1) / 2 + j.
CHUNKINV_HD inline int packed_size(int C) { return C * (C + 1) / 2; }
CHUNKINV_HD inline int packed_at(int i, int j) { return i * (i + 1) / 2 + j; }

// Entries of a slab: one a thread up to C = 16, 64 up to C = 32, so that a
// block's shared memory stays small and more blocks share a multiprocessor
// (the programs wait on latency, not on bandwidth); 256 above, where the
// path's packed L needs as much of the same space anyway (the gold's
// reference and the gold path's fast metrics, which keep no such L, take
// 128 there: reference_slab_size, fast_slab_size).
CHUNKINV_HD inline int slab_size(int C) {
  const int s = C <= 16 ? 32 : C <= 32 ? 64 : 256;
  return packed_size(C) < s ? packed_size(C) : s;
}
CHUNKINV_HD inline int slab_stride(int C) { return slab_size(C) | 1; }  // odd: the sums' threads read different banks
// The gold's tail and the reference program keep a slab of 128 above
// C = 32 (two rows of the residual's pass fit it), whose shared memory then
// lets five blocks an SM at C = 64.
CHUNKINV_HD inline int reference_slab_size(int C) {
  return C > 32 ? (packed_size(C) < 128 ? packed_size(C) : 128) : slab_size(C);
}
CHUNKINV_HD inline int reference_slab_stride(int C) { return reference_slab_size(C) | 1; }

// Thread t's share (of T) of adding a slab's terms to n sums in their
// classes (fp64::ChunkSums): the slab holds the terms of the packed entries
// k0 .. k0 + len - 1, the i-th sum added is q = sum_of(i), its terms at
// terms + q * stride and its eight lower-class sums at acc + q * 8. Item
// i * 8 + c, dealt to threads t, t + T, ..., adds the slab's terms of class
// c (k = c mod 8) in ascending k: eight threads a sum side by side, each a
// chain of len / 8 adds, where one thread added all len
// (docs/notes/gpu-notes.md, "Ninth lease").
template <class SumOf>
CHUNKINV_HD inline void add_classes(int t, int T, int n, const SumOf& sum_of, const double* terms, int stride, int k0,
                                    int len, double* acc) {
  constexpr int K = fp64::kSumClasses;
  for (int item = t; item < n * K; item += T) {
    const int q = sum_of(item / K), c = item % K;
    const double* s = terms + size_t(q) * stride;
    double a = acc[q * K + c];
    CHUNKINV_UNROLL_4
    for (int o = (c - k0) & (K - 1); o < len; o += K) a += s[o];
    acc[q * K + c] = a;
  }
}
// The sums 0 .. n - 1, each.
CHUNKINV_HD inline void add_classes(int t, int T, int n, const double* terms, int stride, int k0, int len, double* acc) {
  add_classes(t, T, n, [](int i) { return i; }, terms, stride, k0, len, acc);
}

// Calls f(k, i, j) for thread t's entries k of the slab [k0, k0 + len) of
// the packed lower triangle, (i, j) the entry's row and column.
template <class F>
CHUNKINV_HD inline void slab_entries(int k0, int len, int T, int t, const F& f) {
  // The row of the first entry: the float root is within one of it at these sizes; then exact.
  int i = k0 + t < k0 + len ? int((std::sqrt(8.0f * float(k0 + t) + 1.0f) - 1.0f) * 0.5f) : 0;
  while (i > 0 && packed_at(i, 0) > k0 + t) --i;
  for (int k = k0 + t; k < k0 + len; k += T) {
    while (packed_at(i + 1, 0) <= k) ++i;
    f(k, i, k - packed_at(i, 0));
  }
}

// Calls f(e, i, j) for thread t's entries e = t, t + T, ... of a C x C
// matrix, (i, j) = (e / C, e % C): one division, then steps (a division by
// the runtime C at every entry was a fifth of a writing loop's instructions).
template <class F>
CHUNKINV_HD inline void matrix_entries(int C, int T, int t, const F& f) {
  const int csq = C * C, di = T / C, dj = T % C;
  int i = t / C, j = t % C;
  for (int e = t; e < csq; e += T) {
    f(e, i, j);
    i += di;
    j += dj;
    if (j >= C) {
      j -= C;
      ++i;
    }
  }
}

// The gold's X (its inverse): C x C, row-major, up to C = 32; above, on a
// finite L (gold_columns), by columns. The solve of column c starts at row
// x_first(c) = c & ~31 (fp64_order.hpp; the threads of a warp walk the
// same rows), but X keeps only rows x_kept(c) = c & ~3 (the panel of the
// diagonal) to C - 1: the rows above are +0 (above the diagonal, on a
// finite L; fp64_order.hpp), not solved for and read as +0. That took X
// from 3,136 to 2,240 doubles at C = 64: six blocks an SM (run 75).
// The columns of a group g (columns 4g .. 4g + 3, which keep the same
// rows) are interleaved: row i of the group's four columns is four
// consecutive doubles, from x_group(C, g) + 4 (i - 4g) on, and the group
// is followed by x_pad(C) = 4 ((1 - C) mod 4) doubles, so that group g
// starts at 4g modulo 16 doubles. Column c is then a pointer with a
// stride of 4 (x_origin: row i at x_origin(C, c) + 4i), congruent to c
// modulo 16, so a warp's 32 consecutive columns fall twice on each of the
// 16 bank pairs, whether its lanes read one row (the solve) or
// consecutive columns of a row (the writing phase): one wavefront a
// half-warp. The columns laid end to end before (each odd in length) put
// two to four lanes on a bank pair: run 88 at C = 64, 300.1 -> 214.7
// million shared wavefronts in a launch, the gold 119.4 -> 117.5 ns a
// sample (docs/notes/gpu-notes.md). At C = 16 and 32 the columns measured
// slower (15.4 -> 16.8, 56.7 -> 59.8 ns) and save nothing: the staged
// keys take as much of that space.
CHUNKINV_HD inline bool gold_columns(int C) { return C > 32; }
CHUNKINV_HD inline int x_first(int c) { return c & ~31; }
CHUNKINV_HD inline int x_kept(int c) { return c & ~3; }
CHUNKINV_HD inline int x_pad(int C) { return 4 * ((1 - C) & 3); }
// Groups g' < g take 4 (C - 4g') + x_pad(C) doubles each.
CHUNKINV_HD inline int x_group(int C, int g) { return 4 * C * g - 8 * g * (g - 1) + x_pad(C) * g; }
CHUNKINV_HD inline int x_origin(int C, int c) { return x_group(C, c / 4) - 4 * x_kept(c) + c % 4; }
CHUNKINV_HD inline size_t x_doubles(int C) { return size_t(x_group(C, (C + 3) / 4) - x_pad(C)); }

// The gold's shared memory (doubles): L's lower triangle packed, then X
// sharing its space with the staged keys and cumulated gates, then cum and
// beta, then the reference's slab of terms and sums.
struct GoldSmem {
  double *L, *X, *keyt, *cumt, *cum, *beta, *terms, *acc;
};
CHUNKINV_HD inline size_t reference_slab_doubles(int C) {
  return 2 * size_t(reference_slab_stride(C)) + fp64::kSumClasses;  // the slab, then the residual's sum's classes
}
CHUNKINV_HD inline int dmma_stride(int C);
CHUNKINV_HD inline bool gold_tensor_cores(int C);
CHUNKINV_HD inline size_t gold_staging(int C, bool channel) {
  return size_t(kKeyTile) * (channel ? 4 * tile_rows(C) : gold_tensor_cores(C) ? dmma_stride(C) : 2 * tile_rows(C));
}
// L's space rounded up to an even count: the staged keys start 16-byte
// aligned, for the dot products' paired loads.
CHUNKINV_HD inline size_t gold_l_doubles(int C) { return (size_t(packed_size(C)) + 1) & ~size_t(1); }
CHUNKINV_HD inline size_t gold_x_doubles(int C) { return gold_columns(C) ? x_doubles(C) : size_t(C) * C; }
CHUNKINV_HD inline size_t gold_smem_doubles(int C, bool channel) {
  const size_t x = gold_x_doubles(C), staging = gold_staging(C, channel);
  return gold_l_doubles(C) + (x > staging ? x : staging) + 2 * size_t(C) + reference_slab_doubles(C);
}
CHUNKINV_HD inline GoldSmem gold_smem(double* sm, int C, bool channel) {
  const size_t x = gold_x_doubles(C), staging = gold_staging(C, channel);
  GoldSmem m;
  m.L = sm;
  m.X = m.keyt = sm + gold_l_doubles(C);
  m.cumt = m.keyt + size_t(kKeyTile) * 2 * tile_rows(C);
  m.cum = m.X + (x > staging ? x : staging);
  m.beta = m.cum + C;
  m.terms = m.beta + C;
  m.acc = m.terms + 2 * reference_slab_stride(C);
  return m;
}
CHUNKINV_HD inline size_t metrics_smem_doubles(int C) { return 3 * size_t(C) * C; }
CHUNKINV_HD inline size_t reference_smem_doubles(int C) { return 2 * size_t(C) * C; }

// p[0], p[1] into v; p 16-byte aligned (one 16-byte load on the GPU).
CHUNKINV_HD inline void load_pair(const double* p, double (&v)[2]) {
#ifdef __CUDA_ARCH__
  const double2 w = *reinterpret_cast<const double2*>(p);
  v[0] = w.x;
  v[1] = w.y;
#else
  v[0] = p[0];
  v[1] = p[1];
#endif
}

// p[0..7] into v; p 16-byte aligned (one 16-byte load on the GPU).
CHUNKINV_HD inline void load_8(const uint16_t* p, uint16_t (&v)[8]) {
#ifdef __CUDA_ARCH__
  const uint4 w = *reinterpret_cast<const uint4*>(p);
  const uint32_t u[4] = {w.x, w.y, w.z, w.w};
  for (int q = 0; q < 4; ++q) {
    v[2 * q] = uint16_t(u[q] & 0xFFFF);
    v[2 * q + 1] = uint16_t(u[q] >> 16);
  }
#else
  for (int q = 0; q < 8; ++q) v[q] = p[q];
#endif
}

// One m8n8k4 FP64 MMA on a warp: (c0, c1) += A B, the lane's fragments a
// (A[lane / 4][lane % 4]) and b (B[lane % 4][lane / 4]), its accumulators
// C[lane / 4][2 (lane % 4) + {0, 1}]. Each accumulator takes its four
// products as fused multiply-adds, k in order
// (GpuInstructions.MmaF64IsAFusedChainInKOrder).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
__device__ inline void dmma_m8n8k4(double& c0, double& c1, double a, double b) {
  asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};"
               : "+d"(c0), "+d"(c1)
               : "d"(a), "d"(b));
}
#endif

// Tile (I, J), J <= I, of the inverse residual's product (I + L) X by the
// fast rules (L finite and strictly lower, X finite and zero above its
// diagonal) on a warp: the mma.m8n8k4 of k = 8J .. 8I + 7 in steps of 4, k
// ascending, which is fp64::residual_entry's chain over those k, the same
// bits as over j .. i (fp64_order.hpp); a CPU run forms the lane's entries
// by that chain. v: the lane's entries (8I + lane / 4, 8J + 2 (lane % 4) +
// {0, 1}). kAhead: the loop unrolled four times, its loads issued ahead
// (for operands in device memory), else kept rolled (fewer registers).
// l(i, k) is read for k <= i < C, x(k, j) for j <= k < C.
template <bool kAhead, class Lf, class Xf>
CHUNKINV_HD void residual_tile(int C, int I, int J, int lane, const Lf& l, const Xf& x, double (&v)[2]) {
  // The entries of I + L and of X the tile reads: zero outside the matrix,
  // above L's diagonal and above X's.
  auto a_ik = [&](int i, int k) { return i >= C || k >= C || k > i ? 0.0 : ((i == k) ? 1.0 : 0.0) + l(i, k); };
  auto x_kj = [&](int k, int j) { return k >= C || j >= C || k < j ? 0.0 : x(k, j); };
  const int g = lane / 4, h = lane % 4, kend = 8 * I + 8 < C ? 8 * I + 8 : C;
  v[0] = v[1] = 0.0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (kAhead) {
    CHUNKINV_UNROLL_4
    for (int k0 = 8 * J; k0 < kend; k0 += 4) dmma_m8n8k4(v[0], v[1], a_ik(8 * I + g, k0 + h), x_kj(k0 + h, 8 * J + g));
  } else {
    CHUNKINV_NO_UNROLL  // unrolled, the gold's registers went 80 -> 91 at C = 64 (a block an SM fewer)
    for (int k0 = 8 * J; k0 < kend; k0 += 4) dmma_m8n8k4(v[0], v[1], a_ik(8 * I + g, k0 + h), x_kj(k0 + h, 8 * J + g));
  }
#else
  for (int e = 0; e < 2; ++e) {
    const int i = 8 * I + g, j = 8 * J + 2 * h + e;
    for (int k0 = 8 * J; k0 < kend; k0 += 4)
      for (int k = k0; k < k0 + 4; ++k) v[e] = fp64::fma_rn(a_ik(i, k), x_kj(k, j), v[e]);
  }
#endif
}

// The inverse residual's reference sum: its terms are the identity's
// squares, ones on the diagonal and +0 elsewhere, and their class sums
// (fp64::ChunkSums) are small integers added exactly, so the sum is C.
CHUNKINV_HD inline double residual_ref(int C) { return double(C); }

// The inverse residual's error sum by the fast rules, as eight class sums
// (fp64::ChunkSums' lower classes): the squared errors into err[0..7] (set
// to +0 first) over the packed lower triangle. Its reference sum is not
// formed: the callers take residual_ref(C). Row block I's
// tiles (I, J), J <= I, on warp J % W (residual_tile), their entries held
// in registers; then eight, four or two rows at a time, the most whose
// entries fit `cap` doubles of terms (two rows, at most 2C - 1 entries, fit
// every program's slab), the lanes holding them write their squared errors
// to terms, in packed order, and eight threads add them, a class each
// (add_classes): the same adds in the same order whatever the step, and two
// barriers a step (two rows a step at C = 64 had held the gold entry's
// metrics at a barrier a third of their time, docs/notes/gpu-notes.md,
// "Seventh lease"). Sets `s2_bit` in fl->s2_bad when an entry of the
// product is not finite.
struct ResidualTiles {
  double v[2][2];  // the lane's two entries of each of its tiles of a row block
};
// Tiles a warp holds in a row block: at most two, for every block size here.
CHUNKINV_HD inline bool residual_tiles_fit(int C, int threads) {
  const int W = threads / 32, B = (C + 7) / 8;
  return W >= 1 && (B + W - 1) / W <= 2;
}
// residual_pass's rows a step for `cap` doubles of terms: 8, 4 or 2, the
// most whose last rows' entries fit (a step of n rows from r0 takes n r0 +
// n (n + 1) / 2 entries, the most for the last n rows).
CHUNKINV_HD inline int residual_pass_rows(int C, int cap) {
  int n = 8;
  while (n > 2 && packed_at(C, 0) - packed_at(C > n ? C - n : 0, 0) > cap) n /= 2;
  return n;
}
template <class Block, class Lf, class Xf>
CHUNKINV_HD void residual_pass(const Block& blk, int C, const Lf& l, const Xf& x, double* terms, int cap, double* err,
                               BlockFlags* fl, int s2_bit) {
  const int B = (C + 7) / 8, W = blk.threads / 32, n = residual_pass_rows(C, cap);
  auto acc = blk.template local<ResidualTiles>();
  CHUNKINV_NO_UNROLL
  for (int I = 0; I < B; ++I) {
    const int end = 8 * I + 8 < C ? 8 * I + 8 : C;
    blk.each([&](int t) {
      if (t < fp64::kSumClasses && I == 0) err[t] = 0.0;
      const int w = t / 32;
      CHUNKINV_UNROLL
      for (int p = 0; p < 2; ++p) {
        const int J = w + p * W;
        if (J <= I) residual_tile<false>(C, I, J, t % 32, l, x, acc[t].v[p]);
      }
    });
    CHUNKINV_NO_UNROLL
    for (int r0 = 8 * I; r0 < end; r0 += n) {
      const int k0 = packed_at(r0, 0), len = packed_at(r0 + n < end ? r0 + n : end, 0) - k0;
      blk.each([&](int t) {
        const int lane = t % 32, w = t / 32, i = 8 * I + lane / 4;
        if (i < r0 || i >= r0 + n || i >= C) return;
        bool bad = false;
        CHUNKINV_UNROLL
        for (int p = 0; p < 2; ++p) {
          const int J = w + p * W;
          if (J > I) continue;
          for (int e = 0; e < 2; ++e) {
            const int j = 8 * J + 2 * (lane % 4) + e;
            if (j > i) continue;
            const double r = acc[t].v[p][e], d = r - (i == j ? 1.0 : 0.0);
            bad |= !std::isfinite(r);
            terms[packed_at(i, j) - k0] = d * d;
          }
        }
        if (bad) blk.set_bits(&fl->s2_bad, s2_bit);
      });
      blk.each([&](int t) { add_classes(t, blk.threads, 1, terms, 0, k0, len, err); });
    }
  }
}

// The inverse residual's product by the fast rules into R, the lower
// triangle packed, in one phase: warp w takes the tiles q = w, w + W, ...
// of the lower triangle of 8 x 8 tiles, row by row (residual_tile, loads
// ahead), and writes its lanes' entries on and below the diagonal. For
// programs with the space for R, whose sums then take its entries' terms in
// their slabs beside the others (the serial sums run side by side, not one
// after another as residual_pass's).
template <class Block, class Lf, class Xf>
CHUNKINV_HD void residual_tiles(const Block& blk, int C, const Lf& l, const Xf& x, double* R) {
  const int B = (C + 7) / 8, W = blk.threads / 32, nt = B * (B + 1) / 2;
  blk.each([&](int t) {
    const int lane = t % 32;
    CHUNKINV_NO_UNROLL
    for (int q = t / 32; q < nt; q += W) {
      int I = 0;
      while ((I + 1) * (I + 2) / 2 <= q) ++I;
      const int J = q - I * (I + 1) / 2, i = 8 * I + lane / 4;
      double v[2];
      residual_tile<true>(C, I, J, lane, l, x, v);
      for (int e = 0; e < 2; ++e) {
        const int j = 8 * J + 2 * (lane % 4) + e;
        if (i < C && j <= i) R[packed_at(i, j)] = v[e];
      }
    }
  });
}

// evaluate_reference's values from the fast rules' sums (the gold L finite).
CHUNKINV_HD inline void write_reference_fast(double* o, int C, const BlockFlags* fl, const double* acc) {
  const bool inv_ok = fl->inv_bad == 0;
  fp64::RelRmse r;  // acc: the residual's error sum's classes (residual_pass)
  r.err = fp64::class_total(acc);
  r.ref = residual_ref(C);
  r.finite = fl->s2_bad == 0;
  o[id::kRefLFinite] = 1.0;
  o[id::kRefInvFinite] = inv_ok ? 1.0 : 0.0;
  o[id::kRefInverseResidual] = inv_ok ? r.value(C * C) : INFINITY;
  o[id::kRefInvMaxAbs] = inv_ok ? hd::from_bits(fl->max_bits) : INFINITY;
}

}  // namespace chunkinv::gpu::blocks
