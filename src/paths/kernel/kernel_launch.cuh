// The kernel path's launch: its arguments and shape, shared by the path and
// the test hooks.
#pragma once
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

namespace chunkinv::gpu {

struct KernelArgs {
  int n = 0;                 // samples; tasks [0, n) are whole samples, [n, 2n) stable runs
  int chunk = 0, dim = 0;    // C, d
  int cp = 0;                // C zero-padded to a multiple of 16
  int npow = 0;              // matrices in a powers record (L, L^2, ...)
  bool with_keys = true;     // shared memory holds the scaled keys
  size_t warp_smem = 0;      // bytes of shared memory per warp
  const uint16_t* keys = nullptr;   // n x C x d, BF16 bits
  const double* g = nullptr;        // n x C
  const uint16_t* beta = nullptr;   // n x C, fp16(beta) bits
  const uint16_t* gold_l = nullptr; // n x C x C, fp16(gold L) bits; null: no stable run
  uint16_t* decay = nullptr;        // n x C, BF16
  uint16_t* inv_decay = nullptr;    // n x C, BF16
  uint16_t* l = nullptr;            // n x C x C, FP16
  uint16_t* inv = nullptr;          // n x C x C, FP16
  uint16_t* stable_inv = nullptr;   // n x C x C, FP16
  int* highest_power = nullptr;     // per task
  float* power_max = nullptr;       // per task
  uint16_t* powers = nullptr;       // per task npow x C x C, or null
};

struct KernelLaunch {
  int warps = 1;          // warps (tasks) per block
  size_t warp_smem = 0;   // bytes per warp
};

KernelLaunch plan_launch(int cp, int dim);
void launch_kernel_path(const KernelArgs& a, const KernelLaunch& l, int tasks, cudaStream_t stream);
// v2 (kernel_v2.cu): the same arithmetic and layout, fewer instructions.
void launch_kernel_path_v2(const KernelArgs& a, const KernelLaunch& l, int tasks, cudaStream_t stream);

}  // namespace chunkinv::gpu
