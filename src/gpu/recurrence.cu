// The token recurrence in FP64 on the GPU (gpu/recurrence.hpp), the same
// operations in the same order as the CPU's Recurrence
// (downstream/forward.cpp), so the same bits:
//
//   S(c, e) = S(c, e) * exp(g_c)                          (__dmul_rn)
//   dot_e   = sum_c k_c S(c, e)                           (recurrence_dots' order)
//   pred_e  = beta * (v_e - dot_e)                        (__dsub_rn, __dmul_rn)
//   S(c, e) = fma(k_c, pred_e, S(c, e))
//   o_e     = scale * sum_c q_c S(c, e)                   (recurrence_dots' order)
//
// Layout. A block holds up to 64 value columns of one sequence; each warp
// 8 of them, each group of 8 lanes (the slices r = 0..7) a column pair
// (e0, e0 + 1). Lane r holds rows c = 16 i + 2 r + p (p = 0, 1) of both
// columns in registers, the column it keeps (e0 for r < 4, e0 + 1 for
// r >= 4) first: 2 K / 8 doubles, the state never leaves them within
// a launch. Row c's products go to chain p of slice r, as recurrence_dots
// deals them (slice (c / 2) mod 8, chain c mod 2); the four chains of a
// lane (two columns x two parities) are independent fma chains. A column's
// sum is a reduce-scatter over the 8 lanes: the first shuffle (lane ^ 4)
// sends the pair's other column and leaves lanes r < 4 with column e0's
// P_r + P_(r+4), lanes r >= 4 with e1's; lane ^ 1 and lane ^ 2 finish
// ((P0 + P4) + (P1 + P5)) + ((P2 + P6) + (P3 + P7)) on each (IEEE addition
// commutes, so every lane of the four has the same bits). One more shuffle
// gives each lane the other column's pred.
//
// Tokens are staged in shared memory 8 at a time (k, q and the decays for
// every row, v for the block's columns, beta): 28.7 KB at K = 128, two
// stages (version 1: the next copied while this one runs). The
// decays exp(g) come from a kernel of their own before each launch, by
// detmath's one source (core/detmath_hd.hpp, --fmad=false): the CPU's
// detmath::exp, bit for bit.
//
// The blocks' code is gpu/recurrence_block.hpp, one source with the host
// emulation that tests it on every machine; this file holds the launches
// and the host side.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>

#include <cuda_runtime.h>

#include "core/error.hpp"
#include "gpu/buffers.cuh"
#include "gpu/check.cuh"
#include "gpu/gpu.hpp"
#include "gpu/recurrence.hpp"
#include "gpu/recurrence_block.hpp"

namespace chunkinv::gpu {
namespace {

using detail::DeviceBuffer;
using detail::upload;

using namespace recurrence;

// The device's context for the kernel bodies (gpu/recurrence_block.hpp).
struct DeviceContext {
  double* shared;
  __device__ __forceinline__ int thread() const { return int(threadIdx.x); }
  __device__ __forceinline__ int threads() const { return int(blockDim.x); }
  __device__ __forceinline__ int block_x() const { return int(blockIdx.x); }
  __device__ __forceinline__ int block_y() const { return int(blockIdx.y); }
  __device__ __forceinline__ double* smem() const { return shared; }
  __device__ __forceinline__ void sync() const { __syncthreads(); }
  __device__ __forceinline__ double shfl_xor(double v, int mask) const { return __shfl_xor_sync(0xffffffffu, v, mask); }
  // n = 1 or 2 doubles from global to shared memory, not waited for (cp.async; 16 bytes: both 16-byte aligned).
  __device__ __forceinline__ void copy_async(double* to, const double* from, int n) const {
    const unsigned s = unsigned(__cvta_generic_to_shared(to));
    if (n == 2) asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(from) : "memory");
    else asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(s), "l"(from) : "memory");
  }
  // This thread's copies are done (and visible to it; a barrier makes them everyone's).
  __device__ __forceinline__ void wait_copies() const { asm volatile("cp.async.wait_all;\n" ::: "memory"); }
};

// Grid (sequences, a sequence's count x width decays / (256 kDecaysPerThread)):
// a block's sequence is its x (up to 2^31 - 1 of them). A thread loads its
// four gates first, then takes their exps, four independent chains
// (decay_one's values: the same exp of the same gate). On an H100 (ncu) a
// 512-token launch of the decays took 327 us with one a thread, 290 with
// two, 273 with four: the chains, not the bytes, held it
// (docs/notes/gpu-notes.md, "Fifth lease").
constexpr int kDecaysPerThread = 4;
__global__ void decay_kernel(const double* g, double* d, Layout layout, int t0, int count, int width) {
  const int s = int(blockIdx.x), n = count * width;
  const int first = int(blockIdx.y * blockDim.x) * kDecaysPerThread + int(threadIdx.x);
  const Layout::Rows rows = layout.rows(s);
  double x[kDecaysPerThread];
  CHUNKINV_UNROLL
  for (int e = 0; e < kDecaysPerThread; ++e) {
    const int rest = first + e * int(blockDim.x);
    x[e] = rest < n ? g[gate_index(rows, t0, width, rest)] : 0.0;
  }
  const size_t base = size_t(s) * n;
  CHUNKINV_UNROLL
  for (int e = 0; e < kDecaysPerThread; ++e) {
    const int rest = first + e * int(blockDim.x);
    if (rest < n) d[base + rest] = detmath::hd::exp(x[e]);
  }
}

