// Method fla_solve_tril on the `kernel` path: its GPU form (methods/gpu_form.hpp).
// Its reference is the method's CPU form (methods/fla_solve_tril.cpp); the
// arithmetic here is that form's, operation for operation, so the two agree
// bit for bit (tests/paths/test_gpu_inverses.cpp).
//
// One warp runs one task; the warp's shared memory holds the lower 16 x 16
// blocks of A = fp32(L) (zero-padded to n = 16, 32 or 64), the lower blocks
// of the inverse, and one 16 x 16 scratch block.
// 1. Diagonal blocks: column j of a block's substitution depends only on
//    column j (X[i][j] reads X[k][j] and row i of A), so a lane owns whole
//    columns, kept in registers: per row i = 2..15 the partial products and
//    the tree of the CPU form (one warp's for n <= 32: q_k = fma(a[k],
//    X[k][j], fp32(a[k+8] X[k+8][j])), ((q0+q4)+(q2+q6))+((q1+q5)+(q3+q7));
//    two warps' for n = 64: v_k = fma(a[k], X[k][j], fp32(a[k+4] X[k+4][j]))
//    for k = 0..3, 8..11, ((v0+v2)+(v1+v3))+((v8+v10)+(v9+v11))), then
//    a[j] + S. Rows not yet updated are read with their initial value, as there.
// 2. Merge: each 16 x 16 product is 256 FP32 FMA chains (k ascending from
//    +0); lane l computes rows l/4 and l/4 + 8, columns 4(l%4)..4(l%4)+3.
//    A sum of products is one chain (the next product continues the
//    accumulators), and a negated product is stored as 0 - x, as Triton
//    compiles fla's source. The products of one formula are done in the CPU
//    form's order, __syncwarp() between dependent ones. precision=tf32 rounds
//    every operand to TF32 (nearest even, in integer arithmetic, exactly as
//    prec::operand) as it is loaded.
// Diagnostics: max |.| over the diagonal inverses, and over those, every
// product and sum and the output (+inf for any non-finite value).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>

#include "gpu/check.cuh"
#include "methods/fla_solve_tril/params.hpp"
#include "methods/gpu_form.hpp"

