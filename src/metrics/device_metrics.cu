// The gold and the metrics on the GPU: one block per sample runs the
// programs of metrics/device_metrics_blocks.hpp (the metrics: the fast
// program, then the full one on the samples the fast one leaves; the gold
// with the reference's fast program in its tail, the same way). Their CPU
// run is in tests/metrics/test_device_metrics.cpp beside the GPU tests.
// Eigen (through gpu/pack.hpp's core/matrix.hpp) calls constexpr host functions from host-device code.
#pragma nv_diag_suppress 20015
#include "metrics/device_metrics.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "gpu/check.cuh"
#include "metrics/device_metrics_blocks.hpp"

namespace chunkinv::gpu {
namespace {

using blocks::BlockFlags;

// A block of the GPU: each() is one phase then __syncthreads(); local state
// is the thread's own (registers).
struct DeviceBlock {
  int threads;

  template <class F>
  CHUNKINV_HD void each(F&& f) const {
#ifdef __CUDA_ARCH__
    f(int(threadIdx.x));
    __syncthreads();
#endif
  }
  template <class V>
  struct One {
    V v;
    CHUNKINV_HD V& operator[](int) { return v; }
  };
  template <class V>
  CHUNKINV_HD One<V> local() const {
    return {};
  }
  CHUNKINV_HD void set(int* p) const {
#ifdef __CUDA_ARCH__
    atomicOr(p, 1);
#endif
  }
  CHUNKINV_HD void set_bits(int* p, int v) const {
#ifdef __CUDA_ARCH__
    atomicOr(p, v);
#endif
  }
  CHUNKINV_HD void add(int* p, int v) const {
#ifdef __CUDA_ARCH__
    atomicAdd(p, v);
#endif
  }
  CHUNKINV_HD void max(unsigned long long* p, unsigned long long v) const {
#ifdef __CUDA_ARCH__
    atomicMax(p, v);
#endif
  }
};

struct Smem {
  BlockFlags* fl;
  double* sm;
};
__device__ inline Smem carve() {
  extern __shared__ __align__(16) unsigned char smem[];
  return {reinterpret_cast<BlockFlags*>(smem), reinterpret_cast<double*>(smem + blocks::kFlagsBytes)};
}

// The samples a fast program leaves: `Left` in device memory, from a zeroed
// count; a fast kernel's block appends its sample, and the full program's
// kernel runs a small grid over the list (order does not matter: each
// sample writes only its own values).
struct Left {
  int* flags;  // n: slow[s] of the fast programs
  int* count;  // 1
  int* list;   // n
};
__device__ inline void leave_if_slow(const Left& left, long s) {
  if (threadIdx.x == 0 && left.flags[s]) left.list[atomicAdd(left.count, 1)] = int(s);
}
constexpr int kSlowGrid = 1024;  // blocks of a full-program kernel: the left samples are few
// Calls f(s) for the block's share of the samples a Left lists (a grid-stride walk of its list).
template <class F>
__device__ void each_left(const Left& left, F&& f) {
  const int n = *left.count;
  for (int q = int(blockIdx.x); q < n; q += int(gridDim.x)) f(long(left.list[q]));
}

template <int kMaxTiles, bool kChannel, bool kColumns, bool kTensor>
__global__ void gold_kernel(GoldOnDevice a, Left left) {
  const Smem m = carve();
  const long s = long(blockIdx.x);
  blocks::gold_program<kMaxTiles, kChannel, kColumns, kTensor>(DeviceBlock{int(blockDim.x)}, a, s, m.sm, m.fl, left.flags);
  if (a.reference) leave_if_slow(left, s);
}

// At most 64 registers (eight blocks of 128 threads an SM): 72 had held
// the blocks of 64 threads (17 <= C <= 32) to 14 an SM, and 80 (the
// staged-gold instantiation) those of 32 (C <= 16) to 25; the
// stage went 3.78 -> 3.36 ns a sample at C = 16, 12.96 -> 12.44 at C = 32
// and 20.3 -> 19.4 at C = 64 (where shared memory holds seven blocks
// either way), no spills (docs/notes/gpu-notes.md, run 86).
// deferred: the samples whose inv_method_only the program leaves to
// method_kernel (blocks::fast_defers; flags and list null where it cannot).
template <bool kStaged, bool kTiles>
__global__ void __launch_bounds__(128, 8) metrics_fast_kernel(GoldRead g, PathOnDevice p, double* out, Left left,
                                                              Left deferred) {
  const Smem m = carve();
  const long s = long(blockIdx.x);
  blocks::metrics_fast_program<kStaged, kTiles>(DeviceBlock{int(blockDim.x)}, g, p, out, s, m.sm, m.fl, left.flags,
                                                deferred.flags);
  leave_if_slow(left, s);
  if (deferred.flags) leave_if_slow(deferred, s);
}

__global__ void method_kernel(GoldRead g, PathOnDevice p, double* out, Left deferred) {
  const Smem m = carve();
  each_left(deferred, [&](long s) { blocks::method_fast_program(DeviceBlock{int(blockDim.x)}, g, p, out, s, m.sm); });
}

template <bool kStaged>
__global__ void pair_fast_kernel(GoldRead g, PathOnDevice pk, PathOnDevice pg, double* out_k, double* out_g,
                                 Left left_k, Left left_g) {
  const Smem m = carve();
  const long s = long(blockIdx.x);
  blocks::pair_fast_program<kStaged>(DeviceBlock{int(blockDim.x)}, g, pk, pg, out_k, out_g, s, m.sm, m.fl,
                                     left_k.flags, left_g.flags);
  leave_if_slow(left_k, s);
  leave_if_slow(left_g, s);
}

__global__ void metrics_kernel(GoldRead g, PathOnDevice p, double* out, Left left) {
  const Smem m = carve();
  each_left(left, [&](long s) { blocks::metrics_program(DeviceBlock{int(blockDim.x)}, g, p, out, s, m.sm, m.fl); });
}

__global__ void reference_fast_kernel(GoldRead g, double* out, Left left) {
  const Smem m = carve();
  const long s = long(blockIdx.x);
  blocks::reference_fast_program(DeviceBlock{int(blockDim.x)}, g, out, s, m.sm, m.fl, left.flags);
  leave_if_slow(left, s);
}

__global__ void reference_kernel(GoldRead g, double* out, Left left) {
  const Smem m = carve();
  each_left(left, [&](long s) { blocks::reference_program(DeviceBlock{int(blockDim.x)}, g, out, s, m.sm, m.fl); });
}

// Dynamic shared memory beyond 48 KB needs the kernel's opt-in, given once
// per kernel and device (gpu/device.cu); from 32 KB on it is asked for too,
// for its preference of the largest carveout: where a few blocks an SM
// share it (the gold at C = 64: 44.9 KB a block, five in 228 KB), a smaller
// carveout would hold one block less.
template <class Kernel, class... Args>
void launch(Kernel kernel, int n, int threads, size_t smem, cudaStream_t stream, const Args&... args) {
  if (smem > 32 * 1024) detail::allow_optin_smem(reinterpret_cast<const void*>(kernel));
  kernel<<<n, threads, smem, stream>>>(args...);
  CUDA_CHECK_LAUNCH();
}

// Scratch for a Left, stream-ordered (the pool keeps it from call to call).
class LeftScratch {
 public:
  // n = 0: no list (flags and list null).
  LeftScratch(int n, cudaStream_t stream) : stream_(stream) {
    if (n == 0) return;
    CUDA_CHECK(cudaMallocAsync(&p_, (2 * size_t(n) + 1) * sizeof(int), stream));
    CUDA_CHECK(cudaMemsetAsync(p_, 0, sizeof(int), stream));
    left_ = {p_ + 1, p_, p_ + 1 + n};
  }
  ~LeftScratch() {
    if (p_) cudaFreeAsync(p_, stream_);
  }
  LeftScratch(const LeftScratch&) = delete;
  LeftScratch& operator=(const LeftScratch&) = delete;
  const Left& left() const { return left_; }

