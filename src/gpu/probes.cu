// Test hooks (gpu_testing.hpp): one instruction at a time over host arrays.
#include <algorithm>
#include <cmath>

#include "gpu/check.cuh"
#include "gpu/probes.hpp"
#include "gpu/ptx.cuh"
#include "gpu/buffers.cuh"

namespace chunkinv::gpu::testing {
namespace {

using detail::DeviceBuffer;
using detail::upload;

// The A (16x16 row-major) and B (16x8, k x n) fragments of lane (g, t) of an
// m16n8k16 mma, read straight from global memory (PTX ISA layout).
__device__ void load_ab_fragments(const uint16_t* A, const uint16_t* B, int g, int t, uint32_t fa[4], uint32_t fb[2]) {
  fa[0] = ptx::pack2(A[g * 16 + 2 * t], A[g * 16 + 2 * t + 1]);
  fa[1] = ptx::pack2(A[(g + 8) * 16 + 2 * t], A[(g + 8) * 16 + 2 * t + 1]);
  fa[2] = ptx::pack2(A[g * 16 + 2 * t + 8], A[g * 16 + 2 * t + 9]);
  fa[3] = ptx::pack2(A[(g + 8) * 16 + 2 * t + 8], A[(g + 8) * 16 + 2 * t + 9]);
  fb[0] = ptx::pack2(B[(2 * t) * 8 + g], B[(2 * t + 1) * 8 + g]);
  fb[1] = ptx::pack2(B[(2 * t + 8) * 8 + g], B[(2 * t + 9) * 8 + g]);
}

// One warp per tile.
__global__ void mma_bf16_kernel(const uint16_t* a, const uint16_t* b, const float* c, float* d, size_t tiles) {
  const size_t tile = (size_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (tile >= tiles) return;
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const uint16_t* A = a + tile * 256;
  const uint16_t* B = b + tile * 128;
  const float* Cm = c + tile * 128;
  uint32_t fa[4], fb[2];
  load_ab_fragments(A, B, g, t, fa, fb);
  float fc[4] = {Cm[g * 8 + 2 * t], Cm[g * 8 + 2 * t + 1], Cm[(g + 8) * 8 + 2 * t], Cm[(g + 8) * 8 + 2 * t + 1]};
  float fd[4];
  ptx::mma_bf16_f32(fd, fa, fb, fc);
  float* D = d + tile * 128;
  D[g * 8 + 2 * t] = fd[0];
  D[g * 8 + 2 * t + 1] = fd[1];
  D[(g + 8) * 8 + 2 * t] = fd[2];
  D[(g + 8) * 8 + 2 * t + 1] = fd[3];
}

__global__ void mma_f16_kernel(const uint16_t* a, const uint16_t* b, const uint16_t* c, uint16_t* d, size_t tiles) {
  const size_t tile = (size_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (tile >= tiles) return;
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const uint16_t* A = a + tile * 256;
  const uint16_t* B = b + tile * 128;
  const uint16_t* Cm = c + tile * 128;
  uint32_t fa[4], fb[2];
  load_ab_fragments(A, B, g, t, fa, fb);
  uint32_t fc[2] = {ptx::pack2(Cm[g * 8 + 2 * t], Cm[g * 8 + 2 * t + 1]),
                    ptx::pack2(Cm[(g + 8) * 8 + 2 * t], Cm[(g + 8) * 8 + 2 * t + 1])};
  uint32_t fd[2];
  ptx::mma_f16_f16(fd, fa, fb, fc);
  uint16_t* D = d + tile * 128;
  D[g * 8 + 2 * t] = uint16_t(fd[0]);
  D[g * 8 + 2 * t + 1] = uint16_t(fd[0] >> 16);
  D[(g + 8) * 8 + 2 * t] = uint16_t(fd[1]);
  D[(g + 8) * 8 + 2 * t + 1] = uint16_t(fd[1] >> 16);
}

// One warp per tile of mma.sync.m8n8k4.f64: lane (g, t) = (lane / 4, lane %
// 4) holds A[g][t], B[t][g] and D[g][2t], D[g][2t + 1] (PTX ISA layout).
__global__ void mma_f64_kernel(const double* a, const double* b, const double* c, double* d, size_t tiles) {
  const size_t tile = (size_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (tile >= tiles) return;
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const double* Cm = c + tile * 64;
  double d0 = Cm[g * 8 + 2 * t], d1 = Cm[g * 8 + 2 * t + 1];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};"
               : "+d"(d0), "+d"(d1)
               : "d"(a[tile * 32 + g * 4 + t]), "d"(b[tile * 32 + t * 8 + g]));
#endif
  d[tile * 64 + g * 8 + 2 * t] = d0;
  d[tile * 64 + g * 8 + 2 * t + 1] = d1;
}

enum class Op { kEx2, kCvtBf16, kCvtF16, kMulBf16, kMulF16, kAddF16 };

__global__ void elementwise_kernel(Op op, const void* x, const void* y, void* out, uint16_t* out2, size_t n) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float* xf = static_cast<const float*>(x);
  const uint16_t* xh = static_cast<const uint16_t*>(x);
  const uint16_t* yh = static_cast<const uint16_t*>(y);
  uint16_t* oh = static_cast<uint16_t*>(out);
  switch (op) {
    case Op::kEx2: {
      const float v = ptx::ex2_approx_ftz(xf[i]);
      static_cast<float*>(out)[i] = v;
      out2[i] = ptx::cvt_rn_bf16(v);
      break;
    }
    case Op::kCvtBf16: oh[i] = ptx::cvt_rn_bf16(xf[i]); break;
    case Op::kCvtF16: oh[i] = ptx::cvt_rn_f16(xf[i]); break;
    case Op::kMulBf16: oh[i] = ptx::mul_rn_bf16(xh[i], yh[i]); break;
    case Op::kMulF16: oh[i] = ptx::mul_rn_f16(xh[i], yh[i]); break;
    case Op::kAddF16: oh[i] = ptx::add_rn_f16(xh[i], yh[i]); break;
  }
}

void elementwise(Op op, const void* x, size_t xsize, const void* y, void* out, size_t osize, uint16_t* out2,
                 size_t n) {
  if (n == 0) return;
  DeviceBuffer<char> dx, dy, dout;
  DeviceBuffer<uint16_t> dout2;
  char* px = upload(dx, static_cast<const char*>(x), n * xsize);
  char* py = y ? upload(dy, static_cast<const char*>(y), n * xsize) : nullptr;
  char* po = dout.get(n * osize);
  uint16_t* po2 = out2 ? dout2.get(n) : nullptr;
  elementwise_kernel<<<unsigned((n + 255) / 256), 256>>>(op, px, py, po, po2, n);
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaMemcpy(out, po, n * osize, cudaMemcpyDeviceToHost));
  if (out2) CUDA_CHECK(cudaMemcpy(out2, po2, n * 2, cudaMemcpyDeviceToHost));
}

// Candidates of the decay exception table (see DecayScan).
__global__ void scan_decay_kernel(uint32_t max_bits, int window, uint32_t* cand_x, uint16_t* cand_bf16,
                                  unsigned long long* count, unsigned long long capacity, unsigned* max_ulp) {
  const unsigned long long total = 2ull * (max_bits + 1ull);
  unsigned local_max = 0;
  for (unsigned long long i = blockIdx.x * 1ull * blockDim.x + threadIdx.x; i < total;
       i += 1ull * gridDim.x * blockDim.x) {
    const uint32_t xb = uint32_t(i >> 1) | (uint32_t(i & 1) << 31);
    const float x = __uint_as_float(xb);
    const float f = ptx::ex2_approx_ftz(x);
    const uint16_t hw = ptx::cvt_rn_bf16(f);
    const uint32_t fb = __float_as_uint(f);
    bool cand;
    if (x <= -127.0f) {
      cand = f != 0.0f;  // the reference is 0 there (2^x < FLT_MIN)
    } else if (x >= 128.0f) {
      cand = !isinf(f);  // the reference is +inf there
    } else {
      const float e = float(exp2(double(x)));
      const float eftz = e < 0x1p-126f ? 0.0f : e;
      const int lo = int(fb & 0xFFFF) - 0x8000;
      cand = !(f >= 0x1p-125f) || f >= 0x1p127f || abs(lo) <= window || ptx::cvt_rn_bf16(eftz) != hw;
      if (f >= 0x1p-125f && f < 0x1p127f) {
        const uint32_t eb = __float_as_uint(e);
        local_max = max(local_max, fb > eb ? fb - eb : eb - fb);
      }
    }
    if (cand) {
      const unsigned long long k = atomicAdd(count, 1ull);
      if (k < capacity) {
        cand_x[k] = xb;
        cand_bf16[k] = hw;
      }
    }
  }
  atomicMax(max_ulp, local_max);
}

}  // namespace