// K = 16 NI; 125 registers at NI = 8 (ptxas, sm_90), so two blocks of 8 warps an SM.
template <int NI>
__global__ void __launch_bounds__(kMaxWarps * 32, 2) recurrence_kernel(const __grid_constant__ Args a) {  // read in place: a reference to a plain parameter is a copy in local memory
  extern __shared__ __align__(16) double smem[];
  DeviceContext x{smem};
  recurrence_block<NI>(a, x);
}

// Version 2: half the state a lane; three blocks of 8 warps an SM where the
// registers allow it (at most 85 a thread).
template <int NI>
__global__ void __launch_bounds__(kMaxWarps * 32, 3) recurrence_kernel_v2(const __grid_constant__ Args a) {
  extern __shared__ __align__(16) double smem[];
  DeviceContext x{smem};
  recurrence_block_v2<NI>(a, x);
}

template <int NI>
const void* kernel_of(int version) {
  return version == 2 ? reinterpret_cast<const void*>(&recurrence_kernel_v2<NI>)
                      : reinterpret_cast<const void*>(&recurrence_kernel<NI>);
}
const void* kernel_of(int K, int version) {
  switch (K) {
    case 16: return kernel_of<1>(version);
    case 32: return kernel_of<2>(version);
    case 64: return kernel_of<4>(version);
    default: return kernel_of<8>(version);
  }
}

template <int NI>
void launch_block(int version, dim3 grid, int threads, size_t smem, const Args& a) {
  if (version == 2) recurrence_kernel_v2<NI><<<grid, threads, smem>>>(a);
  else recurrence_kernel<NI><<<grid, threads, smem>>>(a);
}

