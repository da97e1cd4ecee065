// The kernel path, v2: the arithmetic of v1 (kernel.cu) instruction for
// instruction, with fewer instructions around it and more tasks an SM. v1
// measured 0.80 ms for 65,536 samples at C = 16 (floor: 0.097 ms) and was
// issue-bound: keys read 4 bytes at a time in a loop that waited on each
// load, and runtime divisions by the padded chunk in every element loop. v2
// makes the padded chunk a template parameter (the Neumann loops unroll,
// indices become shifts), copies keys 16 bytes at a time (cp.async),
// zeroes shared memory 16 bytes at a time, and writes outputs row by row
// without divisions.
//
// A task (a whole sample, or a run on the gold L on fp16(gold L)) takes CP / 16
// warps, warp w owning the output rows 16w..16w+15 of every product, so that
// at C = 64 a task's chains of mma run on four warps side by side instead
// of one; a block holds one such task, whose warps meet at its barrier. A
// warp's rows of INV stay in registers from one product to the next, as A
// fragments (an mma's outputs are laid out as the next one's A operand);
// each new P goes to shared memory, every warp's B operand, and INV's
// update and the next square read each B fragment once between them. The
// keys are dead once L is formed, so they share their space with the next
// P (27.3 KB a task at C = 64 with per-token gates, whose raw keys are
// scaled in registers, 44.7 with per-channel ones, 19.1 without keys).
// Fragments are read with ldmatrix (one instruction for four 8 x 8 blocks;
// .trans for the Neumann's B operand, which v1 reads as four 16-bit loads).
// Each output tile still starts from a zero C operand and chains its
// k-blocks in increasing order, so no value changes:
// tests/paths/test_gpu_paths.cpp checks v2 against v1 and the emulated
// path bit for bit. Where the path's L has a non-finite entry, INV is all
// NaN, and above CP = 16 v2 writes it so without the products (neumann,
// with the proof).
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "core/error.hpp"
#include "gpu/check.cuh"
#include "paths/kernel/kernel_launch.cuh"
#include "gpu/ptx.cuh"
#include "gpu/tiles.cuh"

