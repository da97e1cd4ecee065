// The kernel path's launch: its arguments and shape, shared by the path and
// the test hooks.
#pragma once
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#ifdef __CUDACC__
#include "gpu/ptx.cuh"
#endif

namespace chunkinv::gpu {

struct KernelArgs {
  int n = 0;                 // samples; tasks [0, n) are whole samples, [n, 2n) runs on the gold L
  int chunk = 0, dim = 0;    // C, d
  int cp = 0;                // C zero-padded to a multiple of 16
  int npow = 0;              // matrices in a powers record (L, L^2, ...)
  bool with_keys = true;     // shared memory holds the scaled keys
  bool l_only = false;       // form decays and L only (no inverse; no gold-L tasks)
  size_t warp_smem = 0;      // bytes of shared memory per warp
  int task_first = 0;        // the launch runs tasks [task_first, task_end) (task_end 0: to the last)
  int task_end = 0;
  const uint16_t* keys = nullptr;   // n x C x d, BF16 bits
  int gate_width = 1;               // values of g per token: 1 (per-token gates) or dim (per-channel)
  const double* g = nullptr;        // n x C x gate_width
  const uint16_t* beta = nullptr;   // n x C, fp16(beta) bits
  const uint16_t* gold_l = nullptr; // n x C x C, fp16(gold L) bits; null: no run on the gold L
  uint16_t* decay = nullptr;        // n x C x gate_width, BF16
  uint16_t* inv_decay = nullptr;    // n x C x gate_width, BF16
  uint16_t* l = nullptr;            // n x C x C, FP16
  uint16_t* inv = nullptr;          // n x C x C, FP16
  uint16_t* gold_l_inv = nullptr;   // n x C x C, FP16
  int* highest_power = nullptr;     // per task
  float* power_max = nullptr;       // per task
  uint16_t* powers = nullptr;       // per task npow x C x C, or null
};

struct KernelLaunch {
  int warps = 1;          // warps (tasks) per block
  size_t warp_smem = 0;   // bytes per warp
};

KernelLaunch plan_launch(int cp, int dim);
// The launch of runs on the gold L alone (tasks [n, 2n), task_first = n): no keys in
// shared memory, so more warps an SM.
KernelLaunch plan_gold_l_launch(int cp, int dim);
void launch_kernel_path(const KernelArgs& a, const KernelLaunch& l, int tasks, cudaStream_t stream);
// v2 (kernel_v2.cu): the same arithmetic, fewer instructions, CP / 16 warps
// a task; it plans its own blocks and shared memory (a.warp_smem unused),
// keys in shared memory only where [task_first, ...) holds whole samples.
void launch_kernel_path_v2(const KernelArgs& a, int tasks, cudaStream_t stream);

// Steps 1-3 for per-channel gates (SPEC §1), shared by both kernel versions:
// each of the task's nt threads (this one is `lane`) owns pairs of channels
// and walks the tokens in order, so G2 is the running FP32 sum of
// fp32(g log2 e) per channel, as the kernel forms it; the BF16 decays of
// each element scale that element of the key. Rows C..cp-1 of kd and ki
// are zeroed; fp16(beta) goes to s.beta.
#ifdef __CUDACC__
template <class Smem>
__device__ inline void per_channel_scaled_keys(const KernelArgs& a, long sample, const Smem& s, int cp, int ks,
                                               int lane, int nt = 32) {
  constexpr double kLog2eD = 1.4426950408889634;  // log2(e), the double nearest
  const int C = a.chunk, d = a.dim;
  const double* g = a.g + size_t(sample) * C * d;
  const uint16_t* keys = a.keys + size_t(sample) * C * d;
  uint16_t* dec_out = a.decay + size_t(sample) * C * d;
  uint16_t* inv_out = a.inv_decay + size_t(sample) * C * d;
  for (int c = 2 * lane; c < d; c += 2 * nt) {
    float G0 = 0.0f, G1 = 0.0f;
    for (int r = 0; r < C; ++r) {
      const size_t e = size_t(r) * d + c;
      G0 = __fadd_rn(G0, __double2float_rn(__dmul_rn(g[e], kLog2eD)));
      G1 = __fadd_rn(G1, __double2float_rn(__dmul_rn(g[e + 1], kLog2eD)));
      const uint16_t d0 = ptx::cvt_rn_bf16(ptx::ex2_approx_ftz(G0)), d1 = ptx::cvt_rn_bf16(ptx::ex2_approx_ftz(G1));
      const uint16_t i0 = ptx::cvt_rn_bf16(ptx::ex2_approx_ftz(-G0)), i1 = ptx::cvt_rn_bf16(ptx::ex2_approx_ftz(-G1));
      dec_out[e] = d0, dec_out[e + 1] = d1;
      inv_out[e] = i0, inv_out[e + 1] = i1;
      const uint16_t k0 = keys[e], k1 = keys[e + 1];
      *reinterpret_cast<uint32_t*>(s.kd + r * ks + c) = ptx::pack2(ptx::mul_rn_bf16(k0, d0), ptx::mul_rn_bf16(k1, d1));
      *reinterpret_cast<uint32_t*>(s.ki + r * ks + c) = ptx::pack2(ptx::mul_rn_bf16(k0, i0), ptx::mul_rn_bf16(k1, i1));
    }
  }
  for (int e = lane; e < (cp - C) * ks / 2; e += nt) {
    reinterpret_cast<uint32_t*>(s.kd + C * ks)[e] = 0u;
    reinterpret_cast<uint32_t*>(s.ki + C * ks)[e] = 0u;
  }
  for (int i = lane; i < cp; i += nt) s.beta[i] = i < C ? a.beta[size_t(sample) * C + i] : uint16_t(0);
}

// Steps 1-2 for per-token gates, shared by both kernel versions: the
// task's nt threads form g2 = fp32(g * log2 e) of a row each, they meet
// (sync), thread 0 of them sums G2 in FP32 in row order (the order is the
// arithmetic) from shared memory, they meet again, then thread t writes
// the BF16 decays of rows t, t + nt, ... and fp16(beta) to s and the
// decays to the outputs; rows C..cp-1 get zeros. (Thread 0 alone reading g
// from global memory waited for each load in turn.)
template <class Smem, class Sync>
__device__ inline void token_decays(const KernelArgs& a, long sample, const Smem& s, int cp, int t, int nt,
                                    const Sync& sync) {
  constexpr double kLog2eD = 1.4426950408889634;  // log2(e), the double nearest
  const int C = a.chunk;
  const double* g = a.g + sample * C;
  for (int i = t; i < C; i += nt) s.g2[i] = __double2float_rn(__dmul_rn(g[i], kLog2eD));
  sync();
  if (t == 0) {
    // Eight terms read before their adds, so that the loads do not wait on
    // the stores between them; the adds stay one after another in row order.
    float G2 = 0.0f;
    for (int i0 = 0; i0 < C; i0 += 8) {
      float v[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = i0 + j < C ? s.g2[i0 + j] : 0.0f;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        if (i0 + j < C) {
          G2 = __fadd_rn(G2, v[j]);
          s.g2[i0 + j] = G2;
        }
      }
    }
  }
  sync();
  for (int i = t; i < cp; i += nt) {
    uint16_t dec = 0, inv = 0, beta = 0;
    if (i < C) {
      dec = ptx::cvt_rn_bf16(ptx::ex2_approx_ftz(s.g2[i]));
      inv = ptx::cvt_rn_bf16(ptx::ex2_approx_ftz(-s.g2[i]));
      beta = a.beta[sample * C + i];
      a.decay[sample * C + i] = dec;
      a.inv_decay[sample * C + i] = inv;
    }
    s.decay[i] = dec;
    s.inv[i] = inv;
    s.beta[i] = beta;
  }
}

// Steps 1-3 for per-token gates (SPEC §2 "kernel"), kernel version 1's way:
// g2 = fp32(g * log2 e) with the product in FP64; G2 summed in FP32 in row
// order by one lane (the order is the arithmetic); the BF16 decays; kd, ki =
// bf16(k * decay), each product rounded once, zero in rows C..cp-1; fp16(beta)
// to s.beta.
template <class Smem>
__device__ inline void token_scaled_keys(const KernelArgs& a, long sample, const Smem& s, int cp, int ks, int lane) {
  const int C = a.chunk, d = a.dim;
  token_decays(a, sample, s, cp, lane, 32, [] { __syncwarp(); });
  __syncwarp();
  const uint32_t* keys = reinterpret_cast<const uint32_t*>(a.keys + sample * C * size_t(d));
  const int pairs = d / 2;
  for (int e = lane; e < cp * pairs; e += 32) {
    const int r = e / pairs, c = 2 * (e % pairs);
    uint32_t kd = 0, ki = 0;
    if (r < C) {
      const uint32_t k = keys[e];
      const uint16_t k0 = uint16_t(k & 0xFFFF), k1 = uint16_t(k >> 16);
      kd = ptx::pack2(ptx::mul_rn_bf16(k0, s.decay[r]), ptx::mul_rn_bf16(k1, s.decay[r]));
      ki = ptx::pack2(ptx::mul_rn_bf16(k0, s.inv[r]), ptx::mul_rn_bf16(k1, s.inv[r]));
    }
    *reinterpret_cast<uint32_t*>(s.kd + r * ks + c) = kd;
    *reinterpret_cast<uint32_t*>(s.ki + r * ks + c) = ki;
  }
}
#endif

}  // namespace chunkinv::gpu