namespace chunkinv::gpu {
namespace {

constexpr int kB = 16;          // the diagonal block
constexpr int kS = 20;          // row stride of a stored block (floats): rows 16 B aligned, r * kS spreads banks
constexpr int kBlk = kB * kS;   // one stored block (floats)
constexpr int kSmemBudget = 48 * 1024;
constexpr int kLoads = 8;       // global loads in flight per lane

// Lower block (i, j), i >= j, in the packed block order.
__device__ __forceinline__ int blk(int i, int j) { return i * (i + 1) / 2 + j; }

// |x|, +inf for a non-finite x (prec::max_abs).
__device__ __forceinline__ float mag(float x) { return isfinite(x) ? fabsf(x) : INFINITY; }

// An FP32 value rounded to TF32, nearest even (chunkinv::round_to with
// prec::kTF32): 10 fraction bits, subnormals on the quantum 2^-136, beyond
// 0x1.FFCp127 to inf; NaN unchanged.
__device__ __forceinline__ float tf32_rn(float x) {
  uint32_t u = __float_as_uint(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return x;
  u += 0xFFFu + ((u >> 13) & 1u);
  return __uint_as_float(u & ~0x1FFFu);
}

template <bool kTf32>
__device__ __forceinline__ float operand(float x) {
  if constexpr (kTf32) return tf32_rn(x);
  else return x;
}

// d += X Y for 16 x 16 blocks, the chain going on from d (prec::matmul:
// acc = fmaf(x[r][k], y[k][c], acc), k ascending). d[m] is (r, c + m),
// d[4 + m] is (r + 8, c + m), with r = lane / 4, c = 4 (lane % 4).
template <bool kTf32>
__device__ __forceinline__ void mm16_acc(const float* X, const float* Y, int lane, float d[8]) {
  const int r = lane >> 2, c = 4 * (lane & 3);
#pragma unroll
  for (int k = 0; k < kB; ++k) {
    const float x0 = operand<kTf32>(X[r * kS + k]);
    const float x1 = operand<kTf32>(X[(r + 8) * kS + k]);
    const float4 y4 = *reinterpret_cast<const float4*>(Y + k * kS + c);
    const float y[4] = {operand<kTf32>(y4.x), operand<kTf32>(y4.y), operand<kTf32>(y4.z), operand<kTf32>(y4.w)};
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      d[m] = __fmaf_rn(x0, y[m], d[m]);
      d[4 + m] = __fmaf_rn(x1, y[m], d[4 + m]);
    }
  }
}

// d = X Y: the chain from +0.
template <bool kTf32>
__device__ __forceinline__ void mm16(const float* X, const float* Y, int lane, float d[8]) {
#pragma unroll
  for (int m = 0; m < 8; ++m) d[m] = 0.0f;
  mm16_acc<kTf32>(X, Y, lane, d);
}

__device__ __forceinline__ void track(float& wmax, const float d[8]) {
#pragma unroll
  for (int m = 0; m < 8; ++m) wmax = fmaxf(wmax, mag(d[m]));
}

// Stores the lane's part of a product (negated as 0 - x where asked) into block D.
__device__ __forceinline__ void store16(float* D, const float d[8], int lane, bool negate) {
  const int r = lane >> 2, c = 4 * (lane & 3);
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    D[r * kS + c + m] = negate ? __fsub_rn(0.0f, d[m]) : d[m];
    D[(r + 8) * kS + c + m] = negate ? __fsub_rn(0.0f, d[4 + m]) : d[4 + m];
  }
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
  return v;
}

struct Args {
  long tasks;
  int chunk, n, warp_floats, ndiag;
  const double* l;
  float* inv;
  double* diag;
};

template <bool kTf32>
__global__ void fla_solve_tril_kernel(Args a) {
  extern __shared__ __align__(16) float smem[];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const long task = long(blockIdx.x) * (blockDim.x >> 5) + warp;
  if (task >= a.tasks) return;  // whole warps only
  const int C = a.chunk, n = a.n, nb = n / kB, nblk = nb * (nb + 1) / 2;
  float* A = smem + size_t(warp) * a.warp_floats;  // nblk blocks: fp32(L), zero-padded
  float* V = A + nblk * kBlk;                      // nblk blocks: the inverse's lower blocks
  float* T = V + nblk * kBlk;                      // scratch block
  auto Ab = [&](int i, int j) { return A + blk(i, j) * kBlk; };
  auto Vb = [&](int i, int j) { return V + blk(i, j) * kBlk; };
  const size_t csq = size_t(C) * C;

  // A = fp32(L) (round_to FP32 = RN of the double), +0 padding; upper blocks are never read.
  // The loads go in groups of kLoads per lane, so that they are in flight together.
  {
    float4* a4 = reinterpret_cast<float4*>(A);
    for (int e = lane; e < nblk * kBlk / 4; e += 32) a4[e] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    __syncwarp();
    const double* l = a.l + size_t(task) * csq;
    const int cc = int(csq);
    for (int e0 = 0; e0 < cc; e0 += 32 * kLoads) {
      double v[kLoads];
#pragma unroll
      for (int u = 0; u < kLoads; ++u) {
        const int e = e0 + 32 * u + lane;
        v[u] = e < cc ? l[e] : 0.0;
      }
#pragma unroll
      for (int u = 0; u < kLoads; ++u) {
        const int e = e0 + 32 * u + lane;
        if (e >= cc) break;
        const int r = e / C, c = e - r * C, bi = r / kB, bj = c / kB;
        if (bi >= bj) Ab(bi, bj)[(r % kB) * kS + c % kB] = __double2float_rn(v[u]);
      }
    }
  }
  __syncwarp();

  // 1. The diagonal inverses, a column per lane (diagonal_inverse in the CPU form).
  float dmax = 0.0f;
  for (int col = lane; col < n; col += 32) {
    const int b = col / kB, j = col % kB;
    const float* Ad = Ab(b, b);
    float x[kB];
#pragma unroll
    for (int i = 0; i < kB; ++i) x[i] = -(i > j ? Ad[i * kS + j] : 0.0f);  // -0 on and above the diagonal
#pragma unroll
    for (int i = 2; i < kB; ++i) {
      const float* ar = Ad + i * kS;
      float s;
      if (n == 64) {  // two warps: rows k and k + 4, then each warp's tree, then the two sums
        float v[kB];
#pragma unroll
        for (int k = 0; k < kB; ++k) {
          if ((k & 4) != 0) continue;
          const float lo = k < i ? -ar[k] : 0.0f;
          const float hi = k + 4 < i ? -ar[k + 4] : 0.0f;
          v[k] = __fmaf_rn(lo, x[k], __fmul_rn(hi, x[k + 4]));
        }
        s = __fadd_rn(__fadd_rn(__fadd_rn(v[0], v[2]), __fadd_rn(v[1], v[3])),
                      __fadd_rn(__fadd_rn(v[8], v[10]), __fadd_rn(v[9], v[11])));
      } else {  // one warp: rows k and k + 8, then the warp's tree
        float q[kB / 2];
#pragma unroll
        for (int k = 0; k < kB / 2; ++k) {
          const float lo = k < i ? -ar[k] : 0.0f;
          const float hi = k + 8 < i ? -ar[k + 8] : 0.0f;
          q[k] = __fmaf_rn(lo, x[k], __fmul_rn(hi, x[k + 8]));
        }
        s = __fadd_rn(__fadd_rn(__fadd_rn(q[0], q[4]), __fadd_rn(q[2], q[6])),
                      __fadd_rn(__fadd_rn(q[1], q[5]), __fadd_rn(q[3], q[7])));
      }
      const float aj = j < i ? -ar[j] : 0.0f;
      x[i] = __fadd_rn(aj, s);  // after every q of row i: they read the old x[i]
    }
    float* Vd = Vb(b, b);
#pragma unroll
    for (int i = 0; i < kB; ++i) {
      const float v = __fadd_rn(x[i], i == j ? 1.0f : 0.0f);
      Vd[i * kS + j] = v;
      dmax = fmaxf(dmax, mag(v));
    }
  }
  float wmax = dmax;
  __syncwarp();

  // 2. The merge, in the CPU form's order.
  float d[8];
  for (int i = 1; i < nb; ++i) {  // Ai(i, i-1) = 0 - (Ai(i,i) A(i,i-1)) Ai(i-1,i-1)
    mm16<kTf32>(Vb(i, i), Ab(i, i - 1), lane, d);
    track(wmax, d);
    store16(T, d, lane, false);
    __syncwarp();
    mm16<kTf32>(T, Vb(i - 1, i - 1), lane, d);
    track(wmax, d);
    store16(Vb(i, i - 1), d, lane, true);
    __syncwarp();
  }
  if (nb == 4) {
    // Ai(i, j) = 0 - Ai(i,i) (A(i,j) Ai(j,j); A(i,j+1) Ai(j+1,j)) for (2, 0) and (3, 1): one chain.
    for (int i = 2; i < 4; ++i) {
      const int j = i - 2;
      mm16<kTf32>(Ab(i, j), Vb(j, j), lane, d);
      mm16_acc<kTf32>(Ab(i, j + 1), Vb(j + 1, j), lane, d);
      track(wmax, d);
      store16(T, d, lane, false);
      __syncwarp();
      mm16<kTf32>(Vb(i, i), T, lane, d);
      track(wmax, d);
      store16(Vb(i, j), d, lane, true);
      __syncwarp();
    }
    // Ai(3, 0) = 0 - Ai(3,3) (A(3,0) Ai(0,0); A(3,1) Ai(1,0); A(3,2) Ai(2,0)): one chain.
    mm16<kTf32>(Ab(3, 0), Vb(0, 0), lane, d);
    mm16_acc<kTf32>(Ab(3, 1), Vb(1, 0), lane, d);
    mm16_acc<kTf32>(Ab(3, 2), Vb(2, 0), lane, d);
    track(wmax, d);
    store16(T, d, lane, false);
    __syncwarp();
    mm16<kTf32>(Vb(3, 3), T, lane, d);
    track(wmax, d);
    store16(Vb(3, 0), d, lane, true);
    __syncwarp();
  }

  // The output: the top-left C x C, +0 in the blocks above the diagonal.
  float* inv = a.inv + size_t(task) * csq;
  for (int e = lane; e < int(csq); e += 32) {
    const int r = e / C, c = e % C, bi = r / kB, bj = c / kB;
    const float v = bi >= bj ? Vb(bi, bj)[(r % kB) * kS + c % kB] : 0.0f;
    inv[e] = v;
    wmax = fmaxf(wmax, mag(v));
  }
  dmax = warp_max(dmax);
  wmax = warp_max(wmax);
  if (lane == 0) {
    double* diag = a.diag + size_t(task) * a.ndiag;
    if (a.ndiag > 0) diag[0] = double(dmax);
    if (a.ndiag > 1) diag[1] = double(wmax);
  }
}

}  // namespace