namespace chunkinv::gpu {
namespace {

using namespace tiles;

constexpr uint16_t kF16One = 0x3C00;
constexpr uint16_t kF16NaN = 0x7FFF;  // the NaN an mma writes
// Whether a non-finite L makes INV NaN without the products (neumann). Not
// at CP = 16, whose launch is bound by its instructions: there the check
// cost 3.6% on finite tasks (run 106: 2.01 ns a sample against 1.94).
template <int CP>
constexpr bool kNanRule = CP > 16;
constexpr int kThreadsMax = 256;  // CP = 16: warps (tasks) of a block

// Registers a thread, at most, so that registers rather than shared memory
// (per-token gates, d = 128) set how many whole samples an SM holds. 96: at
// C = 64 five tasks of 27.3 KB (unbounded, run 96's build took 125: four),
// at 48 seven of 18.9 KB, at 16 (where ptxas takes 80) 25 of 5.3 KB; at
// C = 32, 72 (no spill), 14 tasks of 11.6 KB where 96 allowed ten. Runs on the
// gold L, without keys, are held by registers alone.
template <int CP>
constexpr int kRegistersMax = CP == 32 ? 72 : 96;

// A task's shared memory: G2, the decays, fp16(beta) and the warps' power
// maxima, then L/P (mat[0]), then either the keys or, once L is formed, the
// next P (mat[1]) in the same bytes. The keys are one matrix, the raw BF16
// keys, for per-token gates (their decays scale the fragments in
// registers), or two, kd and ki scaled in place, for per-channel gates.
template <int CP>
struct Layout {
  static constexpr int TW = CP / 16;  // warps a task
  static constexpr int MS = CP + 8;
  static constexpr size_t kMat = size_t(CP) * MS * 2;
  static constexpr size_t kSmall = (size_t(CP) * 4 + 3 * size_t(CP) * 2 + TW * 4 + 15) / 16 * 16;
  static size_t task_bytes(int dim, int key_mats) {
    return kSmall + kMat + std::max(size_t(key_mats) * CP * key_stride(dim) * 2, kMat);
  }
};

struct TaskSmem {
  uint16_t* mat[2];  // P and the next P
  uint16_t *kd, *ki;  // per-token gates: the raw keys in kd, ki unused
  uint16_t *decay, *inv, *beta;
  float* g2;
  float* wmax;  // one power maximum a warp of the task
};

template <int CP>
__device__ __forceinline__ TaskSmem carve_task(char* base, int dim) {
  using Lt = Layout<CP>;
  TaskSmem s;
  s.g2 = reinterpret_cast<float*>(base);
  s.decay = reinterpret_cast<uint16_t*>(base + CP * 4);
  s.inv = s.decay + CP;
  s.beta = s.inv + CP;
  s.wmax = reinterpret_cast<float*>(s.beta + CP);
  char* m = base + Lt::kSmall;
  s.mat[0] = reinterpret_cast<uint16_t*>(m);
  s.mat[1] = reinterpret_cast<uint16_t*>(m + Lt::kMat);
  s.kd = reinterpret_cast<uint16_t*>(m + Lt::kMat);
  s.ki = s.kd + size_t(CP) * key_stride(dim);
  return s;
}

// The task's warps meet: the block's barrier for TW > 1 (a block holds one
// task there), the warp's own for one. Named barriers, one a task of a
// block, cost more than they saved: an id held in a register makes ptxas
// reserve all 16 of them, which allows four blocks an SM (run 96's ncu: 8
// warps an SM at C = 32, where shared memory allows 20).
template <int TW>
__device__ __forceinline__ void task_sync() {
  if constexpr (TW == 1) {
    __syncwarp();
  } else {
    __syncthreads();
  }
}

// task_sync, and whether `pred` holds for any thread of the task.
template <int TW>
__device__ __forceinline__ bool task_any(bool pred) {
  if constexpr (TW == 1) {
    __syncwarp();
    return __any_sync(0xffffffffu, pred);
  } else {
    return __syncthreads_or(pred);
  }
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// Four 8 x 8 blocks of 16-bit values; lane l names row l & 7 of block l >> 3.
__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], const uint16_t* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], const uint16_t* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
// The A fragment of the 16 x 16 block at (r0, c0) of a row-major matrix:
// load_a's four registers (blocks: rows +0/+8, then columns +8).
__device__ __forceinline__ void ldm_a(uint32_t a[4], const uint16_t* m, int stride, int r0, int c0, int lane) {
  ldmatrix_x4(a, m + (r0 + (lane & 15)) * stride + c0 + (lane >> 4) * 8);
}
// B fragments of two 16 x 8 blocks, columns n0..n0+7 (b[0], b[1]) and
// n0+8..n0+15 (b[2], b[3]), where B[k][n] = m[k0 + k][n0 + n]: load_b's.
__device__ __forceinline__ void ldm_b2(uint32_t b[4], const uint16_t* m, int stride, int k0, int n0, int lane) {
  ldmatrix_x4_trans(b, m + (k0 + (lane & 15)) * stride + n0 + (lane >> 4) * 8);
}
// The same where B[k][n] = m[n0 + n][k0 + k] (rows of m are columns of B): load_b_rows'.
__device__ __forceinline__ void ldm_b2_rows(uint32_t b[4], const uint16_t* m, int stride, int k0, int n0,
                                            int lane) {
  ldmatrix_x4(b, m + (n0 + (lane & 7) + ((lane >> 4) << 3)) * stride + k0 + ((lane >> 3) & 1) * 8);
}

// Rows r0, r0 + step, ... (before r1) of the leading C x C block; where C
// is the padded chunk itself, 16 bytes a lane at a time.
template <int CP>
__device__ __forceinline__ void store_rows(uint16_t* out, const uint16_t* m, int chunk, int r0, int r1, int step,
                                           int lane) {
  constexpr int MS = CP + 8, Q = CP / 8;  // 16-byte pieces a row
  if (chunk == CP) {
    const int rows = (r1 - r0 + step - 1) / step;
#pragma unroll 1
    for (int e = lane; e < rows * Q; e += 32) {
      const int r = r0 + (e / Q) * step, c = (e % Q) * 8;
      *reinterpret_cast<uint4*>(out + r * CP + c) = *reinterpret_cast<const uint4*>(m + r * MS + c);
    }
    return;
  }
  for (int r = r0; r < r1; r += step)
    for (int c = lane; c < chunk; c += 32) out[r * chunk + c] = m[r * MS + c];
}

// The warp's 16 rows of a CP x CP FP16 matrix as A fragments, one a k-block:
// f[kb] holds (g, 16kb + 2t..), (g + 8, 16kb + 2t..), (g, 16kb + 8 + 2t..),
// (g + 8, 16kb + 8 + 2t..), which is also how an mma's two 16 x 8 outputs
// hold the columns 16kb..16kb+15 of the same rows: a product's result is
// the next product's A operand without passing through shared memory.
template <int CP>
struct RowFrags {
  uint32_t f[CP / 16][4];
};

// The largest magnitude among a register's two entries and v (the lane's
// share; the task's maximum is formed at the end, max being exact in any
// order).
__device__ __forceinline__ float pair_max(uint32_t r, float v) {
  return fmaxf(v, fmaxf(magnitude(uint16_t(r & 0xFFFF)), magnitude(uint16_t(r >> 16))));
}

// Fragment register i of k-block kb to row mi + g + 8(i & 1), columns
// 16kb + 8(i >> 1) + 2t.. of m (shared memory).
template <int CP>
__device__ __forceinline__ void store_frag(uint16_t* m, uint32_t v, int kb, int i, int mi, int lane) {
  constexpr int MS = CP + 8;
  st32(m + (mi + (lane >> 2) + 8 * (i & 1)) * MS + 16 * kb + 8 * (i >> 1) + 2 * (lane & 3), v);
}

// One pass over B = P (CP x CP in shared memory) for the warp's rows mi..:
// where `update`, INV = INV + INV * P; where `square`, the warp's rows of
// P * P (A: its rows of P) to Pn, their magnitudes into pmax. Each 16 x 8
// tile starts from a zero C operand and chains its k-blocks in increasing
// order, INV's sum rounded once (add.rn.f16x2, INV's entry first): the
// arithmetic of one product at a time, the two reading each B fragment once.
template <int CP, bool update, bool square>
__device__ __forceinline__ void neumann_pass(const uint16_t* P, uint16_t* Pn, RowFrags<CP>& inv, float& pmax, int mi,
                                             int lane) {
  constexpr int MS = CP + 8, KB = CP / 16;
  RowFrags<CP> inv_next, pa;
  if constexpr (square) {
#pragma unroll
    for (int kb = 0; kb < KB; ++kb) ldm_a(pa.f[kb], P, MS, mi, 16 * kb, lane);
  }
#pragma unroll
  for (int nb = 0; nb < KB; ++nb) {
    uint32_t ai[2][2] = {{0u, 0u}, {0u, 0u}}, ap[2][2] = {{0u, 0u}, {0u, 0u}};
#pragma unroll
    for (int kb = 0; kb < KB; ++kb) {
      uint32_t fb[4];
      ldm_b2(fb, P, MS, 16 * kb, 16 * nb, lane);
      if constexpr (update) {
        ptx::mma_f16_f16(ai[0], inv.f[kb], fb, ai[0]);
        ptx::mma_f16_f16(ai[1], inv.f[kb], fb + 2, ai[1]);
      }
      if constexpr (square) {
        ptx::mma_f16_f16(ap[0], pa.f[kb], fb, ap[0]);
        ptx::mma_f16_f16(ap[1], pa.f[kb], fb + 2, ap[1]);
      }
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if constexpr (update) inv_next.f[nb][i] = ptx::add_rn_f16x2(inv.f[nb][i], ai[i >> 1][i & 1]);
      if constexpr (square) {
        store_frag<CP>(Pn, ap[i >> 1][i & 1], nb, i, mi, lane);
        pmax = pair_max(ap[i >> 1][i & 1], pmax);
      }
    }
  }
  if constexpr (update) inv = inv_next;
}

// n FP16 entries from out on, every one v, by the lanes of a warp (16 bytes
// a store where the address allows).
__device__ __forceinline__ void fill_f16(uint16_t* out, size_t n, uint16_t v, int lane) {
  const size_t to_16 = ((16 - (reinterpret_cast<uintptr_t>(out) & 15)) & 15) / 2;
  const size_t head = to_16 < n ? to_16 : n;
  for (size_t e = lane; e < head; e += 32) out[e] = v;
  const size_t quads = (n - head) / 8;
  const uint32_t vv = ptx::pack2(v, v);
  uint4* q = reinterpret_cast<uint4*>(out + head);
  for (size_t e = lane; e < quads; e += 32) q[e] = make_uint4(vv, vv, vv, vv);
  for (size_t e = head + 8 * quads + lane; e < n; e += 32) out[e] = v;
}

// Step 6 on the FP16 strict-lower L in s.mat[0]: INV = I - P, then while
// 2p < C, P = P * P and INV = INV + INV * P. Warp w of the task forms rows
// 16w..16w+15 of every product. Its rows of INV stay in registers (no other
// warp reads them); each new P goes to shared memory, every warp's B
// operand; and the square of P for the next step shares its pass over B
// with INV's update in this one. The task's warps meet after each new P
// is written: no warp reads a P being formed or overwrites one still read.
//
// `l_nonfinite`: L, zero on and above its diagonal, has a non-finite entry.
// Then, for C > 4, every entry of INV is NaN whatever the others are, and
// INV is written so without the products (unless the powers are kept).
// Proof, with x the non-finite entry at (a, b), a > b, and every product
// taken over every k as here (a NaN term, inf * 0 or inf - inf gives NaN,
// which every later term of the chain and every add carry): L^2's row a
// is NaN from column b on (the term x * L_bj, L_bj = 0 for j >= b) and its
// column b NaN down to row a (L_ia * x, L_ia = 0 for i <= a). So L^4's row
// 0 is NaN (the term L^2_0b * L^2_bj), and so is every entry of INV * L^4
// (the term INV_i0 * L^4_0j) and of INV after its update with L^4, which
// C > 4 brings about; every later update keeps it NaN. The highest power
// depends on C alone, and the power maximum is inf (x is among L's
// entries). GpuKernelPath.V2NonFiniteLExactly holds this to kernel v1,
// which forms every product, bit for bit.
template <int CP>
__device__ __forceinline__ void neumann(const TaskSmem& s, int chunk, int tw, int lane, bool l_nonfinite,
                                        uint16_t* inv_out, int* highest_power, float* power_max,
                                        uint16_t* powers_out) {
  constexpr int TW = CP / 16, MS = CP + 8;
  const int mi = 16 * tw, g = lane >> 2, t = lane & 3;
  const int r_end = min(chunk, mi + 16);  // the warp's rows of the C x C block
  if (kNanRule<CP> && l_nonfinite && chunk > 4 && !powers_out) {
    if (r_end > mi) fill_f16(inv_out + size_t(mi) * chunk, size_t(r_end - mi) * chunk, kF16NaN, lane);
    if (tw == 0 && lane == 0) {
      int p = 1;
      while (2 * p < chunk) p *= 2;
      *highest_power = p;
      *power_max = INFINITY;
    }
    return;
  }
  uint16_t* P = s.mat[0];
  uint16_t* Pn = s.mat[1];
  RowFrags<CP> inv;
  float pmax = 0.0f;
#pragma unroll
  for (int kb = 0; kb < CP / 16; ++kb) {
    uint32_t pa[4];
    ldm_a(pa, P, MS, mi, 16 * kb, lane);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = mi + g + 8 * (i & 1), c = 16 * kb + 8 * (i >> 1) + 2 * t;
      inv.f[kb][i] = ptx::pack2(ptx::sub_rn_f16(r == c ? kF16One : uint16_t(0), uint16_t(pa[i] & 0xFFFF)),
                                ptx::sub_rn_f16(r == c + 1 ? kF16One : uint16_t(0), uint16_t(pa[i] >> 16)));
      pmax = pair_max(pa[i], pmax);
    }
  }
  const size_t csq = size_t(chunk) * chunk;
  if (powers_out) store_rows<CP>(powers_out, P, chunk, mi, r_end, 1, lane);
  int p = 1, q = 0;
  // After each square: the warps meet, and the new P becomes P.
  auto squared = [&] {
    task_sync<TW>();
    uint16_t* tmp = P; P = Pn; Pn = tmp;
    p *= 2;
    ++q;
    if (powers_out) store_rows<CP>(powers_out + q * csq, P, chunk, mi, r_end, 1, lane);
  };
  if (2 * p < chunk) {
    neumann_pass<CP, false, true>(P, Pn, inv, pmax, mi, lane);
    squared();
    while (2 * p < chunk) {
      neumann_pass<CP, true, true>(P, Pn, inv, pmax, mi, lane);
      squared();
    }
    neumann_pass<CP, true, false>(P, Pn, inv, pmax, mi, lane);
  }
  // INV's rows to global memory through the warp's rows of Pn, which no
  // warp reads after the last meeting.
#pragma unroll
  for (int kb = 0; kb < CP / 16; ++kb)
#pragma unroll
    for (int i = 0; i < 4; ++i) store_frag<CP>(Pn, inv.f[kb][i], kb, i, mi, lane);
  __syncwarp();
  store_rows<CP>(inv_out, Pn, chunk, mi, r_end, 1, lane);
  pmax = warp_max(pmax);
  if constexpr (TW > 1) {
    if (lane == 0) s.wmax[tw] = pmax;
    task_sync<TW>();
#pragma unroll
    for (int w = 0; w < TW; ++w) pmax = fmaxf(pmax, s.wmax[w]);
  }
  if (tw == 0 && lane == 0) {
    *highest_power = p;
    *power_max = pmax;
  }
}

