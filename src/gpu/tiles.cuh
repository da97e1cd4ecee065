// Shared-memory layout of one warp's task and the mma fragment loads,
// common to both versions of the kernel path (kernel.cu: v1, the simple one
// the emulated path was first checked against; kernel_v2.cu: v2).
#pragma once
#include <cstddef>
#include <cstdint>

#include "gpu/ptx.cuh"

namespace chunkinv::gpu::tiles {

// Row strides in 16-bit elements, padded by 8 (16 bytes) so that the eight
// rows a fragment load touches fall into distinct banks.
__host__ __device__ inline int key_stride(int dim) { return dim + 8; }
__host__ __device__ inline int mat_stride(int cp) { return cp + 8; }

struct WarpSmem {
  uint16_t* kd;     // cp x key_stride, BF16
  uint16_t* ki;     // cp x key_stride, BF16
  uint16_t* mat[4]; // cp x mat_stride, FP16: L/P, INV, and the two being formed
  uint16_t* decay;  // cp, BF16
  uint16_t* inv;    // cp, BF16
  uint16_t* beta;   // cp, FP16
  float* g2;        // cp, the running FP32 sum G2
};

__host__ __device__ inline size_t warp_smem_bytes(int cp, int dim, bool full) {
  size_t b = 4 * size_t(cp) * mat_stride(cp) * 2 + 3 * size_t(cp) * 2 + size_t(cp) * 4;
  if (full) b += 2 * size_t(cp) * key_stride(dim) * 2;
  return (b + 15) / 16 * 16;
}

__device__ inline WarpSmem carve(char* base, int cp, int dim, bool full) {
  WarpSmem s;
  char* p = base;
  for (auto& m : s.mat) { m = reinterpret_cast<uint16_t*>(p); p += size_t(cp) * mat_stride(cp) * 2; }
  s.g2 = reinterpret_cast<float*>(p); p += size_t(cp) * 4;
  s.decay = reinterpret_cast<uint16_t*>(p); p += size_t(cp) * 2;
  s.inv = reinterpret_cast<uint16_t*>(p); p += size_t(cp) * 2;
  s.beta = reinterpret_cast<uint16_t*>(p); p += size_t(cp) * 2;
  p = base + (((p - base) + 15) / 16 * 16);
  s.kd = full ? reinterpret_cast<uint16_t*>(p) : nullptr;
  if (full) p += size_t(cp) * key_stride(dim) * 2;
  s.ki = full ? reinterpret_cast<uint16_t*>(p) : nullptr;
  return s;
}

__device__ inline uint32_t ld32(const uint16_t* p) { return *reinterpret_cast<const uint32_t*>(p); }
__device__ inline void st32(uint16_t* p, uint32_t v) { *reinterpret_cast<uint32_t*>(p) = v; }

// A fragment of the 16x16 block at (r0, c0) of a row-major matrix.
__device__ inline void load_a(uint32_t a[4], const uint16_t* m, int stride, int r0, int c0, int lane) {
  const int g = lane >> 2, t = lane & 3;
  const uint16_t* p = m + (r0 + g) * stride + c0 + 2 * t;
  a[0] = ld32(p);
  a[1] = ld32(p + 8 * stride);
  a[2] = ld32(p + 8);
  a[3] = ld32(p + 8 * stride + 8);
}
// B fragment (16 x 8, k x n) where B[k][n] = m[n0 + n][k0 + k]: rows of m are columns of B.
__device__ inline void load_b_rows(uint32_t b[2], const uint16_t* m, int stride, int k0, int n0, int lane) {
  const int g = lane >> 2, t = lane & 3;
  const uint16_t* p = m + (n0 + g) * stride + k0 + 2 * t;
  b[0] = ld32(p);
  b[1] = ld32(p + 8);
}
// B fragment where B[k][n] = m[k0 + k][n0 + n] (m row-major, k down the rows).
__device__ inline void load_b(uint32_t b[2], const uint16_t* m, int stride, int k0, int n0, int lane) {
  const int g = lane >> 2, t = lane & 3;
  const uint16_t* p = m + (k0 + 2 * t) * stride + n0 + g;
  b[0] = ptx::pack2(p[0], p[stride]);
  b[1] = ptx::pack2(p[8 * stride], p[9 * stride]);
}

// |x| for the power maximum; any non-finite entry makes it +inf.
__device__ inline float magnitude(uint16_t h) {
  const float v = fabsf(ptx::f16_to_f32(h));
  return (h & 0x7C00) == 0x7C00 ? INFINITY : v;
}
__device__ inline float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

}  // namespace chunkinv::gpu::tiles