// The decays of tokens [t0, t0 + count), then the recurrence over them, of
// every one of n sequences (q, k, g, beta, v, o in `layout`).
void launch(const double* q, const double* k, const double* g, const double* beta, const double* v, double* o,
            double* state, double* d, Layout layout, int n, int K, int V, int W, int t0, int count, double scale,
            int version = 1) {
  const size_t per_block = size_t(256) * kDecaysPerThread;
  decay_kernel<<<dim3(unsigned(n), unsigned((size_t(count) * W + per_block - 1) / per_block)), 256>>>(g, d, layout, t0,
                                                                                                      count, W);
  CUDA_CHECK_LAUNCH();
  const Shape sh = shape_of(K, V, version);
  const dim3 grid(unsigned(n), unsigned(sh.blocks_per_sequence));
  const int threads = sh.warps * 32;
  const size_t smem = sh.smem_bytes;  // over the 48 KB a launch gets unasked at K = 128 (two stages)
  CUDA_CHECK(cudaFuncSetAttribute(kernel_of(K, version), cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  const Args a{q, k, d, beta, v, o, state, layout, t0, count, V, W, scale};
  switch (K) {
    case 16: launch_block<1>(version, grid, threads, smem, a); break;
    case 32: launch_block<2>(version, grid, threads, smem, a); break;
    case 64: launch_block<4>(version, grid, threads, smem, a); break;
    default: launch_block<8>(version, grid, threads, smem, a); break;
  }
  CUDA_CHECK_LAUNCH();
}

void require(int K, int V) {
  if (const std::string why = recurrence_unsupported(K, V); !why.empty()) throw UsageError(why);
  if (const std::string why = unavailable_reason(); !why.empty()) throw UsageError("the GPU recurrence: no CUDA GPU: " + why);
}


}  // namespace

struct DeviceRecurrence::Impl {
  int n = 0, K = 0, V = 0, W = 1, version = 1;
  double scale = 0;
  DeviceBuffer<double> state, q, k, g, beta, v, o, d;
};

DeviceRecurrence::DeviceRecurrence(int sequences, int key_dim, int value_dim, bool channel_gates, double scale,
                                   const double* h0, int version)
    : impl_(std::make_unique<Impl>()) {
  require(key_dim, value_dim);
  Impl& m = *impl_;
  m.n = sequences, m.K = key_dim, m.V = value_dim, m.W = channel_gates ? key_dim : 1, m.scale = scale;
  m.version = version;
  const size_t n = size_t(m.n) * m.K * m.V;
  if (h0) upload(m.state, h0, n);
  else CUDA_CHECK(cudaMemset(m.state.get(n), 0, n * sizeof(double)));
}

DeviceRecurrence::~DeviceRecurrence() = default;

void DeviceRecurrence::advance(int count, const double* q, const double* k, const double* g, const double* beta,
                               const double* v, double* o) {
  if (count <= 0) return;
  Impl& m = *impl_;
  const size_t rows = size_t(m.n) * count;
  upload(m.q, q, rows * m.K);
  upload(m.k, k, rows * m.K);
  upload(m.g, g, rows * m.W);
  upload(m.beta, beta, rows);
  upload(m.v, v, rows * m.V);
  launch(m.q.data(), m.k.data(), m.g.data(), m.beta.data(), m.v.data(), m.o.get(rows * m.V), m.state.data(),
         m.d.get(rows * m.W), Layout{count, 1}, m.n, m.K, m.V, m.W, 0, count, m.scale, m.version);
  CUDA_CHECK(cudaMemcpy(o, m.o.data(), rows * m.V * sizeof(double), cudaMemcpyDeviceToHost));
}

void DeviceRecurrence::state(double* out) const {
  const Impl& m = *impl_;
  CUDA_CHECK(cudaMemcpy(out, m.state.data(), size_t(m.n) * m.K * m.V * sizeof(double), cudaMemcpyDeviceToHost));
}

RecurrenceTiming time_recurrence(const RecurrenceProblem& p, int block, int repeat, const std::vector<int>& keep,
                                 const std::function<bool(const RecurrenceTiming&)>& check) {
  const int K = p.key_dim, V = p.value_dim, W = p.channel_gates ? K : 1, n = p.batch * p.heads;
  require(K, V);
  RecurrenceTiming out;
  const size_t rows = size_t(p.batch) * p.tokens * p.heads, states = size_t(n) * K * V;
  const size_t decays = size_t(n) * std::min(block, p.tokens) * W;
  out.device_bytes = (rows * (2 * K + W + 1 + 2 * V) + states * (p.h0 ? 2 : 1) + decays) * sizeof(double);
  size_t free_bytes = 0, total_bytes = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  if (out.device_bytes > free_bytes / 10 * 9)
    throw UsageError("the GPU recurrence: the inputs, outputs and states take " + std::to_string(out.device_bytes >> 20) +
                     " MiB of device memory, " + std::to_string(free_bytes >> 20) + " MiB are free; use fewer sequences");
  DeviceBuffer<double> q, k, g, beta, v, o, state, h0, d;
  const auto t0 = std::chrono::steady_clock::now();
  upload(q, p.q, rows * K);
  upload(k, p.k, rows * K);
  upload(g, p.g, rows * W);
  upload(beta, p.beta, rows);
  upload(v, p.v, rows * V);
  if (p.h0) upload(h0, p.h0, states);
  CUDA_CHECK(cudaDeviceSynchronize());
  out.upload_ms = detail::wall_ms_since(t0);
  o.get(rows * V);
  state.get(states);
  d.get(decays);
  const Layout layout{p.tokens, p.heads};
  const auto reset = [&] {
    if (p.h0) CUDA_CHECK(cudaMemcpy(state.data(), h0.data(), states * sizeof(double), cudaMemcpyDeviceToDevice));
    else CUDA_CHECK(cudaMemset(state.data(), 0, states * sizeof(double)));
  };
  const auto pass = [&] {
    for (int t = 0; t < p.tokens; t += block)
      launch(q.data(), k.data(), g.data(), beta.data(), v.data(), o.data(), state.data(), d.data(), layout, n, K, V, W,
             t, std::min(block, p.tokens - t), p.scale, p.version);
  };
  // The first pass: warm-up, and the outputs the CPU checks.
  reset();
  pass();
  CUDA_CHECK(cudaDeviceSynchronize());
  for (const int s : keep) {
    std::vector<double>& os = out.o.emplace_back(size_t(p.tokens) * V);
    CUDA_CHECK(cudaMemcpy2D(os.data(), V * sizeof(double), o.data() + layout.row(s, 0) * V,
                            size_t(p.heads) * V * sizeof(double), V * sizeof(double), size_t(p.tokens),
                            cudaMemcpyDeviceToHost));
    std::vector<double>& hs = out.final_state.emplace_back(size_t(K) * V);
    CUDA_CHECK(cudaMemcpy(hs.data(), state.data() + size_t(s) * K * V, size_t(K) * V * sizeof(double),
                          cudaMemcpyDeviceToHost));
  }
  cudaFuncAttributes attr{};
  CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel_of(K, p.version)));
  out.registers = attr.numRegs;
  out.spill_bytes = int(attr.localSizeBytes);
  if (!check(out)) return out;
  detail::EventTimer timer;
  for (int rep = 0; rep < repeat; ++rep) {
    reset();
    timer.mark(0, 0);
    pass();
    timer.mark(1, 0);
    CUDA_CHECK(cudaDeviceSynchronize());
    out.pass_ms.push_back(timer.ms(0, 1));
  }
  return out;
}

}  // namespace chunkinv::gpu