// Steps 4-5 for rows mi..mi+15 of L: fp16(kd ki^T) through mma BF16 ->
// FP32, each tile's k-blocks chained in order over d; the strict lower
// part; L_ij = fp16(L_ij * fp16(beta_i)). Tiles wholly above the diagonal
// are discarded anyway, so they are not formed. Where `raw`, s.kd holds the
// unscaled keys and each fragment register (two keys of one row) is scaled
// as it is loaded, by its row's decay (A: kd) or inverse decay (B: ki):
// the same product, bf16(k * f) rounded once, as scaling the keys in place.
// Returns whether an entry the thread wrote is non-finite.
template <int CP, bool raw>
__device__ __forceinline__ bool form_l_rows(const TaskSmem& s, int chunk, int dim, int mi, int lane) {
  constexpr int MS = CP + 8, NJ = CP / 8;
  const int ks = key_stride(dim), g = lane >> 2, t = lane & 3;
  const uint16_t* kb_rows = raw ? s.kd : s.ki;
  // The scale factors, two of a row: A register i holds row mi + g + 8(i & 1),
  // B register i of column block nj row nj + g + 8(i >> 1) (ldm_a, ldm_b2_rows).
  uint32_t fa_scale[2], fb_scale[CP / 16][2];
  if constexpr (raw) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint16_t fd = s.decay[mi + g + 8 * h];
      fa_scale[h] = ptx::pack2(fd, fd);
#pragma unroll
      for (int b = 0; b < CP / 16; ++b) {
        const uint16_t fi = s.inv[16 * b + g + 8 * h];
        fb_scale[b][h] = ptx::pack2(fi, fi);
      }
    }
  }
  float acc[NJ][4];