void mma_bf16_f32(const uint16_t* a, const uint16_t* b, const float* c, float* d, size_t tiles) {
  if (tiles == 0) return;
  DeviceBuffer<uint16_t> da, db;
  DeviceBuffer<float> dc, dd;
  uint16_t* pa = upload(da, a, tiles * 256);
  uint16_t* pb = upload(db, b, tiles * 128);
  float* pc = upload(dc, c, tiles * 128);
  float* pd = dd.get(tiles * 128);
  mma_bf16_kernel<<<unsigned((tiles * 32 + 255) / 256), 256>>>(pa, pb, pc, pd, tiles);
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaMemcpy(d, pd, tiles * 128 * sizeof(float), cudaMemcpyDeviceToHost));
}

void mma_f16_f16(const uint16_t* a, const uint16_t* b, const uint16_t* c, uint16_t* d, size_t tiles) {
  if (tiles == 0) return;
  DeviceBuffer<uint16_t> da, db, dc, dd;
  uint16_t* pa = upload(da, a, tiles * 256);
  uint16_t* pb = upload(db, b, tiles * 128);
  uint16_t* pc = upload(dc, c, tiles * 128);
  uint16_t* pd = dd.get(tiles * 128);
  mma_f16_kernel<<<unsigned((tiles * 32 + 255) / 256), 256>>>(pa, pb, pc, pd, tiles);
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaMemcpy(d, pd, tiles * 128 * 2, cudaMemcpyDeviceToHost));
}

