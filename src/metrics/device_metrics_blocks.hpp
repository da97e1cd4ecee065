// The programs that one block of threads runs for one sample: the gold
// (compute_gold, and evaluate_reference in its tail), the metrics of a
// (path, neumann) entry (evaluate), of the kernel path's and the gold
// path's entries at once (pair_fast_program) and the gold's own
// (evaluate_reference, for the samples the gold's tail leaves). One source for the GPU
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
//  - gold L: each pair's dot over k in order. A thread takes 2 x 2 tiles of
//    pairs (i, j) strictly below the tiles' diagonal, and one pair (2a + 1,
//    2a) of the diagonal's tiles (their only pair with j < i); keys (and
//    per-channel cumulated gates) staged in shared memory 32 channels at a
//    time, as doubles, channel-major;
//  - inverses: one thread per column (fp64::unit_lower_solve_column); the
//    threads of a warp walk the same (i, j) so that L's entry is one
//    broadcast read; on a finite L a warp skips the rows above its first
//    column (exact, see fp64_order.hpp); the gold's solve gives each
//    column two threads, one for each half of a panel's sums;
//  - residual product: one thread per entry (fp64::unit_plus_times_lower);
//  - each rel_rmse is a serial sum: in the full programs (metrics_program,
//    reference_program) over C^2 entries, the metrics of a sample at once,
//    one thread each, on different warps where there are; in the fast
//    programs (metrics_fast_program, pair_fast_program,
//    reference_fast_program and the gold's tail: the samples whose
//    matrices are zero above the diagonal) over the lower triangle, a slab
//    of terms formed by every thread, then each sum's terms added in order
//    by one thread.
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
// The reference's two sums (residual_sums) take slabs of 128 above C = 32,
// one entry a thread of the gold's block, whose shared memory then lets
// five blocks an SM at C = 64.
CHUNKINV_HD inline int reference_slab_size(int C) {
  return C > 32 ? (packed_size(C) < 128 ? packed_size(C) : 128) : slab_size(C);
}
CHUNKINV_HD inline int reference_slab_stride(int C) { return reference_slab_size(C) | 1; }