#pragma unroll
  for (int j = 0; j < NJ; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
  uint32_t exp_bits = 0;  // 1 once an entry the thread writes has every exponent bit set
  for (int kb = 0; kb < dim; kb += 16) {
    uint32_t fa[4];
    ldm_a(fa, s.kd, ks, mi, kb, lane);
    if constexpr (raw) {
#pragma unroll
      for (int i = 0; i < 4; ++i) fa[i] = ptx::mul_rn_bf16x2(fa[i], fa_scale[i & 1]);
    }
#pragma unroll
    for (int nj = 0; nj < CP; nj += 16) {
      if (nj < mi + 16) {
        uint32_t fb[4];
        ldm_b2_rows(fb, kb_rows, ks, kb, nj, lane);
        if constexpr (raw) {
#pragma unroll
          for (int i = 0; i < 4; ++i) fb[i] = ptx::mul_rn_bf16x2(fb[i], fb_scale[nj / 16][i >> 1]);
        }
        ptx::mma_bf16_f32(acc[nj / 8], fa, fb, acc[nj / 8]);
        ptx::mma_bf16_f32(acc[nj / 8 + 1], fa, fb + 2, acc[nj / 8 + 1]);
      }
    }
  }
#pragma unroll
  for (int nj = 0; nj < CP; nj += 8) {
    if (nj < mi + 16) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = mi + g + (e >= 2 ? 8 : 0), c = nj + 2 * t + (e & 1);
        uint16_t h = 0;
        if (r < chunk && c < r) h = ptx::mul_rn_f16(ptx::cvt_rn_f16(acc[nj / 8][e]), s.beta[r]);
        s.mat[0][r * MS + c] = h;
        if constexpr (kNanRule<CP>) exp_bits |= (h & 0x7C00u) == 0x7C00u;
      }
    }
  }
  return exp_bits != 0;
}

