// Method blockwise on the `kernel` path: its GPU form (methods/gpu_form.hpp). The
// slow, obvious reference is the method's CPU form (methods/blockwise.cpp);
// every step below is that code's arithmetic, instruction for instruction.
//
// One warp runs one task (one C x C problem), its matrices in shared memory:
// 1. L rounded once from double to the method's input format (BF16 for
//    precision=bf16, by the bit-level rounding of core/fp.hpp's round_to;
//    FP32 otherwise, cvt.rn.f32.f64) and zero-padded to n = b 2^m.
// 2. Each b x b diagonal block inverted in FP32 by the column-oriented
//    substitution: for s = 0..b-2 the lanes take the independent updates
//    X[r][p] = fma.rn(-A[r][s], X[s][p], X[r][p]) (r > s, p < s) of every
//    diagonal block, then X[r][s] = -A[r][s]. diag_inv_max is taken here;
//    then the blocks are rounded to the I/O format (cvt.rn.bf16.f32 for bf16).
// 3. Merges h = b, 2b, ..., n/2, pairs t ascending: dc = Dinv Cb,
//    T = io(-dc), O = T Ainv, INV[t+h:, t:t+h] = io(O).
//    bf16: both products on mma.sync m16n8k16 BF16 -> FP32, each 16 x 8
//    output tile from a zero C operand, its 16-wide k-blocks chained in
//    increasing order through C, as tc::matmul_bf16_f32; at h = 8 the
//    operands sit in zeroed 16 x 16 tiles (k padded with zeros as
//    prec::matmul does; the padded output rows are dropped).
//    fp32 / tf32: one lane per output element, the FP32 FMA chain
//    acc = fma.rn(a[k], b[k], acc), k ascending from +0, on operands rounded
//    to TF32 (nearest even, prec::operand) for tf32.
// 4. Output: the top-left C x C; work_max over the diagonal inverses, every
//    dc and O, and the output (max |.|, +inf for anything non-finite).
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include <cuda_runtime.h>

#include "gpu/check.cuh"
#include "gpu/ptx.cuh"
#include "gpu/tiles.cuh"
#include "methods/blockwise/params.hpp"
#include "methods/gpu_form.hpp"