// a + q[0] + q[1] + ... + q[len - 1], added in that order: one sum's slab.
CHUNKINV_HD inline double add_terms(double a, const double* q, int len) {
  for (int k = 0; k < len; ++k) a += q[k];
  return a;
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
CHUNKINV_HD inline size_t reference_slab_doubles(int C) { return 2 * size_t(reference_slab_stride(C)) + 2; }
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

// The two sums of evaluate_reference's inverse_residual, rel_rmse((I + L) X,
// I), by the fast rules (L finite and strictly lower, X zero above its
// diagonal, so the product's entries above the diagonal are zeros and its
// terms k < j too, see metrics_fast_program): over the packed lower triangle
// a slab at a time, into acc[0] (squared errors) and acc[1] (squared
// references), which the caller zeroes, as is fl->s2_bad, set here when an
// entry of the product is not finite. l(i, k) is read for k <= i; x(k, j)
// for k >= j, and for k < j too below C = 7; from C = 7 on, walk(i, j) gives
// the entry instead (fp64::unit_plus_times_lower_walk over the same L and X).
template <class Block, class Lf, class Xf, class Walk>
CHUNKINV_HD void residual_sums(const Block& blk, int C, const Lf& l, const Xf& x, const Walk& walk, double* terms,
                               double* acc, BlockFlags* fl) {
  const int P = packed_size(C), S = reference_slab_size(C), SS = reference_slab_stride(C), T = blk.threads;
  for (int k0 = 0; k0 < P; k0 += S) {
    const int len = P - k0 < S ? P - k0 : S;
    blk.each([&](int t) {
      bool s2_bad = false;
      slab_entries(k0, len, T, t, [&](int k, int i, int j) {
        const double r = 3 * C < 20 ? fp64::unit_plus_times_lower(C, i, j, 0, l, x) : walk(i, j);
        s2_bad |= !std::isfinite(r);
        const double y = i == j ? 1.0 : 0.0, d = r - y;
        terms[k - k0] = d * d;
        terms[SS + k - k0] = y * y;
      });
      if (s2_bad) blk.set(&fl->s2_bad);
    });
    blk.each([&](int t) {
      if (t >= 2) return;
      acc[t] = add_terms(acc[t], terms + size_t(t) * SS, len);
    });
  }
}

// evaluate_reference's values from the fast rules' sums (the gold L finite).
CHUNKINV_HD inline void write_reference_fast(double* o, int C, const BlockFlags* fl, const double* acc) {
  const bool inv_ok = fl->inv_bad == 0;
  fp64::RelRmse r;
  r.err = acc[0];
  r.ref = acc[1];
  r.finite = fl->s2_bad == 0;
  o[id::kRefLFinite] = 1.0;
  o[id::kRefInvFinite] = inv_ok ? 1.0 : 0.0;
  o[id::kRefInverseResidual] = inv_ok ? r.value(C * C) : INFINITY;
  o[id::kRefInvMaxAbs] = inv_ok ? hd::from_bits(fl->max_bits) : INFINITY;
}

// The gold's instantiations, one per shape of chunk: (tiles per thread,
// X by columns) = (1, no) up to C = 22, (2, no) at 23-32, (2, yes) at
// 33-46, (3, yes) at 47-56 and (4, yes) at 57-64; tensor: the dot
// products of per-token gates on tensor cores (gold_tensor_cores, from
// C = 17 on). Calls f.template operator()<tiles, columns, tensor>() with
// C's; false if C has none. The launch and the CPU tests both dispatch
// through it.
template <class F>
bool with_gold_shape(int C, F&& f) {
  const int tiles = tiles_per_thread(C);
  const bool columns = gold_columns(C);
  if (!columns && tiles == 1) {
    if (gold_tensor_cores(C)) return f.template operator()<1, false, true>(), true;
    return f.template operator()<1, false, false>(), true;
  }
  if (!columns && tiles == 2) return f.template operator()<2, false, true>(), true;
  if (columns && tiles == 2) return f.template operator()<2, true, true>(), true;
  if (columns && tiles == 3) return f.template operator()<3, true, true>(), true;
  if (columns && tiles == 4) return f.template operator()<4, true, true>(), true;
  return false;
}

// The gold's dot products of keys on FP64 tensor cores (per-token gates):
// the Gram matrix of the keys in 8 x 8 tiles on and below the diagonal, one
// mma.m8n8k4 per tile and 4 channels, tile q of the lower triangle of tiles
// (row by row) on warp q % W. The MMA adds its products in an order of its
// own, the CPU in channel order; both give the same bits where every
// partial sum is exact, which each pair's bound below shows: keys are BF16,
// so each product of keys i and j is a multiple of 2^(lo_i + lo_j) (lo_r:
// the exponent of the last significand bit of row r's smallest nonzero
// key) and every partial sum is below d 2^(hi_i + hi_j) (2^hi_r above
// |k_rc|), so it fits 53 bits when w_i + w_j + ceil(log2 d) <= 53, w_r =
// hi_r - lo_r. A pair without that bound, or with a sum of exactly zero,
// is summed again in channel order (exact_dot). The staged keys of a tile
// row are 8 rows; a channel of them is dmma_stride(C) doubles apart, = 4
// mod 16, so that a fragment's loads (4 channels of 8 rows) fall on
// distinct banks.
CHUNKINV_HD inline int dmma_row_blocks(int C) { return (C + 7) / 8; }
// Up to C = 16 (a warp a sample, three tiles) the tensor cores measured
// slower than the FP64 units (docs/notes/gpu-notes.md, run 65).
CHUNKINV_HD inline bool gold_tensor_cores(int C) { return C > 16; }
CHUNKINV_HD inline int dmma_tiles(int C) { return dmma_row_blocks(C) * (dmma_row_blocks(C) + 1) / 2; }
CHUNKINV_HD inline int dmma_tiles_per_warp(int C) {
  const int warps = block_threads(C) / 32;
  return (dmma_tiles(C) + warps - 1) / warps;
}
CHUNKINV_HD inline int dmma_stride(int C) {
  const int rows = 8 * dmma_row_blocks(C);
  return rows + ((4 - rows % 16) + 16) % 16;
}
// Tiles a warp holds, at most, for a shape of with_gold_shape.
CHUNKINV_HD constexpr int dmma_max_tiles(int tiles, bool columns) {
  return !columns ? 2 * tiles + 1 : tiles == 2 ? 6 : tiles == 3 ? 7 : 9;
}
// Tile q of the lower triangle of tiles, row by row: (I, J), J <= I.
CHUNKINV_HD inline void dmma_tile(int q, int& I, int& J) {
  I = 0;
  while ((I + 1) * (I + 2) / 2 <= q) ++I;
  J = q - I * (I + 1) / 2;
}
// A row's keys as the bound reads them: the largest magnitude bits (hi)
// and the smallest nonzero ones (lo), from hi = 0, lo = 0x7FFF.
struct RowBits {
  unsigned lo = 0x7FFF, hi = 0;
  CHUNKINV_HD void add(uint16_t b) {
    const unsigned m = b & 0x7FFFu;
    hi = m > hi ? m : hi;
    lo = m != 0 && m < lo ? m : lo;
  }
  // w_r: +1e9 where a key is not finite (its pairs are summed in order), 0
  // for a row of zeros. |k| < 2^(e - 126) for a biased exponent e (e = 0:
  // below 2^-126); the last significand bit is 2^(e - 134) or above (e = 0:
  // 2^-133).
  CHUNKINV_HD double width() const {
    if (hi >= 0x7F80u) return 1e9;
    if (hi == 0) return 0.0;
    return double((int(hi >> 7) - 126) - (int(lo >> 7) - 134));
  }
};
CHUNKINV_HD inline double dmma_row_width(const uint16_t* row, int d) {
  RowBits b;
  for (int c = 0; c < d; ++c) b.add(row[c]);
  return b.width();
}
CHUNKINV_HD inline int ceil_log2(int d) {
  int l = 0;
  while ((1 << l) < d) ++l;
  return l;
}
// Whether rows of widths wi and wj (RowBits::width) have only exact partial sums.
CHUNKINV_HD inline bool dmma_exact(double wi, double wj, int d) { return wi + wj + ceil_log2(d) <= 53; }
// Keys i and j's dot product in channel order, as compute_gold forms it.
CHUNKINV_HD inline double exact_dot(const uint16_t* ki, const uint16_t* kj, int d);

// One m8n8k4 FP64 MMA on a warp: (c0, c1) += A B, the lane's fragments a
// (A[lane / 4][lane % 4]) and b (B[lane % 4][lane / 4]), its accumulators
// C[lane / 4][2 (lane % 4) + {0, 1}].
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
__device__ inline void dmma_m8n8k4(double& c0, double& c1, double a, double b) {
  asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};"
               : "+d"(c0), "+d"(c1)
               : "d"(a), "d"(b));
}
#endif