template <int CP>
__global__ void __maxnreg__(kRegistersMax<CP>) kernel_path_v2(KernelArgs args, size_t task_smem) {
  extern __shared__ __align__(16) char smem[];
  constexpr int MS = CP + 8, TW = CP / 16, NT = 32 * TW;
  const int lane = threadIdx.x & 31;
  const int slot = threadIdx.x / NT;           // the task's place in the block
  const int tw = (threadIdx.x >> 5) % TW;      // the warp's place in the task
  const int th = tw * 32 + lane;               // the thread's place in the task
  const long task = args.task_first + long(blockIdx.x) * (blockDim.x / NT) + slot;
  const int tasks = args.task_end ? args.task_end : args.gold_l ? 2 * args.n : args.n;
  if (task >= tasks) return;  // the task's warps alike
  const int C = args.chunk, d = args.dim, ks = key_stride(d);
  const bool full = task < args.n;
  const long sample = full ? task : task - args.n;
  const TaskSmem s = carve_task<CP>(smem + size_t(slot) * task_smem, d);
  const size_t csq = size_t(C) * C;
  uint16_t* powers = args.powers ? args.powers + size_t(task) * args.npow * csq : nullptr;

  {  // L starts at +0, padding included
    uint4* z = reinterpret_cast<uint4*>(s.mat[0]);
#pragma unroll
    for (int e = th; e < CP * MS / 8; e += NT) z[e] = make_uint4(0, 0, 0, 0);
  }
  if (!full) {
    task_sync<TW>();
    const uint16_t* gl = args.gold_l + sample * csq;
    for (int r = tw; r < C; r += TW)
      for (int c = lane; c < C; c += 32) s.mat[0][r * MS + c] = gl[r * C + c];
    task_sync<TW>();
    // The NaN rule is not looked for on fp16(gold L): it is finite wherever
    // |k_i| |k_j| < 65504 (|L_ij| <= beta_i |k_i| |k_j| for i > j, the gates
    // being <= 0), so for every unit key, and where it is not, the products
    // are formed as ever. Looking (a vote at the barrier, a test an entry, a
    // check of the zeros of an L from outside) made gold + kernel's launches
    // 7% slower at C = 32 (run 107: 12.02, 12.23 ns a sample, not 11.32, 11.26).
    const bool l_nonfinite = false;
    neumann<CP>(s, C, tw, lane, l_nonfinite, args.gold_l_inv + sample * csq, args.highest_power + task,
                args.power_max + task, powers);
    return;
  }

  const bool per_channel = args.gate_width != 1;
  if (per_channel) {
    per_channel_scaled_keys(args, sample, s, CP, ks, th, NT);
  } else {
    // The raw keys, 16 bytes a copy, straight to shared memory; they do not
    // depend on the decays, so they arrive while G2 is summed. Padded rows
    // are zero.
    const uint16_t* keys = args.keys + sample * C * size_t(d);
    const int q8 = d / 8;
    for (int e = th; e < C * q8; e += NT) {
      const int r = e / q8;
      ptx::cp_async16(s.kd + r * ks + (e - r * q8) * 8, keys + size_t(e) * 8);
    }
    for (int e = th; e < (CP - C) * ks / 8; e += NT)
      reinterpret_cast<uint4*>(s.kd + C * ks)[e] = make_uint4(0, 0, 0, 0);
    // Steps 1-2, as v1: one thread sums G2 in row order.
    token_decays(args, sample, s, CP, th, NT, [&] { task_sync<TW>(); });
    ptx::cp_async_wait_all();
  }
  task_sync<TW>();

  // Step 3 (per-token gates: in form_l_rows' registers), then 4-5.
  const bool nonfinite = per_channel ? form_l_rows<CP, false>(s, C, d, 16 * tw, lane)
                                     : form_l_rows<CP, true>(s, C, d, 16 * tw, lane);
  // Every row of L is written, and the keys (whose bytes the next P takes)
  // are read by every warp, before any warp goes on.
  bool l_nonfinite = false;
  if constexpr (kNanRule<CP>) {
    l_nonfinite = task_any<TW>(nonfinite);
  } else {
    task_sync<TW>();
  }
  store_rows<CP>(args.l + sample * csq, s.mat[0], C, tw, C, TW, lane);
  if (args.l_only) return;
  neumann<CP>(s, C, tw, lane, l_nonfinite, args.inv + sample * csq, args.highest_power + task,
              args.power_max + task, powers);
}