 private:
  cudaStream_t stream_;
  int* p_ = nullptr;
  Left left_{};
};

void check_chunk(const char* what, int C) {
  if (C < 2 || C > kMaxMetricsChunk)
    throw std::invalid_argument(std::string(what) + ": chunk " + std::to_string(C) + " outside 2.." +
                                std::to_string(kMaxMetricsChunk));
}

template <bool kChannel>
void launch_gold(const GoldOnDevice& a, const Left& left, cudaStream_t stream) {
  const int C = a.chunk, threads = blocks::block_threads(C);
  const size_t smem = blocks::kFlagsBytes + blocks::gold_smem_doubles(C, kChannel) * 8;
  if (!blocks::with_gold_shape(C, [&]<int kTiles, bool kColumns, bool kTensor>() {
        // Per-channel gates have no tensor-core form: one instantiation either way.
        launch(gold_kernel<kTiles, kChannel, kColumns, kTensor && !kChannel>, a.n, threads, smem, stream, a, left);
      }))
    throw std::logic_error("gold_on_device: a shape of pair tiles and X not instantiated");
}

}  // namespace

void gold_on_device(const GoldOnDevice& a, MetricsStream stream) {
  check_chunk("gold_on_device", a.chunk);
  if (a.dim < 0 || (a.gate_width != 1 && a.gate_width != a.dim))
    throw std::invalid_argument("gold_on_device: gate_width " + std::to_string(a.gate_width) +
                                " must be 1 or dim " + std::to_string(a.dim));
  if (a.n <= 0) return;
  if (!a.keys || !a.g || !a.beta || !a.gold_l || !a.gold_inv)
    throw std::invalid_argument("gold_on_device: a buffer is missing");
  const LeftScratch left(a.reference ? a.n : 0, stream);
  if (a.gate_width != 1) launch_gold<true>(a, left.left(), stream);
  else launch_gold<false>(a, left.left(), stream);
  if (!a.reference) return;
  const int C = a.chunk;
  launch(reference_kernel, std::min(a.n, kSlowGrid), blocks::block_threads(C),
         blocks::kFlagsBytes + blocks::reference_smem_doubles(C) * 8, stream, GoldRead{a.n, C, a.gold_l, a.gold_inv},
         a.reference, left.left());
}

void metrics_on_device(const GoldRead& g, const PathOnDevice& p, double* out, MetricsStream stream) {
  check_chunk("metrics_on_device", g.chunk);
  if (g.n <= 0) return;
  if (!g.gold_l || !g.gold_inv || !out || !p.inv || (!p.l_fp16 && !p.l_f64))
    throw std::invalid_argument("metrics_on_device: a buffer is missing");
  const int C = g.chunk, threads = blocks::block_threads(C);
  const bool defers = blocks::fast_defers(g, p);
  const LeftScratch left(g.n, stream), deferred(defers ? g.n : 0, stream);
  const size_t fast_smem =
      blocks::kFlagsBytes + blocks::fast_metrics_smem_doubles(C, blocks::fast_with_s1(g, p)) * 8;
  blocks::with_fast_metrics_shape(C, [&]<bool kStaged, bool kTiles>() {
    launch(metrics_fast_kernel<kStaged, kTiles>, g.n, threads, fast_smem, stream, g, p, out, left.left(),
           deferred.left());
  });
  // The deferred inv_method_only sums (a small grid over the list: none at all where no L is finite).
  if (defers)
    launch(method_kernel, std::min(g.n, kSlowGrid), threads, blocks::kFlagsBytes + blocks::method_smem_doubles(C) * 8,
           stream, g, p, out, deferred.left());
  launch(metrics_kernel, std::min(g.n, kSlowGrid), threads, blocks::kFlagsBytes + blocks::metrics_smem_doubles(C) * 8,
         stream, g, p, out, left.left());
}

void metrics_pair_on_device(const GoldRead& g, const PathOnDevice& pk, const PathOnDevice& pg, double* out_k,
                            double* out_g, MetricsStream stream) {
  check_chunk("metrics_pair_on_device", g.chunk);
  if (g.n <= 0) return;
  if (!g.gold_l || !g.gold_inv || !out_k || !out_g || !pk.inv || (!pk.l_fp16 && !pk.l_f64) || !pk.gold_l_inv)
    throw std::invalid_argument("metrics_pair_on_device: a buffer is missing");
  if (pk.l_f64 == g.gold_l || pg.l_f64 != g.gold_l || pg.inv != pk.gold_l_inv || pg.gold_l_inv != pk.gold_l_inv)
    throw std::invalid_argument("metrics_pair_on_device: the entries are not the kernel path's and the gold path's");
  const int C = g.chunk, threads = blocks::block_threads(C);
  const LeftScratch left_k(g.n, stream), left_g(g.n, stream);
  const size_t smem = blocks::kFlagsBytes + blocks::pair_metrics_smem_doubles(C) * 8;
  if (blocks::fast_stages_gold(C))
    launch(pair_fast_kernel<true>, g.n, threads, smem, stream, g, pk, pg, out_k, out_g, left_k.left(), left_g.left());
  else
    launch(pair_fast_kernel<false>, g.n, threads, smem, stream, g, pk, pg, out_k, out_g, left_k.left(), left_g.left());
  const size_t full = blocks::kFlagsBytes + blocks::metrics_smem_doubles(C) * 8;
  launch(metrics_kernel, std::min(g.n, kSlowGrid), threads, full, stream, g, pk, out_k, left_k.left());
  launch(metrics_kernel, std::min(g.n, kSlowGrid), threads, full, stream, g, pg, out_g, left_g.left());
}

void reference_metrics_on_device(const GoldRead& g, double* out, MetricsStream stream) {
  check_chunk("reference_metrics_on_device", g.chunk);
  if (g.n <= 0) return;
  if (!g.gold_l || !g.gold_inv || !out) throw std::invalid_argument("reference_metrics_on_device: a buffer is missing");
  const int C = g.chunk, threads = blocks::block_threads(C);
  const LeftScratch left(g.n, stream);
  launch(reference_fast_kernel, g.n, threads, blocks::kFlagsBytes + blocks::fast_reference_smem_doubles(C) * 8, stream,
         g, out, left.left());
  launch(reference_kernel, std::min(g.n, kSlowGrid), threads,
         blocks::kFlagsBytes + blocks::reference_smem_doubles(C) * 8, stream, g, out, left.left());
}

}  // namespace chunkinv::gpu