// c + a b where a b is exact (a and b BF16 values, widened: the product has
// at most 16 significant bits and neither overflows nor underflows FP64):
// then rounding a b first changes nothing, and the fused form, rounded once,
// is the CPU's c + (a * b) bit for bit, in one instruction instead of two
// (the gold's dot products of keys; the build keeps --fmad=false, so it is
// asked for here by name).
CHUNKINV_HD inline double add_exact_product(double a, double b, double c) {
#ifdef __CUDA_ARCH__
  return __fma_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

CHUNKINV_HD inline double exact_dot(const uint16_t* ki, const uint16_t* kj, int d) {
  double dot = 0.0;
  for (int c = 0; c < d; ++c) dot = add_exact_product(fp64::bf16_value(ki[c]), fp64::bf16_value(kj[c]), dot);
  return dot;
}

// compute_gold for sample s. kMaxTiles >= tiles_per_thread(C); kChannel is
// gate_width != 1 (compute_gold's own test: per-channel gates with d = 1
// take the per-token formula there too). With a.reference, also
// evaluate_reference by the fast rules, from L and X in shared memory; a
// sample they do not cover (a non-finite L, or X not zero above its
// diagonal) gets slow[s] = 1 and is left to reference_program.
template <int kMaxTiles, bool kChannel, bool kColumns, bool kTensor, class Block>
CHUNKINV_HD void gold_program(const Block& blk, const GoldOnDevice& a, long s, double* sm, BlockFlags* fl,
                              int* slow) {
  const int C = a.chunk, d = a.dim, T = blk.threads;
  const int CP = 2 * tile_rows(C), tiles = pair_tiles(C);
  const size_t csq = size_t(C) * C;
  const GoldSmem m = gold_smem(sm, C, kChannel);
  const uint16_t* keys = a.keys + size_t(s) * C * d;
  struct Acc {
    double v[kMaxTiles][4];  // the tiles' pairs
    double dg;               // the diagonal tile's pair
  };
  // Per-token gates: the warp's 8 x 8 tiles of dot products, the lane's two
  // entries of each (dmma_m8n8k4).
  constexpr int kMaxDmma = dmma_max_tiles(kMaxTiles, kColumns);
  struct AccDmma {
    double v[kMaxDmma][2];
    RowBits row;  // of key row t, which thread t stages
  };
  // Per-token gates on tensor cores (kTensor = gold_tensor_cores(C)); the
  // FP64 units' 2 x 2 tiles otherwise.
  constexpr bool kTc = !kChannel && kTensor;
  auto acc = blk.template local<std::conditional_t<kTc, AccDmma, Acc>>();
  // The tensor cores' staged keys: channel-major, rows 0..KR-1 (C.. zero),
  // KS doubles a channel (the FP64 units' take CP rows, CP apart).
  const int KR = 8 * dmma_row_blocks(C), KS = dmma_stride(C);
  double* const width = m.terms;  // RowBits::width of each row, until the reference's tail uses the space
  // Thread t's diagonal pair is (2t + 1, 2t) where t < TR; a thread without
  // one, or without a q-th tile, forms the pairs of rows and columns 0 and
  // 1 instead (never read), so that the dot products' loop has no branch.
  const int TR = tile_rows(C);

  blk.each([&](int t) {
    if (t == 0) {
      fl->l_bad = fl->inv_bad = fl->upper = fl->s2_bad = 0;
      fl->max_bits = 0;
      if (!kChannel) {  // G cumulated in FP64, token order
        double c = 0.0;
        for (int i = 0; i < C; ++i) m.cum[i] = c += a.g[size_t(s) * C + i];
      }
    }
    for (int i = t; i < C; i += T) m.beta[i] = a.beta[size_t(s) * C + i];
    for (int e = t; e < packed_size(C); e += T) m.L[e] = 0.0;
    if constexpr (!kTc) {
      CHUNKINV_UNROLL
      for (int q = 0; q < kMaxTiles; ++q)
        for (int r = 0; r < 4; ++r) acc[t].v[q][r] = 0.0;
      acc[t].dg = 0.0;
    } else {
      CHUNKINV_UNROLL
      for (int q = 0; q < kMaxDmma; ++q) acc[t].v[q][0] = acc[t].v[q][1] = 0.0;
      acc[t].row = RowBits{};
    }
  });

  for (int k0 = 0; k0 < d; k0 += kKeyTile) {
    const int kn = d - k0 < kKeyTile ? d - k0 : kKeyTile;
    const int kn4 = (kn + 3) & ~3;  // the MMA's channels: kn and zeros to a multiple of 4
    blk.each([&](int t) {
      // Keys of channels k0..k0+kn-1 as doubles, channel-major; rows C..CP-1
      // (C..KR-1 on tensor cores) zero. Consecutive threads take
      // consecutive rows (stores to consecutive addresses); with whole
      // groups of 8 channels a thread reads 8 at once (16 bytes). On tensor
      // cores thread t takes row t (KR <= T), whose RowBits it keeps.
      if constexpr (kTc) {
        if (t >= KR) return;
        RowBits& rb = acc[t].row;
        if (d % 8 == 0 && kn % 8 == 0) {
          for (int k8 = 0; k8 < kn; k8 += 8) {
            uint16_t b[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            if (t < C) load_8(keys + size_t(t) * d + k0 + k8, b);
            CHUNKINV_UNROLL
            for (int u = 0; u < 8; ++u) {
              rb.add(b[u]);
              m.keyt[(k8 + u) * KS + t] = t < C ? fp64::bf16_value(b[u]) : 0.0;
            }
          }
        } else {
          for (int kk = 0; kk < kn4; ++kk) {
            const uint16_t b = t < C && kk < kn ? keys[size_t(t) * d + k0 + kk] : uint16_t(0);
            rb.add(b);
            m.keyt[kk * KS + t] = t < C && kk < kn ? fp64::bf16_value(b) : 0.0;
          }
        }
        return;
      }
      if (d % 8 == 0 && kn % 8 == 0) {
        for (int e = t; e < CP * (kn / 8); e += T) {
          const int r = e % CP, k8 = 8 * (e / CP);
          uint16_t b[8] = {0, 0, 0, 0, 0, 0, 0, 0};
          if (r < C) load_8(keys + size_t(r) * d + k0 + k8, b);
          CHUNKINV_UNROLL
          for (int u = 0; u < 8; ++u) m.keyt[(k8 + u) * CP + r] = r < C ? fp64::bf16_value(b[u]) : 0.0;
        }
      } else {
        for (int e = t; e < CP * kn; e += T) {
          const int r = e % CP, kk = e / CP;
          m.keyt[kk * CP + r] = r < C ? fp64::bf16_value(keys[size_t(r) * d + k0 + kk]) : 0.0;
        }
      }
      if (kChannel)  // G cumulated per channel in FP64, token order
        for (int kk = t; kk < kn; kk += T) {
          double c = 0.0;
          for (int r = 0; r < C; ++r) m.cumt[kk * CP + r] = c += a.g[(size_t(s) * C + r) * d + k0 + kk];
          for (int r = C; r < CP; ++r) m.cumt[kk * CP + r] = 0.0;
        }
    });
    if constexpr (kTc) {
      blk.each([&](int t) {
        auto& A = acc[t];
        const int lane = t % 32, warp = t / 32, W = T / 32, nt = dmma_tiles(C);
        // Lane (g = lane / 4, h = lane % 4) loads row 8 I + g of channel h of
        // each step for A, row 8 J + g for B.
        const double* base = m.keyt + (lane % 4) * KS + lane / 4;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
        int oi[kMaxDmma], oj[kMaxDmma];
        CHUNKINV_UNROLL
        for (int p = 0; p < kMaxDmma; ++p) {
          int I = 0, J = 0;
          if (warp + p * W < nt) dmma_tile(warp + p * W, I, J);
          oi[p] = 8 * I;
          oj[p] = 8 * J;
        }
        for (int k = 0; k < kn4; k += 4) {
          const double* row = base + k * KS;
          CHUNKINV_UNROLL
          for (int p = 0; p < kMaxDmma; ++p)
            if (warp + p * W < nt) dmma_m8n8k4(A.v[p][0], A.v[p][1], row[oi[p]], row[oj[p]]);
        }
#else
        // The lane's entries summed in channel order: where the bound holds,
        // the MMA's bits (a CPU run of this program checks the layout).
        (void)base;
        for (int p = 0; p < kMaxDmma && warp + p * W < nt; ++p) {
          int I, J;
          dmma_tile(warp + p * W, I, J);
          const int i = 8 * I + lane / 4;
          for (int h = 0; h < 2; ++h) {
            const int j = 8 * J + 2 * (lane % 4) + h;
            for (int k = 0; k < kn4; ++k) A.v[p][h] = add_exact_product(m.keyt[k * KS + i], m.keyt[k * KS + j], A.v[p][h]);
          }
        }
#endif
      });
    } else {
      blk.each([&](int t) {
        Acc& A = acc[t];
        int i0[kMaxTiles], j0[kMaxTiles];
        bool ok[kMaxTiles];
        CHUNKINV_UNROLL
        for (int q = 0; q < kMaxTiles; ++q) {
          int ti = 0, tj = 0;
          ok[q] = t + q * T < tiles;
          if (ok[q]) tile_coords(t + q * T, ti, tj);
          i0[q] = 2 * ti;
          j0[q] = 2 * tj;
        }
        const int a = t < TR ? 2 * t : 0;
        const bool dg_ok = t < TR && 2 * t + 1 < C;
        // The tiles' rows of the staged keys, moved on by a channel (CP
        // doubles) at each step, rather than indexed anew at every load.
        const double* pi[kMaxTiles];
        const double* pj[kMaxTiles];
        CHUNKINV_UNROLL
        for (int q = 0; q < kMaxTiles; ++q) {
          pi[q] = m.keyt + i0[q];
          pj[q] = m.keyt + j0[q];
        }
        for (int kk = 0; kk < kn; ++kk) {
          const double* kr = m.keyt + kk * CP;
          const double* cr = m.cumt + kk * CP;
          CHUNKINV_UNROLL
          for (int q = 0; q < kMaxTiles; ++q) {
            double ki[2], kj[2];
            load_pair(pi[q], ki);
            load_pair(pj[q], kj);
            pi[q] += CP;
            pj[q] += CP;
            if (!kChannel) {
              // dot += k_i k_j; pairs in the zero row C (odd C) are formed too and never read.
              CHUNKINV_UNROLL
              for (int r = 0; r < 4; ++r) A.v[q][r] = add_exact_product(ki[r >> 1], kj[r & 1], A.v[q][r]);
            } else if (ok[q]) {
              // dot += k_i k_j exp(min(G_i - G_j, 0)), only where i < C (the exp is the cost).
              CHUNKINV_UNROLL
              for (int r = 0; r < 4; ++r) {
                const int i = i0[q] + (r >> 1), j = j0[q] + (r & 1);
                if (i < C) A.v[q][r] += ki[r >> 1] * kj[r & 1] * detmath::hd::exp(fp64::min0(cr[i] - cr[j]));
              }
            }
          }
          double kd[2];  // k_j, k_i of the diagonal pair (i, j) = (a + 1, a)
          load_pair(kr + a, kd);
          if (!kChannel) A.dg = add_exact_product(kd[1], kd[0], A.dg);
          else if (dg_ok) A.dg += kd[1] * kd[0] * detmath::hd::exp(fp64::min0(cr[a + 1] - cr[a]));
        }
      });
    }
  }

  // L_ij = beta_i dot exp(min(G_i - G_j, 0)) (per channel: beta_i dot).
  auto l_entry = [&](int i, int j, double dot) {
    return kChannel ? m.beta[i] * dot : m.beta[i] * dot * detmath::hd::exp(fp64::min0(m.cum[i] - m.cum[j]));
  };
  if constexpr (kTc) {
    // The dot products into L's strict lower part, then each made L_ij there.
    blk.each([&](int t) {
      const int lane = t % 32, warp = t / 32, W = T / 32, nt = dmma_tiles(C);
      CHUNKINV_UNROLL
      for (int p = 0; p < kMaxDmma; ++p) {
        if (warp + p * W >= nt) continue;
        int I, J;
        dmma_tile(warp + p * W, I, J);
        const int i = 8 * I + lane / 4;
        for (int h = 0; h < 2; ++h) {
          const int j = 8 * J + 2 * (lane % 4) + h;
          if (j < i && i < C) m.L[packed_at(i, j)] = acc[t].v[p][h];
        }
      }
      if (t < C) width[t] = acc[t].row.width();
    });
    blk.each([&](int t) {
      bool bad = false;
      slab_entries(0, packed_size(C), T, t, [&](int e, int i, int j) {
        if (j == i) return;
        double dot = m.L[e];
        if (!dmma_exact(width[i], width[j], d) || dot == 0.0) dot = exact_dot(keys + size_t(i) * d, keys + size_t(j) * d, d);
        const double v = l_entry(i, j, dot);
        m.L[e] = v;
        bad |= !std::isfinite(v);
      });
      if (bad) blk.set(&fl->l_bad);
    });
  }
  // The FP64 units' dot products, each made L_ij in L's strict lower part.
  if constexpr (!kTc) blk.each([&](int t) {
    bool bad = false;
    auto put = [&](int i, int j, double dot) {
      const double v = l_entry(i, j, dot);
      m.L[packed_at(i, j)] = v;
      bad |= !std::isfinite(v);
    };
    CHUNKINV_UNROLL
    for (int q = 0; q < kMaxTiles; ++q) {
      if (t + q * T >= tiles) continue;
      int ti, tj;
      tile_coords(t + q * T, ti, tj);
      CHUNKINV_UNROLL
      for (int r = 0; r < 4; ++r) {
        const int i = 2 * ti + (r >> 1), j = 2 * tj + (r & 1);  // j < i: the tile is below the diagonal
        if (i < C) put(i, j, acc[t].v[q][r]);
      }
    }
    if (t < TR && 2 * t + 1 < C) put(2 * t + 1, 2 * t, acc[t].dg);
    if (bad) blk.set(&fl->l_bad);
  });

  blk.each([&](int t) {
    matrix_entries(C, T, t, [&](int e, int i, int j) {
      const double v = j <= i ? m.L[packed_at(i, j)] : 0.0;
      a.gold_l[size_t(s) * csq + e] = v;
      if (a.gold_l_fp16) a.gold_l_fp16[size_t(s) * csq + e] = fp16_bits_rn(v);
    });
    if (fl->l_bad == 0) return;  // the panels below
    // Eigen's order from row 0 (inf and NaN can reach every row), one thread a column.
    auto l = [&](int i, int j) { return m.L[packed_at(i, j)]; };
    for (int c = t; c < C; c += T) {
      if constexpr (!kColumns) {
        fp64::unit_lower_solve_column(C, c, 0, l, [&](int i) -> double& { return m.X[size_t(i) * C + c]; });
      } else {  // straight into device memory
        double* col = a.gold_inv + size_t(s) * csq + c;
        fp64::unit_lower_solve_column(C, c, 0, l, [&](int i) -> double& { return col[size_t(i) * C]; });
      }
    }
  });
  if (fl->l_bad == 0) {
    // A finite L: each column from x_first(c), its panels shared by two
    // threads (c, h), t = h C + c (block_threads(C) >= 2C): thread h forms
    // the sums of rows 2h and 2h + 1 of a panel (fp64::panel_sums, the same
    // operations in the same order as one thread's), then thread (c, 0) the
    // panel's rows. One thread a column had left half the block's warps
    // waiting through the solve (docs/notes/gpu-notes.md, runs 63-64 and 70-72).
    double* const sums = m.terms;  // 4 C doubles, row r of a panel at r C
    auto l = [&](int i, int j) { return m.L[packed_at(i, j)]; };
    // Row i of column c (rows from kept(c) on) and its value (+0 above).
    // Row-major X (C <= 32, where x_first(c) = 0) keeps every row.
    auto kept = [](int c) { return kColumns ? x_kept(c) : 0; };
    auto column = [&](int c) {
      if constexpr (kColumns) {
        double* col = m.X + x_origin(C, c);
        return [col](int i) -> double& { return col[4 * i]; };
      } else {
        double* col = m.X + c;
        return [col, C](int i) -> double& { return col[size_t(i) * C]; };
      }
    };
    auto value = [&](int c) {
      return [x = column(c), k = kept(c)](int i) { return i >= k ? x(i) : 0.0; };
    };
    for (int p = 0; p < C; p += 4) {
      blk.each([&](int t) {
        const int c = t % C, h = t / C;
        if (h > 1 || p <= x_first(c) || p < kept(c)) return;
        double q[2];
        fp64::panel_sums(C, p, x_first(c), 2 * h, l, value(c), q);
        sums[(2 * h) * C + c] = q[0];
        sums[(2 * h + 1) * C + c] = q[1];
      });
      blk.each([&](int t) {
        if (t >= C || p < kept(t)) return;  // kept(t) >= x_first(t)
        const double q[4] = {sums[t], sums[C + t], sums[2 * C + t], sums[3 * C + t]};
        fp64::panel_rows(C, t, p, x_first(t), q, l, column(t));
      });
    }
  }

  blk.each([&](int t) {
    if (t < 2) m.acc[t] = 0.0;  // after the solve, whose sums share the space
    const bool finite = fl->l_bad == 0;
    bool inv_bad = false, upper = false;
    uint64_t max_bits = 0;  // of |entry|: max over non-negative doubles is the max of their bits
    matrix_entries(C, T, t, [&](int e, int i, int j) {
      double v;
      if (!kColumns) {
        v = m.X[e];
        a.gold_inv[size_t(s) * csq + e] = v;
      } else if (finite) {  // +0 above the rows column j keeps
        v = i >= x_kept(j) ? m.X[x_origin(C, j) + 4 * i] : 0.0;
        a.gold_inv[size_t(s) * csq + e] = v;
      } else {  // the solve's own writes, before this phase
        v = a.gold_inv[size_t(s) * csq + e];
      }
      if (!a.reference) return;
      if (!std::isfinite(v)) inv_bad = true;
      else if (const uint64_t b = hd::bits(std::fabs(v)); b > max_bits) max_bits = b;
      upper |= j > i && v != 0.0;
    });
    if (inv_bad) blk.set(&fl->inv_bad);
    if (upper) blk.set(&fl->upper);
    if (max_bits) blk.max(&fl->max_bits, max_bits);
  });
  if (!a.reference) return;
  if (fl->l_bad || fl->upper) {
    blk.each([&](int t) {
      if (t == 0) slow[s] = 1;
    });
    return;
  }
  auto l = [&](int i, int k) { return m.L[packed_at(i, k)]; };
  // A non-finite inverse makes inverse_residual +inf whatever its sums (write_reference_fast).
  if (fl->inv_bad == 0) {
    if constexpr (!kColumns) {
      residual_sums(
          blk, C, l, [&](int k, int j) { return m.X[size_t(k) * C + j]; },
          [&](int i, int j) {
            return fp64::unit_plus_times_lower_walk(C, i, j, m.L + packed_at(i, 0), m.X + size_t(j) * C + j,
                                                    m.X + size_t(i) * C + j, fp64::StrideStep{C});
          },
          m.terms, m.acc, fl);
    } else {  // C > 32: no entry of X is read above the diagonal
      residual_sums(
          blk, C, l, [&](int k, int j) { return m.X[x_origin(C, j) + 4 * k]; },
          [&](int i, int j) {
            const double* xc = m.X + x_origin(C, j);  // column j, its rows j..i in order
            return fp64::unit_plus_times_lower_walk(C, i, j, m.L + packed_at(i, 0), xc + 4 * j, xc + 4 * i,
                                                    fp64::StrideStep{4});
          },
          m.terms, m.acc, fl);
    }
  }
  blk.each([&](int t) {
    if (t != 0) return;
    slow[s] = 0;
    write_reference_fast(a.reference + size_t(s) * kReferenceMetricCount, C, fl, m.acc);
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

// Thread t's entries of R = (I + gold L) * B, all C x C (the full programs'
// residual product; B finite, gold L strictly lower).
CHUNKINV_HD inline void residual_product(int C, int T, int t, const double* gl, const double* B, double* R) {
  for (size_t e = t; e < size_t(C) * C; e += T) {
    const int i = int(e / C), j = int(e % C);
    R[e] = fp64::unit_plus_times_lower(
        C, i, j, 0, [&](int r, int k) { return gl[size_t(r) * C + k]; },
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

// ---- The fast metrics program ----------------------------------------------
//
// evaluate(neumann, gold, path) again, for the samples where every matrix it
// reads is zero above its diagonal (the path's L, the gold L, both inverses
// and the run on the gold L) and the gold L is finite: all of them, unless
// a path writes junk above the diagonal or an inverse overflows there. On
// those the same bits come from less work, each step exact:
//  - a rel_rmse's sums skip the entries above the diagonal: their terms are
//    (+-0 - +-0)^2 = +0 and the sums, which start at +0 and add squares, are
//    never -0, so adding +0 changes no bit. The lower triangle is walked in
//    data order, so every other term is added in the host's order;
//  - the residual's product skips the terms k < j of entry (i, j): INV(k, j)
//    is +-0 there and the gold L finite, so they are zeros added to
//    accumulators that start at +0 (unit_plus_times' k_begin);
//  - entries above the diagonal are not formed at all: the product is zero
//    there and (I + gold L) * INV's term (0 - 0)^2.
// What runs in parallel changes too: a phase computes every term of a slab
// of the lower triangle at once (all threads, the operands read once,
// coalesced), then one thread per sum adds the slab's terms in order. The
// sums' order, the one thing the bits depend on, is the host's.
//
// A sample that fails the test is flagged in `slow[s]` and left to
// metrics_program (the caller runs it on the flagged samples). A matrix
// that is not finite needs no test: the metrics that read it are +inf
// whatever their sums (fast_rules_hold).

inline constexpr int kChains = 10;  // err and ref sums of the five rel_rmse metrics
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
struct FastSmem {
  double *inv, *s1, *lp, *terms, *acc, *gl, *gi;
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
  const size_t a = with_s1 ? size_t(packed_size(C)) : 0, b = size_t(kChains) * fast_slab_stride(C, with_s1);
  return a > b ? a : b;
}
// with_s1: the exact inverse of I + path L has its lower triangle, packed
// (solve_column_packed); false where the path's L is the gold L (its exact
// inverse is the gold inverse, read from there).
CHUNKINV_HD inline size_t fast_metrics_smem_doubles(int C, bool with_s1 = true) {
  return size_t(packed_size(C)) + (with_s1 ? size_t(packed_size(C)) : 0) + fast_scratch(C, with_s1) + kChains +
         (fast_stages_gold(C) ? 2 * size_t(packed_size(C)) : 0);
}
CHUNKINV_HD inline FastSmem fast_smem(double* sm, int C, bool with_s1 = true) {
  FastSmem m;
  m.inv = sm;                             // the path's INV as doubles, lower triangle packed by rows
  m.s1 = m.inv + packed_size(C);          // the exact inverse of I + path L, packed (with_s1)
  m.lp = m.terms = m.s1 + (with_s1 ? packed_size(C) : 0);  // the path's L packed (for the solve, with_s1), then the slabs' terms
  m.acc = m.lp + fast_scratch(C, with_s1);  // the sums, kChains
  m.gl = m.acc + kChains;                 // the gold L, packed (fast_stages_gold)
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
  // L's entry (r, c), c <= r; row r (row(r)[c] = l(r, c)); the inverse's
  // entry (i, j), j <= i, at e = i C + j (device) or k packed (shared).
  CHUNKINV_HD double l(int r, int c) const { return kStaged ? sgl[packed_at(r, c)] : gl[size_t(r) * C + c]; }
  CHUNKINV_HD const double* row(int r) const { return kStaged ? sgl + packed_at(r, 0) : gl + size_t(r) * C; }
  CHUNKINV_HD double inv(size_t e, int k) const { return kStaged ? sgi[k] : gi[e]; }
  // Entry (i, j), j <= i, k packed, of (I + gold L) X by the fast rules:
  // X's lower triangle packed in xp; x(k, j) any entry of X, read below
  // C = 7 only (the coefficient-based order reads above the diagonal).
  template <class Xf>
  CHUNKINV_HD double residual(int i, int j, int k, const double* xp, const Xf& x) const {
    if (3 * C < 20) return fp64::unit_plus_times_lower(C, i, j, 0, [&](int r, int c) { return l(r, c); }, x);
    return fp64::unit_plus_times_lower_walk(C, i, j, row(i), xp + packed_at(j, j), xp + k, fp64::PackedRowsStep{});
  }
};

// Whether the fast program solves for the exact inverse of I + path L:
// where the path's L is not the gold L and inv_method_only_rel_rmse is
// asked for.
CHUNKINV_HD inline bool fast_with_s1(const GoldRead& g, const PathOnDevice& p) {
  return !path_l_is_gold_l(g, p) && p.method_only;
}

// kStaged = fast_stages_gold(C). sm holds fast_metrics_smem_doubles(C,
// fast_with_s1(g, p)) doubles. The values p does not ask for (its
// l_rel_rmse, method_only, residual; gold_l_inv null) are NaN.
template <bool kStaged, class Block>
CHUNKINV_HD void metrics_fast_program(const Block& blk, const GoldRead& g, const PathOnDevice& p, double* out, long s,
                                      double* sm, BlockFlags* fl, int* slow) {
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
    if (t < kChains) m.acc[t] = 0.0;
  });
  blk.each([&](int t) {
    count_decays(blk, p, s, t, fl);
    stage_entries(blk, C, t, staged_l, read_gold_l ? gl : nullptr, gi, p.inv + at,
                  p.gold_l_inv ? p.gold_l_inv + at : nullptr, fl,
                  [&](int k, double l, double gle, double gie, uint16_t ib, uint16_t) {
                    if (with_s1) m.lp[k] = l;  // for the solve
                    m.inv[k] = fp64::fp16_value(ib);
                    if (kStaged) {
                      m.gl[k] = gle;
                      m.gi[k] = gie;
                    }
                  });
  });
  const bool l_ok = fl->l_bad == 0, inv_ok = fl->inv_bad == 0, method = l_ok && inv_ok && p.method_only;
  const bool gold_run_ok = p.gold_l_inv != nullptr && fl->sinv_bad == 0;
  if (!fast_rules_hold(fl->upper, l_ok, inv_ok, gold_run_ok)) {
    blk.each([&](int t) {
      if (t == 0) slow[s] = 1;
    });
    return;
  }
  blk.each([&](int t) {  // unit_lower_inverse(path L), as metrics_program
    if (t == 0) slow[s] = 0;
    if (!method || own_gold_l) return;
    for (int c = t; c < C; c += T) solve_column_packed(C, c, m.lp, m.s1);
  });

  // B = INV for the residual's product: entry (k, j), k >= j, from the packed
  // copy; below C = 7 (Eigen's coefficient-based product reads every k) the
  // entries above the diagonal come from the FP16 bits.
  auto inv_kj = [&](int k, int j) { return k >= j ? m.inv[packed_at(k, j)] : fp64::fp16_value(p.inv[at + size_t(k) * C + j]); };
  // No sum is read (the INV and the run on the gold L not finite, and no
  // l_rel_rmse asked for, as with --metrics inv_total_rel_rmse,inv_finite
  // at C = 64): no slab is formed.
  const bool sums = (l_ok && p.l_rel_rmse) || inv_ok || gold_run_ok;
  for (int k0 = 0; sums && k0 < P; k0 += S) {
    const int len = P - k0 < S ? P - k0 : S;
    blk.each([&](int t) {
      bool s2_bad = false;
      slab_entries(k0, len, T, t, [&](int k, int i, int j) {
        const size_t e = size_t(i) * C + j;
        const double gie = gold.inv(e, k), inv = m.inv[k];
        double* q = m.terms + (k - k0);
        double d;
        if (l_ok && p.l_rel_rmse) {  // l_rel_rmse
          const double gle = gold.l(i, j);
          d = path_l(e) - gle;
          q[0] = d * d;
          q[5 * SS] = gle * gle;
        }
        if (inv_ok) {  // inv_total_rel_rmse
          d = inv - gie;
          q[1 * SS] = d * d;
          q[6 * SS] = gie * gie;
        }
        if (method) {  // inv_method_only_rel_rmse
          const double x = own_gold_l ? gie : m.s1[k];
          d = inv - x;
          q[2 * SS] = d * d;
          q[7 * SS] = x * x;
        }
        if (gold_run_ok) {  // inv_gold_l_rel_rmse
          d = fp64::fp16_value(p.gold_l_inv[at + e]) - gie;
          q[3 * SS] = d * d;
          q[8 * SS] = gie * gie;
        }
        if (inv_ok && p.residual) {  // inverse_residual: (I + gold L) * INV against I
          const double r = gold.residual(i, j, k, m.inv, inv_kj);
          s2_bad |= !std::isfinite(r);
          const double y = i == j ? 1.0 : 0.0;
          d = r - y;
          q[4 * SS] = d * d;
          q[9 * SS] = y * y;
        }
      });
      if (s2_bad) blk.set(&fl->s2_bad);
    });
    blk.each([&](int t) {  // the sums, each in the host's order; the unused ones add what nobody reads
      if (t >= kChains) return;
      m.acc[t] = add_terms(m.acc[t], m.terms + size_t(t) * SS, len);
    });
  }

  blk.each([&](int t) {
    if (t != 0) return;
    double* o = out + size_t(s) * kNeumannMetricCount;
    auto value = [&](int q, bool finite) {
      fp64::RelRmse r;
      r.err = m.acc[q];
      r.ref = m.acc[5 + q];
      r.finite = finite;
      return r.value(C * C);
    };
    write_counts_and_diagnostics(o, p, s, fl, l_ok, inv_ok);
    if (!read_l) o[id::kLFinite] = NAN;  // l_finite, not asked for
    o[id::kLRelRmse] = !p.l_rel_rmse ? NAN : l_ok ? value(0, true) : INFINITY;
    o[id::kInvTotalRelRmse] = inv_ok ? value(1, true) : INFINITY;
    o[id::kInvMethodOnlyRelRmse] = !p.method_only ? NAN : method ? value(2, true) : INFINITY;
    o[id::kInvGoldLRelRmse] = p.gold_l_inv ? value(3, gold_run_ok) : NAN;
    o[id::kInverseResidual] = !p.residual ? NAN : inv_ok ? value(4, fl->s2_bad == 0) : INFINITY;
  });
}

// ---- The kernel path's entry and the gold path's at once ------------------
//
// evaluate(neumann) of two entries of one sample by the fast program's
// rules, in one block: the kernel path's (pk: its L and INV, and the run on
// the gold L) and the gold path's (pg: the gold L, and as INV that same run
// on the gold L, pg.inv == pg.gold_l_inv == pk.gold_l_inv). Their sums share
// terms, so the block forms 9 sums instead of 20, each in the host's order:
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
  double *inv, *run, *s1, *lp, *terms, *acc, *gl, *gi;
};
CHUNKINV_HD inline size_t pair_scratch(int C) {
  const size_t a = size_t(packed_size(C)), b = size_t(kPairSums) * slab_stride(C);
  return a > b ? a : b;
}
CHUNKINV_HD inline size_t pair_metrics_smem_doubles(int C) {
  return 3 * size_t(packed_size(C)) + pair_scratch(C) + kPairSums +
         (fast_stages_gold(C) ? 2 * size_t(packed_size(C)) : 0);
}
CHUNKINV_HD inline PairSmem pair_smem(double* sm, int C) {
  PairSmem m;
  m.inv = sm;                             // the kernel's INV as doubles, packed
  m.run = m.inv + packed_size(C);         // the run on the gold L as doubles, packed
  m.s1 = m.run + packed_size(C);          // the exact inverse of I + kernel L, packed
  m.lp = m.terms = m.s1 + packed_size(C);  // the kernel's L packed (for the solve), then the slabs' terms
  m.acc = m.lp + pair_scratch(C);         // the sums, kPairSums
  m.gl = m.acc + kPairSums;               // the gold L, packed (fast_stages_gold)
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
    if (t < kPairSums) m.acc[t] = 0.0;
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

  // B for the residuals: the packed copies; below C = 7 the entries above the diagonal from the FP16 bits.
  auto inv_kj = [&](int k, int j) { return k >= j ? m.inv[packed_at(k, j)] : fp64::fp16_value(pk.inv[at + size_t(k) * C + j]); };
  auto run_kj = [&](int k, int j) { return k >= j ? m.run[packed_at(k, j)] : fp64::fp16_value(pg.inv[at + size_t(k) * C + j]); };
  const bool k_res = k_fast && inv_ok, g_res = g_fast && run_ok;
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
          const double r = gold.residual(i, j, k, m.inv, inv_kj);
          if (!std::isfinite(r)) s2_bad |= kS2Kernel;
          d = r - y;
          q[kKResErr * SS] = d * d;
        }
        if (g_res) {  // (I + gold L) * run against I
          const double r = gold.residual(i, j, k, m.run, run_kj);
          if (!std::isfinite(r)) s2_bad |= kS2Gold;
          d = r - y;
          q[kGResErr * SS] = d * d;
        }
      });
      if (s2_bad) blk.set_bits(&fl->s2_bad, s2_bad);
    });
    blk.each([&](int t) {  // the sums, each in the host's order; the unused ones add what nobody reads
      if (t >= kPairSums) return;
      m.acc[t] = add_terms(m.acc[t], m.terms + size_t(t) * SS, len);
    });
  }

  blk.each([&](int t) {
    auto value = [&](double err, double ref, bool finite) {
      fp64::RelRmse r;
      r.err = err;
      r.ref = ref;
      r.finite = finite;
      return r.value(C * C);
    };
    const double ones = double(C);  // the residuals' reference sums
    if (t == 0 && k_fast) {
      double* o = out_k + size_t(s) * kNeumannMetricCount;
      write_counts_and_diagnostics(o, pk, s, fl, l_ok, inv_ok);
      o[id::kLRelRmse] = l_ok ? value(m.acc[kKlErr], m.acc[kGlRef], true) : INFINITY;
      o[id::kInvTotalRelRmse] = inv_ok ? value(m.acc[kKinvErr], m.acc[kGiRef], true) : INFINITY;
      o[id::kInvMethodOnlyRelRmse] = method ? value(m.acc[kMethodErr], m.acc[kS1Ref], true) : INFINITY;
      o[id::kInvGoldLRelRmse] = value(m.acc[kRunErr], m.acc[kGiRef], run_ok);
      o[id::kInverseResidual] = inv_ok ? value(m.acc[kKResErr], ones, (fl->s2_bad & kS2Kernel) == 0) : INFINITY;
    }
    if (t == (T > 32 ? 32 : 1) && g_fast) {  // on another warp where there is one
      double* o = out_g + size_t(s) * kNeumannMetricCount;
      BlockFlags none{};  // the gold path forms no decays
      write_counts_and_diagnostics(o, pg, s, &none, gl_ok, run_ok);
      o[id::kLRelRmse] = gl_ok ? value(0.0, m.acc[kGlRef], true) : INFINITY;
      o[id::kInvTotalRelRmse] = run_ok ? value(m.acc[kRunErr], m.acc[kGiRef], true) : INFINITY;
      o[id::kInvMethodOnlyRelRmse] = gl_ok && run_ok ? value(m.acc[kRunErr], m.acc[kGiRef], true) : INFINITY;
      o[id::kInvGoldLRelRmse] = value(m.acc[kRunErr], m.acc[kGiRef], run_ok);
      o[id::kInverseResidual] = run_ok ? value(m.acc[kGResErr], ones, (fl->s2_bad & kS2Gold) == 0) : INFINITY;
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
  double* const acc = terms + 2 * SS;    // 2
  const double* gl = g.gold_l + at;

  blk.each([&](int t) {
    if (t == 0) {
      fl->inv_bad = fl->upper = fl->s2_bad = 0;
      fl->max_bits = 0;
    }
    if (t < 2) acc[t] = 0.0;
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
  if (fl->inv_bad == 0) {
    auto x_kj = [&](int k, int j) { return k >= j ? X[packed_at(k, j)] : g.gold_inv[at + size_t(k) * C + j]; };
    residual_sums(
        blk, C, [&](int r, int c) { return gl[size_t(r) * C + c]; }, x_kj,
        [&](int i, int j) {
          return fp64::unit_plus_times_lower_walk(C, i, j, gl + size_t(i) * C, X + packed_at(j, j), X + packed_at(i, j),
                                                  fp64::PackedRowsStep{});
        },
        terms, acc, fl);
  }
  blk.each([&](int t) {
    if (t != 0) return;
    slow[s] = 0;
    write_reference_fast(out + size_t(s) * kReferenceMetricCount, C, fl, acc);
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