namespace chunkinv::gpu {
namespace {

enum class Mode { kBF16Mma, kFP32, kTF32 };

constexpr int kBlockSmemBudget = 96 * 1024;
constexpr int kMaxWarps = 8;

struct BlockwiseArgs {
  long tasks = 0;
  int chunk = 0;   // C
  int n = 0;       // C zero-padded to b 2^m
  int lb = 3;      // log2 of the block size b
  int ndiag = 0;
  size_t warp_smem = 0;
  const double* l = nullptr;
  float* inv = nullptr;
  double* diag = nullptr;
};

// |x|, +inf for a non-finite x (prec::max_abs).
__device__ inline float mag(float x) { return isfinite(x) ? fabsf(x) : INFINITY; }

// double -> BF16 (as a float), rounded once to nearest even: core/fp.hpp's
// round_to(x, kBF16) step for step (normal: round the double's significand in
// place, beyond 0x1.FEp127 -> inf; below 2^-126: a quantum of 2^-133).
__device__ inline float round_bf16(double x) {
  if (!isfinite(x) || x == 0.0) return __double2float_rn(x);  // NaN, +-inf, +-0: unchanged
  unsigned long long u = static_cast<unsigned long long>(__double_as_longlong(x));
  const int e = int((u >> 52) & 0x7FF) - 1023;
  if (e >= -126) {
    constexpr int kShift = 52 - 7;
    constexpr unsigned long long kMask = (1ull << kShift) - 1;
    u += (kMask >> 1) + ((u >> kShift) & 1);
    u &= ~kMask;
    const double y = __longlong_as_double(static_cast<long long>(u));
    if (fabs(y) > 0x1.FEp127) return x < 0.0 ? -INFINITY : INFINITY;
    return __double2float_rn(y);  // exact: a BF16 value
  }
  const double q = x * 0x1p133;  // x / 2^-133, exact
  const double y = rint(q) * 0x1p-133;  // nearest even, exact
  if (y == 0.0) return x < 0.0 ? -0.0f : 0.0f;
  return __double2float_rn(y);  // exact: a BF16 subnormal
}

// FP32 -> TF32 (10 fraction bits), nearest even, as a float: round_to(x, kTF32)
// on an FP32 value. The same in-place significand rounding covers FP32
// subnormals (TF32 shares FP32's exponent floor, so its subnormal quantum is
// 2^13 of FP32's) and the carry past the largest TF32 value gives inf.
__device__ inline float round_tf32(float x) {
  uint32_t u = __float_as_uint(x);
  if ((u & 0x7F800000u) == 0x7F800000u) return x;  // NaN, +-inf: unchanged
  u += 0xFFFu + ((u >> 13) & 1u);
  u &= ~0x1FFFu;
  return __uint_as_float(u);
}

template <Mode M>
__device__ inline float operand(float x) {
  if constexpr (M == Mode::kTF32) return round_tf32(x);
  else return x;
}

// The I/O rounding of an FP32 value: BF16 for bf16, none for fp32 / tf32.
template <Mode M>
__device__ inline float io(float x) {
  if constexpr (M == Mode::kBF16Mma) return ptx::bf16_to_f32(ptx::cvt_rn_bf16(x));
  else return x;
}

// Staging for the mma operands: tiles of hp x hp (hp = max(h, 16)), row stride hp + 8.
__host__ __device__ inline int stage_dim(int n) { return n / 2 > 16 ? n / 2 : 16; }
__host__ __device__ inline size_t stage_elems(int n) {
  const int hp = stage_dim(n);
  return size_t(hp) * (hp + 8);
}

size_t warp_smem_bytes(Mode m, int n, int b) {
  size_t bytes = 2 * size_t(n) * n * 4;  // Lf, Xf
  if (n > b) bytes += m == Mode::kBF16Mma ? 4 * stage_elems(n) * 2 : size_t(n / 2) * (n / 2) * 4;
  return (bytes + 15) / 16 * 16;
}

// The product A B of two staged hp x hp BF16 tiles (row stride ss) on
// mma.sync BF16 -> FP32, handing out(r, c, value) each element of its first
// h rows and columns: every 16 x 8 output tile from a zero C operand, its
// k-blocks chained in increasing order (tc::matmul_bf16_f32's chain).
template <class Out>
__device__ inline void bf16_tile_product(const uint16_t* A, const uint16_t* B, int ss, int hp, int h, int lane,
                                         Out out) {
  const int g = lane >> 2, tq = lane & 3;
  for (int mi = 0; mi < hp; mi += 16)
    for (int nj = 0; nj < h; nj += 8) {
      float acc[4] = {0.f, 0.f, 0.f, 0.f};
      for (int kb = 0; kb < hp; kb += 16) {
        uint32_t fa[4], fb[2];
        tiles::load_a(fa, A, ss, mi, kb, lane);
        tiles::load_b(fb, B, ss, kb, nj, lane);
        ptx::mma_bf16_f32(acc, fa, fb, acc);
      }
      for (int q = 0; q < 4; ++q) {
        const int r = mi + g + (q >= 2 ? 8 : 0), c = nj + 2 * tq + (q & 1);
        if (r < h) out(r, c, acc[q]);
      }
    }
}

template <Mode M>
__global__ void blockwise_kernel(BlockwiseArgs a) {
  extern __shared__ __align__(16) char smem[];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const long task = long(blockIdx.x) * (blockDim.x >> 5) + warp;
  if (task >= a.tasks) return;  // the whole warp
  const int C = a.chunk, n = a.n, lb = a.lb, b = 1 << lb;
  const size_t csq = size_t(C) * C;
  char* base = smem + size_t(warp) * a.warp_smem;
  float* Lf = reinterpret_cast<float*>(base);  // n x n: L in the input format, zero-padded
  float* Xf = Lf + n * n;                      // n x n: the inverse being built
  char* stage = reinterpret_cast<char*>(Xf + n * n);

  for (int e = lane; e < n * n; e += 32) Lf[e] = 0.0f, Xf[e] = 0.0f;
  if (M == Mode::kBF16Mma && n > b) {
    uint32_t* z = reinterpret_cast<uint32_t*>(stage);
    for (int e = lane; e < int(4 * stage_elems(n) / 2); e += 32) z[e] = 0u;
  }
  __syncwarp();
  const double* l = a.l + size_t(task) * csq;
  for (int e = lane; e < int(csq); e += 32) {
    const double v = l[e];
    Lf[(e / C) * n + e % C] = M == Mode::kBF16Mma ? round_bf16(v) : __double2float_rn(v);
  }
  for (int e = lane; e < n; e += 32) Xf[e * n + e] = 1.0f;
  __syncwarp();

  // 2. Diagonal b x b blocks: X = (I + A_b)^-1, column-oriented, one FMA per update.
  const int nb = n >> lb;
  for (int st = 0; st + 1 < b; ++st) {
    for (int e = lane; e < nb << (2 * lb); e += 32) {
      const int o = (e >> (2 * lb)) << lb, r = (e >> lb) & (b - 1), p = e & (b - 1);
      if (r > st && p < st) {
        const float scale = -Lf[(o + r) * n + o + st];
        Xf[(o + r) * n + o + p] = __fmaf_rn(scale, Xf[(o + st) * n + o + p], Xf[(o + r) * n + o + p]);
      }
    }
    __syncwarp();
    for (int e = lane; e < n; e += 32) {
      const int o = (e >> lb) << lb, r = e & (b - 1);
      if (r > st) Xf[(o + r) * n + o + st] = -Lf[(o + r) * n + o + st];
    }
    __syncwarp();
  }
  float dmax = 0.0f;
  for (int e = lane; e < n * n; e += 32) dmax = fmaxf(dmax, mag(Xf[e]));
  dmax = tiles::warp_max(dmax);
  float wmax = dmax;
  if constexpr (M == Mode::kBF16Mma) {
    for (int e = lane; e < n * n; e += 32) Xf[e] = io<M>(Xf[e]);
    __syncwarp();
  }

  // 3. Merges, block size doubling b -> n.
  if constexpr (M == Mode::kBF16Mma) {
    const size_t se = stage_elems(n);
    uint16_t* SD = reinterpret_cast<uint16_t*>(stage);  // Dinv
    uint16_t* SC = SD + se;                             // the lower-left block of L
    uint16_t* SA = SC + se;                             // Ainv
    uint16_t* ST = SA + se;                             // T = bf16(-dc)
    for (int h = b; h < n; h *= 2) {
      const int hp = h > 16 ? h : 16, ss = hp + 8;
      for (int t0 = 0; t0 < n; t0 += 2 * h) {
        for (int e = lane; e < h * h; e += 32) {
          const int r = e / h, c = e % h;
          SD[r * ss + c] = ptx::cvt_rn_bf16(Xf[(t0 + h + r) * n + t0 + h + c]);  // exact: BF16 values
          SC[r * ss + c] = ptx::cvt_rn_bf16(Lf[(t0 + h + r) * n + t0 + c]);
          SA[r * ss + c] = ptx::cvt_rn_bf16(Xf[(t0 + r) * n + t0 + c]);
        }
        __syncwarp();
        // dc = Dinv Cb; T = bf16(-dc).
        bf16_tile_product(SD, SC, ss, hp, h, lane, [&](int r, int c, float v) {
          wmax = fmaxf(wmax, mag(v));
          ST[r * ss + c] = ptx::cvt_rn_bf16(-v);
        });
        __syncwarp();
        // O = T Ainv; INV[t0+h:, t0:t0+h] = bf16(O).
        bf16_tile_product(ST, SA, ss, hp, h, lane, [&](int r, int c, float v) {
          wmax = fmaxf(wmax, mag(v));
          Xf[(t0 + h + r) * n + t0 + c] = io<M>(v);
        });
        __syncwarp();
      }
    }
  } else {
    float* T = reinterpret_cast<float*>(stage);  // h x h: T = -dc (FP32)
    for (int h = b; h < n; h *= 2)
      for (int t0 = 0; t0 < n; t0 += 2 * h) {
        // dc = Dinv Cb: the FMA chain, k ascending from +0.
        for (int e = lane; e < h * h; e += 32) {
          const int i = e / h, j = e % h;
          float acc = 0.0f;
          for (int k = 0; k < h; ++k)
            acc = __fmaf_rn(operand<M>(Xf[(t0 + h + i) * n + t0 + h + k]), operand<M>(Lf[(t0 + h + k) * n + t0 + j]),
                            acc);
          wmax = fmaxf(wmax, mag(acc));
          T[e] = -acc;
        }
        __syncwarp();
        // O = T Ainv.
        for (int e = lane; e < h * h; e += 32) {
          const int i = e / h, j = e % h;
          float acc = 0.0f;
          for (int k = 0; k < h; ++k)
            acc = __fmaf_rn(operand<M>(T[i * h + k]), operand<M>(Xf[(t0 + k) * n + t0 + j]), acc);
          wmax = fmaxf(wmax, mag(acc));
          Xf[(t0 + h + i) * n + t0 + j] = acc;
        }
        __syncwarp();
      }
  }

  // 4. Output and diagnostics.
  float* inv = a.inv + size_t(task) * csq;
  for (int e = lane; e < int(csq); e += 32) {
    const float v = Xf[(e / C) * n + e % C];
    inv[e] = v;
    wmax = fmaxf(wmax, mag(v));
  }
  wmax = tiles::warp_max(wmax);
  if (lane == 0 && a.ndiag >= 2) {
    double* d = a.diag + size_t(task) * a.ndiag;
    d[0] = double(dmax);
    d[1] = double(wmax);
  }
}

template <Mode M>
void launch_mode(const InverseLaunch& la, int b, int lb) {
  static const int optin = [] {
    int dev = 0, v = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    CUDA_CHECK(cudaFuncSetAttribute(blockwise_kernel<M>, cudaFuncAttributeMaxDynamicSharedMemorySize, v));
    return v;
  }();
  int n = b;
  while (n < la.chunk) n *= 2;
  BlockwiseArgs a;
  a.tasks = la.tasks;
  a.chunk = la.chunk;
  a.n = n;
  a.lb = lb;
  a.ndiag = la.ndiag;
  a.warp_smem = warp_smem_bytes(M, n, b);
  a.l = la.l;
  a.inv = la.inv;
  a.diag = la.diag;
  if (a.warp_smem > size_t(optin)) throw std::runtime_error("launch_blockwise: one warp's matrices exceed shared memory");
  const int warps = int(std::clamp<size_t>(kBlockSmemBudget / a.warp_smem, 1, std::min<size_t>(kMaxWarps, optin / a.warp_smem)));
  const long grid = (long(la.tasks) + warps - 1) / warps;
  blockwise_kernel<M><<<unsigned(grid), 32 * warps, warps * a.warp_smem, static_cast<cudaStream_t>(la.stream)>>>(a);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_blockwise(const InverseLaunch& la) {
  if (!la.method) throw std::logic_error("launch_blockwise: no method");
  const BlockwiseParams& p = la.method->params<BlockwiseParams>();
  if (p.block != 8 && p.block != 16)
    throw std::logic_error("launch_blockwise: block " + std::to_string(p.block) + " not covered");
  if (la.chunk < 2 || la.chunk > 64)
    throw std::logic_error("launch_blockwise: chunk " + std::to_string(la.chunk) + " outside 2..64");
  if (la.ndiag != 2) throw std::logic_error("launch_blockwise: expected 2 diagnostics");
  if (la.tasks <= 0) return;
  const int b = p.block, lb = b == 8 ? 3 : 4;
  if (p.arith == prec::Arith::kBF16Mma) launch_mode<Mode::kBF16Mma>(la, b, lb);
  else if (p.arith == prec::Arith::kFP32) launch_mode<Mode::kFP32>(la, b, lb);
  else if (p.arith == prec::Arith::kTF32) launch_mode<Mode::kTF32>(la, b, lb);
  else throw std::logic_error("launch_blockwise: precision not covered");
}

}  // namespace chunkinv::gpu
