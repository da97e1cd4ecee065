// The kernel path, v2: the arithmetic of v1 (kernel.cu) instruction for
// instruction, with fewer instructions around it. v1 measured 0.80 ms for
// 65,536 samples at C = 16 (floor: 0.097 ms) and was issue-bound: keys read
// 4 bytes at a time in a loop that waited on each load, and runtime
// divisions by the padded chunk in every element loop. v2 makes the padded
// chunk a template parameter (the Neumann loops unroll, indices become
// shifts), reads keys 16 bytes at a time with all of a lane's loads issued
// before the first use, zeroes shared memory 16 bytes at a time, and writes
// outputs row by row without divisions. Checked bit for bit against v1 and
// the emulated path by tests/test_gpu_kernel.cpp.
#include <cstdint>
#include <stdexcept>

#include "gpu/check.cuh"
#include "paths/kernel/kernel_launch.cuh"
#include "gpu/ptx.cuh"
#include "gpu/tiles.cuh"

namespace chunkinv::gpu {
namespace {

using namespace tiles;

constexpr uint16_t kF16One = 0x3C00;
constexpr double kLog2e = 1.4426950408889634;  // log2(e), the double nearest

// D = A * B (+ Add), CP x CP FP16 in shared memory: every 16x8 tile from a
// zero C operand, its k-blocks chained through C in increasing order.
template <int CP>
__device__ __forceinline__ void matmul_f16(uint16_t* d, const uint16_t* a, const uint16_t* b, const uint16_t* add,
                                           int lane) {
  constexpr int MS = CP + 8;
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int mi = 0; mi < CP; mi += 16) {
    uint32_t fa[CP / 16][4];
#pragma unroll
    for (int kb = 0; kb < CP; kb += 16) load_a(fa[kb / 16], a, MS, mi, kb, lane);
#pragma unroll
    for (int nj = 0; nj < CP; nj += 8) {
      uint32_t acc[2] = {0u, 0u};
#pragma unroll
      for (int kb = 0; kb < CP; kb += 16) {
        uint32_t fb[2];
        load_b(fb, b, MS, kb, nj, lane);
        ptx::mma_f16_f16(acc, fa[kb / 16], fb, acc);
      }
      uint16_t* p = d + (mi + g) * MS + nj + 2 * t;
      if (add) {
        const uint16_t* q = add + (mi + g) * MS + nj + 2 * t;
        acc[0] = ptx::add_rn_f16x2(ld32(q), acc[0]);
        acc[1] = ptx::add_rn_f16x2(ld32(q + 8 * MS), acc[1]);
      }
      st32(p, acc[0]);
      st32(p + 8 * MS, acc[1]);
    }
  }
}

template <int CP>
__device__ __forceinline__ float matrix_max(const uint16_t* m, int lane) {
  constexpr int MS = CP + 8;
  float v = 0.0f;
#pragma unroll
  for (int e = lane; e < CP * CP; e += 32) v = fmaxf(v, magnitude(m[(e / CP) * MS + e % CP]));
  return warp_max(v);
}

// The leading C x C block, one row at a time (C <= 64: one or two stores a lane).
template <int CP>
__device__ __forceinline__ void store_matrix(uint16_t* out, const uint16_t* m, int chunk, int lane) {
  constexpr int MS = CP + 8;
  for (int r = 0; r < chunk; ++r)
    for (int c = lane; c < chunk; c += 32) out[r * chunk + c] = m[r * MS + c];
}

template <int CP>
__device__ __forceinline__ void neumann(WarpSmem& s, int chunk, int lane, uint16_t* inv_out, int* highest_power,
                                        float* power_max, uint16_t* powers_out) {
  constexpr int MS = CP + 8;
  uint16_t* P = s.mat[0];
  uint16_t* INV = s.mat[1];
  uint16_t* Pn = s.mat[2];
  uint16_t* INVn = s.mat[3];
#pragma unroll
  for (int e = lane; e < CP * CP; e += 32) {
    const int r = e / CP, c = e % CP;
    INV[r * MS + c] = ptx::sub_rn_f16(r == c ? kF16One : uint16_t(0), P[r * MS + c]);
  }
  __syncwarp();
  float pmax = matrix_max<CP>(P, lane);
  const size_t csq = size_t(chunk) * chunk;
  if (powers_out) store_matrix<CP>(powers_out, P, chunk, lane);
  int p = 1, q = 0;
  while (2 * p < chunk) {
    matmul_f16<CP>(Pn, P, P, nullptr, lane);
    __syncwarp();
    uint16_t* tmp = P; P = Pn; Pn = tmp;
    p *= 2;
    ++q;
    pmax = fmaxf(pmax, matrix_max<CP>(P, lane));
    if (powers_out) store_matrix<CP>(powers_out + q * csq, P, chunk, lane);
    matmul_f16<CP>(INVn, INV, P, INV, lane);
    __syncwarp();
    tmp = INV; INV = INVn; INVn = tmp;
  }
  store_matrix<CP>(inv_out, INV, chunk, lane);
  if (lane == 0) {
    *highest_power = p;
    *power_max = pmax;
  }
}

__device__ __forceinline__ uint32_t scale2(uint32_t k, uint16_t f) {
  return ptx::pack2(ptx::mul_rn_bf16(uint16_t(k & 0xFFFF), f), ptx::mul_rn_bf16(uint16_t(k >> 16), f));
}

template <int CP>
__global__ void __launch_bounds__(256) kernel_path_v2(KernelArgs args) {
  extern __shared__ __align__(16) char smem[];
  constexpr int MS = CP + 8;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const long task = args.task_first + long(blockIdx.x) * (blockDim.x >> 5) + warp;
  const int tasks = args.task_end ? args.task_end : args.gold_l ? 2 * args.n : args.n;
  if (task >= tasks) return;
  const int C = args.chunk, d = args.dim, ks = key_stride(d);
  const bool full = task < args.n;
  const long sample = full ? task : task - args.n;
  WarpSmem s = carve(smem + size_t(warp) * args.warp_smem, CP, d, true);
  const size_t csq = size_t(C) * C;
  uint16_t* powers = args.powers ? args.powers + size_t(task) * args.npow * csq : nullptr;

  {  // L starts at +0, padding included
    uint4* z = reinterpret_cast<uint4*>(s.mat[0]);
#pragma unroll
    for (int e = lane; e < CP * MS / 8; e += 32) z[e] = make_uint4(0, 0, 0, 0);
  }
  if (!full) {
    __syncwarp();
    const uint16_t* gl = args.gold_l + sample * csq;
    for (int r = 0; r < C; ++r)
      for (int c = lane; c < C; c += 32) s.mat[0][r * MS + c] = gl[r * C + c];
    __syncwarp();
    neumann<CP>(s, C, lane, args.stable_inv + sample * csq, args.highest_power + task, args.power_max + task,
                powers);
    return;
  }

  if (args.gate_width != 1) {
    per_channel_scaled_keys(args, sample, s, CP, ks, lane);
  } else {
  // Steps 1-2, as v1: one lane sums G2 in row order.
  if (lane == 0) {
    const double* g = args.g + sample * C;
    float G2 = 0.0f;
    for (int i = 0; i < C; ++i) {
      G2 = __fadd_rn(G2, __double2float_rn(__dmul_rn(g[i], kLog2e)));
      s.g2[i] = G2;
    }
  }
  __syncwarp();
  for (int i = lane; i < CP; i += 32) {
    uint16_t dec = 0, inv = 0, beta = 0;
    if (i < C) {
      dec = ptx::cvt_rn_bf16(ptx::ex2_approx_ftz(s.g2[i]));
      inv = ptx::cvt_rn_bf16(ptx::ex2_approx_ftz(-s.g2[i]));
      beta = args.beta[sample * C + i];
      args.decay[sample * C + i] = dec;
      args.inv_decay[sample * C + i] = inv;
    }
    s.decay[i] = dec;
    s.inv[i] = inv;
    s.beta[i] = beta;
  }
  // Padded rows of the scaled keys are zero.
  for (int e = lane; e < (CP - C) * ks / 8; e += 32) {
    reinterpret_cast<uint4*>(s.kd + C * ks)[e] = make_uint4(0, 0, 0, 0);
    reinterpret_cast<uint4*>(s.ki + C * ks)[e] = make_uint4(0, 0, 0, 0);
  }
  __syncwarp();

  // Step 3: 16-byte key loads, eight in flight per lane, then the BF16 products.
  {
    const uint4* keys = reinterpret_cast<const uint4*>(args.keys + sample * C * size_t(d));
    const int q8 = d / 8, total = C * q8;
    constexpr int kInFlight = 8;
    for (int base = 0; base < total; base += 32 * kInFlight) {
      uint4 k[kInFlight];
#pragma unroll
      for (int j = 0; j < kInFlight; ++j) {
        const int e = base + j * 32 + lane;
        k[j] = e < total ? __ldg(keys + e) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int j = 0; j < kInFlight; ++j) {
        const int e = base + j * 32 + lane;
        if (e >= total) break;
        const int r = e / q8, c = (e - r * q8) * 8;
        const uint16_t fd = s.decay[r], fi = s.inv[r];
        *reinterpret_cast<uint4*>(s.kd + r * ks + c) =
            make_uint4(scale2(k[j].x, fd), scale2(k[j].y, fd), scale2(k[j].z, fd), scale2(k[j].w, fd));
        *reinterpret_cast<uint4*>(s.ki + r * ks + c) =
            make_uint4(scale2(k[j].x, fi), scale2(k[j].y, fi), scale2(k[j].z, fi), scale2(k[j].w, fi));
      }
    }
  }
  }  // per-token gates
  __syncwarp();

  // Steps 4-5, as v1.
  {
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int mi = 0; mi < CP; mi += 16) {
#pragma unroll
      for (int nj = 0; nj < mi + 16; nj += 8) {
        float acc[4] = {0.f, 0.f, 0.f, 0.f};
        for (int kb = 0; kb < d; kb += 16) {
          uint32_t fa[4], fb[2];
          load_a(fa, s.kd, ks, mi, kb, lane);
          load_b_rows(fb, s.ki, ks, kb, nj, lane);
          ptx::mma_bf16_f32(acc, fa, fb, acc);
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = mi + g + (e >= 2 ? 8 : 0), c = nj + 2 * t + (e & 1);
          uint16_t h = 0;
          if (r < C && c < r) h = ptx::mul_rn_f16(ptx::cvt_rn_f16(acc[e]), s.beta[r]);
          s.mat[0][r * MS + c] = h;
        }
      }
    }
  }
  __syncwarp();
  store_matrix<CP>(args.l + sample * csq, s.mat[0], C, lane);
  if (args.l_only) return;
  neumann<CP>(s, C, lane, args.inv + sample * csq, args.highest_power + task, args.power_max + task, powers);
}

template <int CP>
void launch(const KernelArgs& a, const KernelLaunch& l, int tasks, cudaStream_t st) {
  detail::allow_optin_smem(reinterpret_cast<const void*>(kernel_path_v2<CP>));
  const int blocks = (tasks + l.warps - 1) / l.warps;
  kernel_path_v2<CP><<<blocks, 32 * l.warps, l.warps * l.warp_smem, st>>>(a);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_kernel_path_v2(const KernelArgs& a, const KernelLaunch& l, int tasks, cudaStream_t st) {
  switch (a.cp) {
    case 16: return launch<16>(a, l, tasks, st);
    case 32: return launch<32>(a, l, tasks, st);
    case 48: return launch<48>(a, l, tasks, st);
    case 64: return launch<64>(a, l, tasks, st);
  }
  throw std::runtime_error("kernel v2: padded chunk must be 16, 32, 48 or 64");
}

}  // namespace chunkinv::gpu