void mma_f64_m8n8k4(const double* a, const double* b, const double* c, double* d, size_t tiles) {
  if (tiles == 0) return;
  DeviceBuffer<double> da, db, dc, dd;
  const double* pa = upload(da, a, tiles * 32);
  const double* pb = upload(db, b, tiles * 32);
  const double* pc = upload(dc, c, tiles * 64);
  double* pd = dd.get(tiles * 64);
  mma_f64_kernel<<<unsigned((tiles * 32 + 255) / 256), 256>>>(pa, pb, pc, pd, tiles);
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaMemcpy(d, pd, tiles * 64 * sizeof(double), cudaMemcpyDeviceToHost));
}

void ex2_approx_ftz(const float* x, float* y, uint16_t* y_bf16, size_t n) {
  elementwise(Op::kEx2, x, 4, nullptr, y, 4, y_bf16, n);
}
void cvt_rn_bf16(const float* x, uint16_t* y, size_t n) { elementwise(Op::kCvtBf16, x, 4, nullptr, y, 2, nullptr, n); }
void cvt_rn_f16(const float* x, uint16_t* y, size_t n) { elementwise(Op::kCvtF16, x, 4, nullptr, y, 2, nullptr, n); }
void mul_rn_bf16(const uint16_t* a, const uint16_t* b, uint16_t* y, size_t n) {
  elementwise(Op::kMulBf16, a, 2, b, y, 2, nullptr, n);
}
void mul_rn_f16(const uint16_t* a, const uint16_t* b, uint16_t* y, size_t n) {
  elementwise(Op::kMulF16, a, 2, b, y, 2, nullptr, n);
}
void add_rn_f16(const uint16_t* a, const uint16_t* b, uint16_t* y, size_t n) {
  elementwise(Op::kAddF16, a, 2, b, y, 2, nullptr, n);
}

DecayScan scan_decay(float max_abs, int window) {
  uint32_t max_bits;
  std::memcpy(&max_bits, &max_abs, 4);
  max_bits &= 0x7FFFFFFFu;
  constexpr unsigned long long kCapacity = 64ull << 20;
  DeviceBuffer<uint32_t> cx;
  DeviceBuffer<uint16_t> cb;
  DeviceBuffer<unsigned long long> cnt;
  DeviceBuffer<unsigned> mu;
  uint32_t* px = cx.get(kCapacity);
  uint16_t* pb = cb.get(kCapacity);
  unsigned long long* pc = cnt.get(1);
  unsigned* pm = mu.get(1);
  CUDA_CHECK(cudaMemset(pc, 0, sizeof(unsigned long long)));
  CUDA_CHECK(cudaMemset(pm, 0, sizeof(unsigned)));
  int sms = 0, dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  detail::EventTimer timer;
  timer.mark(0, nullptr);
  scan_decay_kernel<<<sms * 16, 256>>>(max_bits, window, px, pb, pc, kCapacity, pm);
  CUDA_CHECK_LAUNCH();
  timer.mark(1, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  DecayScan s;
  s.inputs = 2ull * (max_bits + 1ull);
  s.gpu_ms = timer.ms(0, 1);
  unsigned long long count = 0;
  CUDA_CHECK(cudaMemcpy(&count, pc, sizeof count, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(&s.max_ulp, pm, sizeof s.max_ulp, cudaMemcpyDeviceToHost));
  if (count > kCapacity) throw std::runtime_error("scan_decay: more candidates than the buffer holds");
  s.x_bits.resize(count);
  s.hw_bf16.resize(count);
  CUDA_CHECK(cudaMemcpy(s.x_bits.data(), px, count * 4, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(s.hw_bf16.data(), pb, count * 2, cudaMemcpyDeviceToHost));
  return s;
}

}  // namespace chunkinv::gpu::testing