template <int CP>
void launch(const KernelArgs& a, int tasks, cudaStream_t st) {
  const int optin = detail::allow_optin_smem(reinterpret_cast<const void*>(kernel_path_v2<CP>));
  // Keys in shared memory only where the launch holds whole samples: the
  // raw keys for per-token gates, kd and ki for per-channel ones.
  const int key_mats = a.task_first < a.n ? (a.gate_width != 1 ? 2 : 1) : 0;
  const size_t task_smem = Layout<CP>::task_bytes(a.dim, key_mats);
  if (task_smem > size_t(optin))
    throw UsageError("path kernel: chunk " + std::to_string(CP) + " x dim " + std::to_string(a.dim) +
                     " needs more shared memory than one block has");
  // One task a block where a task has several warps (they meet at the
  // block's barrier); at CP = 16, as many one-warp tasks as fill the SM.
  const int per_block =
      Layout<CP>::TW > 1 ? 1
                         : detail::units_per_block(task_smem, 1, kThreadsMax / 32, optin,
                                                   reinterpret_cast<const void*>(kernel_path_v2<CP>));
  const int blocks = (tasks + per_block - 1) / per_block;
  kernel_path_v2<CP><<<blocks, 32 * Layout<CP>::TW * per_block, per_block * task_smem, st>>>(a, task_smem);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_kernel_path_v2(const KernelArgs& a, int tasks, cudaStream_t st) {
  switch (a.cp) {
    case 16: return launch<16>(a, tasks, st);
    case 32: return launch<32>(a, tasks, st);
    case 48: return launch<48>(a, tasks, st);
    case 64: return launch<64>(a, tasks, st);
  }
  throw std::runtime_error("kernel v2: padded chunk must be 16, 32, 48 or 64");
}

}  // namespace chunkinv::gpu
