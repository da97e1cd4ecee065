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
// columns in registers: 2 K / 8 doubles, the state never leaves them within
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
// every row, v for the block's columns, beta): 28.7 KB at K = 128. The
// decays exp(g) come from a kernel of their own before each launch, by
// detmath's one source (core/detmath_hd.hpp, --fmad=false): the CPU's
// detmath::exp, bit for bit.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>

#include <cuda_runtime.h>

#include "core/detmath_hd.hpp"
#include "core/error.hpp"
#include "gpu/buffers.cuh"
#include "gpu/check.cuh"
#include "gpu/gpu.hpp"
#include "gpu/recurrence.hpp"

namespace chunkinv::gpu {
namespace {

using detail::DeviceBuffer;

constexpr int kSlices = 8;                        // lanes that share a column pair (forward.hpp: kRecurrenceSlices)
constexpr int kColumnsPerWarp = 32 / kSlices * 2;  // 8
constexpr int kMaxWarps = 8;                      // 64 columns a block
constexpr int kStageTokens = 8;                   // tokens in shared memory at a time
constexpr unsigned kFull = 0xffffffffu;

// Token t of sequence s = b H + h in a [B, T, H, X] tensor: row ((b T + t) H + h).
struct Layout {
  int tokens = 0, heads = 1;
  __host__ __device__ size_t row(int s, int t) const {
    return (size_t(s / heads) * tokens + t) * heads + s % heads;
  }
};

struct Args {
  const double *q, *k, *d, *beta, *v;  // d: the launch's decays, [n][count][gate_width]
  double* o;
  double* state;  // [n][K][V]
  Layout layout;
  int t0, count, value_dim, gate_width;
  double scale;
};

// d[s][j][c] = exp(g of token t0 + j of sequence s, gate column c).
__global__ void decay_kernel(const double* g, double* d, Layout layout, int t0, int count, int width, size_t total) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const size_t per_sequence = size_t(count) * width;
  const int s = int(i / per_sequence);
  const size_t rest = i % per_sequence;
  const int j = int(rest / width), c = int(rest % width);
  d[i] = detmath::hd::exp(g[layout.row(s, t0 + j) * width + c]);
}

// The column sum of recurrence_dots' order from the lane's slice partials
// of its two columns; the result is the `kept` column's (lanes r < 4: 0).
__device__ __forceinline__ double column_sum(double part0, double part1, int kept) {
  const double mine = kept ? part1 : part0, other = kept ? part0 : part1;
  double x = __dadd_rn(mine, __shfl_xor_sync(kFull, other, 4));  // P_r + P_(r ^ 4)
  x = __dadd_rn(x, __shfl_xor_sync(kFull, x, 1));
  return __dadd_rn(x, __shfl_xor_sync(kFull, x, 2));
}

// K = 16 NI. Every lane of every warp runs every step (the shuffles need
// all 32); columns past V hold zeros and are never written.
template <int NI>
__global__ void __launch_bounds__(kMaxWarps * 32, 2) recurrence_kernel(Args a) {
  constexpr int K = 16 * NI, NR = 2 * NI;
  extern __shared__ __align__(16) double smem[];
  const int cols = kColumnsPerWarp * int(blockDim.x / 32);
  double* sk = smem;
  double* sq = sk + kStageTokens * K;
  double* sd = sq + kStageTokens * K;
  double* sv = sd + kStageTokens * K;
  double* sb = sv + kStageTokens * cols;
  const int s = blockIdx.x, V = a.value_dim;
  const int lane = threadIdx.x & 31, r = lane & (kSlices - 1), kept = r >> 2;
  const int col0 = blockIdx.y * cols;
  const int e0 = col0 + int(threadIdx.x >> 5) * kColumnsPerWarp + (lane / kSlices) * 2;  // columns e0, e0 + 1
  double* state = a.state + size_t(s) * K * V;
  double s0[NR], s1[NR];  // row 16 i + 2 r + p at [2 i + p], of column e0 and e0 + 1
#pragma unroll
  for (int i = 0; i < NI; ++i)
#pragma unroll
    for (int p = 0; p < 2; ++p) {
      const size_t c = 16 * i + 2 * r + p;
      s0[2 * i + p] = e0 < V ? state[c * V + e0] : 0.0;
      s1[2 * i + p] = e0 + 1 < V ? state[c * V + e0 + 1] : 0.0;
    }

  for (int t = 0; t < a.count; t += kStageTokens) {
    const int nt = min(kStageTokens, a.count - t);
    __syncthreads();  // every lane is done with the previous stage
    for (int i = threadIdx.x; i < nt * (K / 2); i += blockDim.x) {
      const int j = i / (K / 2), c = 2 * (i % (K / 2));
      const size_t row = a.layout.row(s, a.t0 + t + j);
      *reinterpret_cast<double2*>(sk + j * K + c) = *reinterpret_cast<const double2*>(a.k + row * K + c);
      *reinterpret_cast<double2*>(sq + j * K + c) = *reinterpret_cast<const double2*>(a.q + row * K + c);
      const double* dj = a.d + (size_t(s) * a.count + t + j) * a.gate_width;
      if (a.gate_width == 1) {
        sd[j * K + c] = dj[0];
        sd[j * K + c + 1] = dj[0];
      } else {
        *reinterpret_cast<double2*>(sd + j * K + c) = *reinterpret_cast<const double2*>(dj + c);
      }
    }
    for (int i = threadIdx.x; i < nt * cols; i += blockDim.x) {
      const int j = i / cols, e = col0 + i % cols;
      sv[i] = e < V ? a.v[a.layout.row(s, a.t0 + t + j) * V + e] : 0.0;
    }
    if (int(threadIdx.x) < nt) sb[threadIdx.x] = a.beta[a.layout.row(s, a.t0 + t + int(threadIdx.x))];
    __syncthreads();

    for (int j = 0; j < nt; ++j) {
      const double* kj = sk + j * K + 2 * r;
      const double* qj = sq + j * K + 2 * r;
      const double* dj = sd + j * K + 2 * r;
      // S = diag(e^g) S, then k^T S
      double c00 = 0.0, c01 = 0.0, c10 = 0.0, c11 = 0.0;  // chain of column x, parity p: cxp
#pragma unroll
      for (int i = 0; i < NI; ++i) {
        const double2 dd = *reinterpret_cast<const double2*>(dj + 16 * i);
        const double2 kk = *reinterpret_cast<const double2*>(kj + 16 * i);
        s0[2 * i] = __dmul_rn(s0[2 * i], dd.x);
        s0[2 * i + 1] = __dmul_rn(s0[2 * i + 1], dd.y);
        s1[2 * i] = __dmul_rn(s1[2 * i], dd.x);
        s1[2 * i + 1] = __dmul_rn(s1[2 * i + 1], dd.y);
        c00 = fma(kk.x, s0[2 * i], c00);
        c01 = fma(kk.y, s0[2 * i + 1], c01);
        c10 = fma(kk.x, s1[2 * i], c10);
        c11 = fma(kk.y, s1[2 * i + 1], c11);
      }
      const double dot_k = column_sum(__dadd_rn(c00, c01), __dadd_rn(c10, c11), kept);
      const double pred = __dmul_rn(sb[j], __dsub_rn(sv[j * cols + (e0 - col0) + kept], dot_k));
      const double pred_other = __shfl_xor_sync(kFull, pred, 4);
      const double p0 = kept ? pred_other : pred, p1 = kept ? pred : pred_other;
      // S += k pred^T, then q^T S
      c00 = c01 = c10 = c11 = 0.0;
#pragma unroll
      for (int i = 0; i < NI; ++i) {
        const double2 kk = *reinterpret_cast<const double2*>(kj + 16 * i);
        const double2 qq = *reinterpret_cast<const double2*>(qj + 16 * i);
        s0[2 * i] = fma(kk.x, p0, s0[2 * i]);
        s0[2 * i + 1] = fma(kk.y, p0, s0[2 * i + 1]);
        s1[2 * i] = fma(kk.x, p1, s1[2 * i]);
        s1[2 * i + 1] = fma(kk.y, p1, s1[2 * i + 1]);
        c00 = fma(qq.x, s0[2 * i], c00);
        c01 = fma(qq.y, s0[2 * i + 1], c01);
        c10 = fma(qq.x, s1[2 * i], c10);
        c11 = fma(qq.y, s1[2 * i + 1], c11);
      }
      const double dot_q = column_sum(__dadd_rn(c00, c01), __dadd_rn(c10, c11), kept);
      const int e = e0 + kept;
      if ((r & 3) == 0 && e < V) a.o[a.layout.row(s, a.t0 + t + j) * V + e] = __dmul_rn(a.scale, dot_q);
    }
  }

#pragma unroll
  for (int i = 0; i < NI; ++i)
#pragma unroll
    for (int p = 0; p < 2; ++p) {
      const size_t c = 16 * i + 2 * r + p;
      if (e0 < V) state[c * V + e0] = s0[2 * i + p];
      if (e0 + 1 < V) state[c * V + e0 + 1] = s1[2 * i + p];
    }
}

const void* kernel_of(int K) {
  switch (K) {
    case 16: return reinterpret_cast<const void*>(&recurrence_kernel<1>);
    case 32: return reinterpret_cast<const void*>(&recurrence_kernel<2>);
    case 64: return reinterpret_cast<const void*>(&recurrence_kernel<4>);
    default: return reinterpret_cast<const void*>(&recurrence_kernel<8>);
  }
}

// The decays of tokens [t0, t0 + count), then the recurrence over them, of
// every one of n sequences (q, k, g, beta, v, o in `layout`).
void launch(const double* q, const double* k, const double* g, const double* beta, const double* v, double* o,
            double* state, double* d, Layout layout, int n, int K, int V, int W, int t0, int count, double scale) {
  const size_t total = size_t(n) * count * W;
  decay_kernel<<<unsigned((total + 255) / 256), 256>>>(g, d, layout, t0, count, W, total);
  CUDA_CHECK_LAUNCH();
  const int warps = std::min(kMaxWarps, (V + kColumnsPerWarp - 1) / kColumnsPerWarp);
  const int cols = warps * kColumnsPerWarp;
  const dim3 grid(unsigned(n), unsigned((V + cols - 1) / cols));
  const size_t smem = (3 * size_t(kStageTokens) * K + size_t(kStageTokens) * cols + kStageTokens) * sizeof(double);
  const Args a{q, k, d, beta, v, o, state, layout, t0, count, V, W, scale};
  switch (K) {
    case 16: recurrence_kernel<1><<<grid, warps * 32, smem>>>(a); break;
    case 32: recurrence_kernel<2><<<grid, warps * 32, smem>>>(a); break;
    case 64: recurrence_kernel<4><<<grid, warps * 32, smem>>>(a); break;
    default: recurrence_kernel<8><<<grid, warps * 32, smem>>>(a); break;
  }
  CUDA_CHECK_LAUNCH();
}

void require(int K, int V) {
  if (const std::string why = recurrence_unsupported(K, V); !why.empty()) throw UsageError(why);
  if (const std::string why = unavailable_reason(); !why.empty()) throw UsageError("the GPU recurrence: no CUDA GPU: " + why);
}

void upload(DeviceBuffer<double>& b, const double* host, size_t n) {
  CUDA_CHECK(cudaMemcpy(b.get(n), host, n * sizeof(double), cudaMemcpyHostToDevice));
}

}  // namespace

struct DeviceRecurrence::Impl {
  int n = 0, K = 0, V = 0, W = 1;
  double scale = 0;
  DeviceBuffer<double> state, q, k, g, beta, v, o, d;
};

DeviceRecurrence::DeviceRecurrence(int sequences, int key_dim, int value_dim, bool channel_gates, double scale,
                                   const double* h0)
    : impl_(std::make_unique<Impl>()) {
  require(key_dim, value_dim);
  Impl& m = *impl_;
  m.n = sequences, m.K = key_dim, m.V = value_dim, m.W = channel_gates ? key_dim : 1, m.scale = scale;
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
         m.d.get(rows * m.W), Layout{count, 1}, m.n, m.K, m.V, m.W, 0, count, m.scale);
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
             t, std::min(block, p.tokens - t), p.scale);
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
  CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel_of(K)));
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
