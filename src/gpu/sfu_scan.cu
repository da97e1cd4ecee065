// Exhaustive scans of the SFU instructions FlashKDA's activations use
// (probes.hpp, SfuScan): the measurements a CPU model is chosen from.
#include <cmath>
#include <cstring>

#include "gpu/buffers.cuh"
#include "gpu/check.cuh"
#include "gpu/probes.hpp"
#include "gpu/ptx.cuh"

namespace chunkinv::gpu::testing {
namespace {

using detail::DeviceBuffer;

constexpr int kBins = 129;      // -64..64 ulps
constexpr int kCuts = 23;       // mantissa bits kept: 0..22

struct Counters {
  unsigned long long inputs, equal, below, above;
  unsigned long long hist[kBins];
  unsigned long long trunc[kCuts], rne[kCuts];
  unsigned long long exp_inputs[256], exp_differ[256];
  unsigned exp_max[256];
  unsigned long long scale4_checked, scale4_differ;
  unsigned low_or;
};

template <SfuOp op>
__device__ float hw(float x) {
  if constexpr (op == SfuOp::kTanh) return ptx::tanh_approx(x);
  else if constexpr (op == SfuOp::kRsqrt) return ptx::rsqrt_approx_ftz(x);
  else return ptx::ex2_approx_ftz(x);
}
template <SfuOp op>
__device__ float reference(float x) {
  const double d = x;
  if constexpr (op == SfuOp::kTanh) return __double2float_rn(tanh(d));
  else if constexpr (op == SfuOp::kRsqrt) return __double2float_rn(1.0 / sqrt(d));
  else {
    const float e = __double2float_rn(exp2(d));
    return e < 0x1p-126f ? 0.0f : e;  // the instruction flushes subnormal results
  }
}

// Input i of the scan's range as FP32 bits.
template <SfuOp op>
__device__ uint32_t input_bits(unsigned long long i) {
  if constexpr (op == SfuOp::kTanh) return uint32_t(i);                 // all patterns; non-finite skipped
  else if constexpr (op == SfuOp::kRsqrt) return 0x00800000u + uint32_t(i);  // positive normals
  else return uint32_t(i >> 1) | (uint32_t(i & 1) << 31);                    // |x| <= 128, both signs
}
template <SfuOp op>
__host__ __device__ unsigned long long input_count() {
  if constexpr (op == SfuOp::kTanh) return 1ull << 32;
  else if constexpr (op == SfuOp::kRsqrt) return 0x7F800000ull - 0x00800000ull;
  else return 2ull * (0x43000000ull + 1);
}

__device__ uint32_t cut_bits(uint32_t xb, int k) { return xb & ~((1u << (23 - k)) - 1u); }
__device__ uint32_t rne_bits(uint32_t xb, int k) {
  const int drop = 23 - k;
  const uint32_t half = 1u << (drop - 1), mask = (1u << drop) - 1u;
  const uint32_t rest = xb & mask, kept = xb & ~mask;
  const bool up = rest > half || (rest == half && ((kept >> drop) & 1u));
  return up ? kept + (1u << drop) : kept;  // a carry moves into the exponent, as rounding does
}

template <SfuOp op>
__global__ void scan_kernel(Counters* g) {
  __shared__ unsigned long long hist[kBins + 2];
  __shared__ unsigned long long exp_in[256], exp_diff[256];
  __shared__ unsigned exp_max[256];
  for (int i = threadIdx.x; i < kBins + 2; i += blockDim.x) hist[i] = 0;
  for (int i = threadIdx.x; i < 256; i += blockDim.x) exp_in[i] = exp_diff[i] = exp_max[i] = 0;
  __syncthreads();
  unsigned trunc[kCuts] = {}, rne[kCuts] = {};
  unsigned long long inputs = 0, equal = 0, s4c = 0, s4d = 0;
  unsigned low_or = 0;
  const unsigned long long n = input_count<op>();
  for (unsigned long long i = blockIdx.x * 1ull * blockDim.x + threadIdx.x; i < n;
       i += 1ull * gridDim.x * blockDim.x) {
    const uint32_t xb = input_bits<op>(i);
    if ((xb & 0x7F800000u) == 0x7F800000u) continue;  // inf, nan
    const float x = __uint_as_float(xb);
    const float y = hw<op>(x), r = reference<op>(x);
    const uint32_t yb = __float_as_uint(y), rb = __float_as_uint(r);
    ++inputs;
    low_or |= yb & 0x007FFFFFu;
    const int e = int((xb >> 23) & 0xFF);
    atomicAdd(&exp_in[e], 1ull);
    if (yb == rb) {
      ++equal;
      atomicAdd(&hist[64], 1ull);
    } else {
      atomicAdd(&exp_diff[e], 1ull);
      const bool same_sign = (yb >> 31) == (rb >> 31);
      const long long d = same_sign ? ((long long)(yb & 0x7FFFFFFFu) - (long long)(rb & 0x7FFFFFFFu)) *
                                          ((yb >> 31) ? -1 : 1)
                                    : (1ll << 40);
      const unsigned long long ad = d < 0 ? -d : d;
      atomicMax(&exp_max[e], unsigned(ad > 0xFFFFFFFFull ? 0xFFFFFFFFull : ad));
      if (!same_sign || d > 64) atomicAdd(&hist[kBins + 1], 1ull);
      else if (d < -64) atomicAdd(&hist[kBins], 1ull);
      else atomicAdd(&hist[64 + d], 1ull);
    }
    for (int k = 0; k < kCuts; ++k) {
      trunc[k] += __float_as_uint(hw<op>(__uint_as_float(cut_bits(xb, k)))) != yb;
      const uint32_t rb2 = rne_bits(xb, k);
      if ((rb2 & 0x7F800000u) != 0x7F800000u) rne[k] += __float_as_uint(hw<op>(__uint_as_float(rb2))) != yb;
    }
    if constexpr (op == SfuOp::kRsqrt) {
      if (e <= 252) {
        ++s4c;
        s4d += __float_as_uint(hw<op>(x * 4.0f)) != __float_as_uint(y * 0.5f);
      }
    }
  }
  atomicAdd(&g->inputs, inputs);
  atomicAdd(&g->equal, equal);
  atomicAdd(&g->scale4_checked, s4c);
  atomicAdd(&g->scale4_differ, s4d);
  atomicOr(&g->low_or, low_or);
  for (int k = 0; k < kCuts; ++k) {
    atomicAdd(&g->trunc[k], (unsigned long long)trunc[k]);
    atomicAdd(&g->rne[k], (unsigned long long)rne[k]);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < kBins; i += blockDim.x) atomicAdd(&g->hist[i], hist[i]);
  if (threadIdx.x == 0) {
    atomicAdd(&g->below, hist[kBins]);
    atomicAdd(&g->above, hist[kBins + 1]);
  }
  for (int i = threadIdx.x; i < 256; i += blockDim.x) {
    atomicAdd(&g->exp_inputs[i], exp_in[i]);
    atomicAdd(&g->exp_differ[i], exp_diff[i]);
    atomicMax(&g->exp_max[i], exp_max[i]);
  }
}

__global__ void tanh_bf16_kernel(uint32_t* out) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < 65536) out[i] = __float_as_uint(ptx::tanh_approx(ptx::bf16_to_f32(uint16_t(i))));
}