void launch_fla_solve_tril(const InverseLaunch& la) {
  if (la.tasks <= 0) return;
  const int C = la.chunk;
  if (C < 2 || C > 64) throw std::logic_error("launch_fla_solve_tril: chunk outside 2..64");
  const bool tf32 = la.method && la.method->params<FlaSolveTrilParams>().tf32;
  Args a{};
  a.tasks = la.tasks;
  a.chunk = C;
  a.n = C <= 16 ? 16 : C <= 32 ? 32 : 64;
  const int nb = a.n / kB, nblk = nb * (nb + 1) / 2;
  a.warp_floats = (2 * nblk + 1) * kBlk;
  a.ndiag = la.ndiag;
  a.l = la.l;
  a.inv = la.inv;
  a.diag = la.diag;
  const size_t warp_bytes = size_t(a.warp_floats) * sizeof(float);
  const int warps = int(std::max<size_t>(1, std::min<size_t>(8, kSmemBudget / warp_bytes)));
  const long grid = (long(la.tasks) + warps - 1) / warps;
  const cudaStream_t st = static_cast<cudaStream_t>(la.stream);
  if (tf32)
    fla_solve_tril_kernel<true><<<unsigned(grid), 32 * warps, warps * warp_bytes, st>>>(a);
  else
    fla_solve_tril_kernel<false><<<unsigned(grid), 32 * warps, warps * warp_bytes, st>>>(a);
  CUDA_CHECK_LAUNCH();
}

}  // namespace chunkinv::gpu