template <SfuOp op>
SfuScan run_scan() {
  DeviceBuffer<Counters> buf;
  Counters* g = buf.get(1);
  CUDA_CHECK(cudaMemset(g, 0, sizeof(Counters)));
  int sms = 0, dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  detail::EventTimer timer;
  timer.mark(0, nullptr);
  scan_kernel<op><<<sms * 8, 256>>>(g);
  CUDA_CHECK_LAUNCH();
  timer.mark(1, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  Counters c;
  CUDA_CHECK(cudaMemcpy(&c, g, sizeof c, cudaMemcpyDeviceToHost));
  SfuScan s;
  s.gpu_ms = timer.ms(0, 1);
  s.inputs = c.inputs;
  s.equal = c.equal;
  s.ulp_hist.assign(c.hist, c.hist + kBins);
  s.ulp_below = c.below;
  s.ulp_above = c.above;
  s.trunc_differs.assign(c.trunc, c.trunc + kCuts);
  s.rne_differs.assign(c.rne, c.rne + kCuts);
  s.low_bits_or = c.low_or;
  s.exp_inputs.assign(c.exp_inputs, c.exp_inputs + 256);
  s.exp_differ.assign(c.exp_differ, c.exp_differ + 256);
  s.exp_max_ulp.assign(c.exp_max, c.exp_max + 256);
  s.scale4_checked = c.scale4_checked;
  s.scale4_differ = c.scale4_differ;
  return s;
}

}  // namespace

SfuScan scan_sfu(SfuOp op) {
  switch (op) {
    case SfuOp::kTanh: return run_scan<SfuOp::kTanh>();
    case SfuOp::kRsqrt: return run_scan<SfuOp::kRsqrt>();
    case SfuOp::kEx2: break;
  }
  return run_scan<SfuOp::kEx2>();
}

std::vector<uint32_t> tanh_approx_bf16_all() {
  DeviceBuffer<uint32_t> buf;
  uint32_t* d = buf.get(65536);
  tanh_bf16_kernel<<<256, 256>>>(d);
  CUDA_CHECK_LAUNCH();
  std::vector<uint32_t> out(65536);
  CUDA_CHECK(cudaMemcpy(out.data(), d, 65536 * 4, cudaMemcpyDeviceToHost));
  return out;
}

}  // namespace chunkinv::gpu::testing
