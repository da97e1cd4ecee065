// DeviceSketch: the fold kernel (warp-aggregated atomics into a dense
// histogram and 128-bit sums per scale, the rest in registers), and the
// scan and gather kernels state() uses to download only the touched pages
// (metrics/device_sketch.hpp says what is kept and why).
#include "metrics/device_sketch.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "gpu/check.cuh"

namespace chunkinv {
namespace {

namespace ds = device_sketch;
using u64 = unsigned long long;  // what CUDA's 64-bit atomics take
static_assert(sizeof(u64) == sizeof(uint64_t));

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kBlocksPerSm = 4;       // resident at once (42 registers a thread): every metric's blocks read the same samples together
constexpr int kGatherPages = 2048;    // pages per gather into the staging buffer (2 MiB)
constexpr size_t kHistWords = size_t{2} * ds::kKeys;      // per metric
constexpr size_t kSumWords = size_t{2} * ds::kShifts * 2;  // per metric
// The kernel's neutral elements, spelled out there (device code reads no std::array).
static_assert(ds::kScalarInit[ds::kNan] == 0 && ds::kScalarInit[ds::kNegInf] == 0 && ds::kScalarInit[ds::kPosInf] == 0 &&
              ds::kScalarInit[ds::kZeros] == 0 && ds::kScalarInit[ds::kMinKey] == ~0ull &&
              ds::kScalarInit[ds::kMaxKey] == 0 && ds::kScalarInit[ds::kFirstPosZero] == ~0ull &&
              ds::kScalarInit[ds::kFirstNegZero] == ~0ull);

// (hi, lo) at p += a, exactly: lo wraps at most once per add, and every
// wrap is seen by the one add that made it.
__device__ void add_u128(u64* p, u64 a) {
  const u64 old = atomicAdd(p, a);
  if (old + a < old) atomicAdd(p + 1, 1ull);
}

// Which value of a sample's row each metric folds: of[m], or m where count is 0.
struct Columns {
  int count = 0;
  uint8_t of[DeviceSketch::kMaxColumns] = {};
};

// One block folds metric blockIdx.y of samples blockIdx.x * kThreads + k *
// gridDim.x * kThreads (k = 0, 1, ...). A warp takes 32 consecutive samples
// per step: lanes with the same bucket (or scale) vote, and the lowest adds
// for all of them.
__global__ void __launch_bounds__(kThreads) fold_kernel(const double* __restrict__ values, size_t n, int row,
                                                        Columns columns, u64 first_index, u64* hist, u64* sums,
                                                        u64* scalars) {
  const int m = blockIdx.y, column = columns.count ? columns.of[m] : m;
  u64* const h = hist + size_t(m) * kHistWords;
  u64* const sm = sums + size_t(m) * kSumWords;
  __shared__ u64 group[kWarps][32];
  __shared__ u64 partial[kWarps][ds::kScalars];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

  u64 nan = 0, neg_inf = 0, pos_inf = 0, zeros = 0;
  u64 min_key = ~0ull, max_key = 0;  // ds::kScalarInit
  u64 first_pos_zero = ~0ull, first_neg_zero = ~0ull;
  const size_t stride = size_t(gridDim.x) * kThreads;
  for (size_t base = size_t(blockIdx.x) * kThreads + size_t(warp) * 32; base < n; base += stride) {  // warp-uniform
    const size_t s = base + size_t(lane);
    int32_t bucket = -1, slot = -1;
    u64 sig = 0;
    if (s < n) {
      const uint64_t u = ds::bits_of(values[s * size_t(row) + size_t(column)]);
      const uint64_t a = u & ~ds::kSignBit;
      if (a > ds::kInfBits) {
        ++nan;
      } else {
        const u64 k = ds::ordered_key(u);
        min_key = min(min_key, k);
        max_key = max(max_key, k);
        if (a == ds::kInfBits) {
          if (u >> 63) ++neg_inf;
          else ++pos_inf;
        } else if (a == 0) {
          ++zeros;
          if (u >> 63) first_neg_zero = min(first_neg_zero, first_index + s);
          else first_pos_zero = min(first_pos_zero, first_index + s);
        } else {
          bucket = ds::bucket_index(u);
          slot = ds::sum_index(u);
          sig = ds::significand(a);
        }
      }
    }
    const unsigned same_bucket = __match_any_sync(0xFFFFFFFFu, bucket);
    if (bucket >= 0 && lane == __ffs(same_bucket) - 1) atomicAdd(&h[bucket], u64(__popc(same_bucket)));
    // Lanes of one bucket share its scale; a scale's group sums at most 32
    // significands below 2^53: below 2^58, one 64-bit add.
    const unsigned same_slot = __match_any_sync(0xFFFFFFFFu, slot);
    group[warp][lane] = sig;
    __syncwarp();
    if (slot >= 0 && lane == __ffs(same_slot) - 1) {
      u64 total = 0;
      for (unsigned g = same_slot; g; g &= g - 1) total += group[warp][__ffs(g) - 1];
      add_u128(&sm[2 * size_t(slot)], total);
    }
    __syncwarp();  // the group is read before the next step writes it
  }

  // The block's scalars: warp by shuffles, block through shared memory,
  // then one global atomic per scalar that moved.
  for (int off = 16; off > 0; off /= 2) {
    nan += __shfl_down_sync(0xFFFFFFFFu, nan, off);
    neg_inf += __shfl_down_sync(0xFFFFFFFFu, neg_inf, off);
    pos_inf += __shfl_down_sync(0xFFFFFFFFu, pos_inf, off);
    zeros += __shfl_down_sync(0xFFFFFFFFu, zeros, off);
    min_key = min(min_key, __shfl_down_sync(0xFFFFFFFFu, min_key, off));
    max_key = max(max_key, __shfl_down_sync(0xFFFFFFFFu, max_key, off));
    first_pos_zero = min(first_pos_zero, __shfl_down_sync(0xFFFFFFFFu, first_pos_zero, off));
    first_neg_zero = min(first_neg_zero, __shfl_down_sync(0xFFFFFFFFu, first_neg_zero, off));
  }
  if (lane == 0) {
    partial[warp][ds::kNan] = nan;
    partial[warp][ds::kNegInf] = neg_inf;
    partial[warp][ds::kPosInf] = pos_inf;
    partial[warp][ds::kZeros] = zeros;
    partial[warp][ds::kMinKey] = min_key;
    partial[warp][ds::kMaxKey] = max_key;
    partial[warp][ds::kFirstPosZero] = first_pos_zero;
    partial[warp][ds::kFirstNegZero] = first_neg_zero;
  }
  __syncthreads();
  const int t = threadIdx.x;
  if (t < ds::kScalars) {
    const bool smallest = t == ds::kMinKey || t == ds::kFirstPosZero || t == ds::kFirstNegZero;
    const u64 neutral = smallest ? ~0ull : 0;  // ds::kScalarInit[t]
    u64 v = partial[0][t];
    for (int w = 1; w < kWarps; ++w) {
      const u64 x = partial[w][t];
      v = smallest ? min(v, x) : t == ds::kMaxKey ? max(v, x) : v + x;
    }
    u64* const g = scalars + size_t(m) * ds::kScalars + t;
    if (v != neutral) {
      if (smallest) atomicMin(g, v);
      else if (t == ds::kMaxKey) atomicMax(g, v);
      else atomicAdd(g, v);
    }
  }
}

// flags[p] = whether page p of one metric's histogram (2 x kPages pages of
// kPageKeys counts) holds a count: a warp per page.
__global__ void __launch_bounds__(kThreads) scan_pages_kernel(const u64* __restrict__ hist, unsigned char* flags) {
  const int lane = threadIdx.x & 31;
  const size_t page = size_t(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (page >= size_t(2) * ds::kPages) return;  // whole warps leave together
  const u64* p = hist + page * ds::kPageKeys;
  u64 any = 0;
  for (int j = lane; j < ds::kPageKeys; j += 32) any |= p[j];
  const unsigned touched = __ballot_sync(0xFFFFFFFFu, any != 0);
  if (lane == 0) flags[page] = touched != 0;
}

// staging[i] = page pages[i] of one metric's histogram: a block per page.
__global__ void gather_pages_kernel(const u64* __restrict__ hist, const int32_t* __restrict__ pages, u64* staging) {
  const int32_t p = pages[blockIdx.x];
  for (int j = threadIdx.x; j < ds::kPageKeys; j += blockDim.x)
    staging[size_t(blockIdx.x) * ds::kPageKeys + j] = hist[size_t(p) * ds::kPageKeys + j];
}

template <class T>
T* device_alloc(size_t n) {
  void* p = nullptr;
  CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T)));
  return static_cast<T*>(p);
}

}  // namespace

struct DeviceSketch::Impl {
  int metrics = 0;
  int blocks_per_metric = 1;  // at most: the resident blocks shared by the metrics
  uint64_t count = 0;
  u64* hist = nullptr;       // metrics x 2 x kKeys
  u64* sums = nullptr;       // metrics x 2 x kShifts x (lo, hi)
  u64* scalars = nullptr;    // metrics x kScalars
  unsigned char* flags = nullptr;  // 2 x kPages: state()'s scan of one metric
  int32_t* pages = nullptr;        // 2 x kPages: the touched ones
  u64* staging = nullptr;          // kGatherPages x kPageKeys
  double* upload = nullptr;        // fold_host's values
  size_t upload_cap = 0;
  cudaStream_t own = nullptr;      // state(), reset(), fold_host()
  cudaEvent_t folded = nullptr;    // after the latest fold, on its stream

  ~Impl() {  // no throwing here: errors of a dying sketch are not reported
    for (void* p : {static_cast<void*>(hist), static_cast<void*>(sums), static_cast<void*>(scalars),
                    static_cast<void*>(flags), static_cast<void*>(pages), static_cast<void*>(staging),
                    static_cast<void*>(upload)})
      if (p) cudaFree(p);
    if (folded) cudaEventDestroy(folded);
    if (own) cudaStreamDestroy(own);
  }
  // `own` runs after the latest fold.
  void after_folds() const { CUDA_CHECK(cudaStreamWaitEvent(own, folded, 0)); }
};

DeviceSketch::DeviceSketch(int metrics) : impl_(std::make_unique<Impl>()) {
  if (metrics < 1 || metrics > 65535)
    throw UsageError("the device sketch: " + std::to_string(metrics) + " metrics; 1 to 65535 can be folded");
  Impl& d = *impl_;
  d.metrics = metrics;
  int device = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  d.blocks_per_metric = std::max(1, sms * kBlocksPerSm / metrics);
  CUDA_CHECK(cudaStreamCreateWithFlags(&d.own, cudaStreamNonBlocking));
  CUDA_CHECK(cudaEventCreateWithFlags(&d.folded, cudaEventDisableTiming));
  d.hist = device_alloc<u64>(size_t(metrics) * kHistWords);
  d.sums = device_alloc<u64>(size_t(metrics) * kSumWords);
  d.scalars = device_alloc<u64>(size_t(metrics) * ds::kScalars);
  d.flags = device_alloc<unsigned char>(size_t(2) * ds::kPages);
  d.pages = device_alloc<int32_t>(size_t(2) * ds::kPages);
  d.staging = device_alloc<u64>(size_t(kGatherPages) * ds::kPageKeys);
  reset();
}

DeviceSketch::~DeviceSketch() = default;

int DeviceSketch::metrics() const { return impl_->metrics; }
uint64_t DeviceSketch::count() const { return impl_->count; }

void DeviceSketch::fold(const double* d_values, size_t n, void* stream) {
  fold(d_values, n, stream, impl_->metrics, {});
}

void DeviceSketch::fold(const double* d_values, size_t n, void* stream, int stride, std::span<const int> columns) {
  Impl& d = *impl_;
  Columns cols;
  if (!columns.empty()) {
    if (columns.size() != size_t(d.metrics) || columns.size() > size_t(kMaxColumns))
      throw std::logic_error("DeviceSketch::fold: a column per metric, at most kMaxColumns");
    cols.count = int(columns.size());
    for (size_t m = 0; m < columns.size(); ++m) {
      if (columns[m] < 0 || columns[m] >= stride) throw std::logic_error("DeviceSketch::fold: a column outside the row");
      cols.of[m] = uint8_t(columns[m]);
    }
  } else if (stride < d.metrics) {
    throw std::logic_error("DeviceSketch::fold: rows shorter than the metrics");
  }
  if (n == 0) return;
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  const size_t blocks = std::min<size_t>((n + kThreads - 1) / kThreads, size_t(d.blocks_per_metric));
  fold_kernel<<<dim3(unsigned(blocks), unsigned(d.metrics)), kThreads, 0, s>>>(d_values, n, stride, cols, d.count,
                                                                              d.hist, d.sums, d.scalars);
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaEventRecord(d.folded, s));
  d.count += n;
}

void DeviceSketch::fold_host(const double* values, size_t n) {
  Impl& d = *impl_;
  if (n == 0) return;
  const size_t words = n * size_t(d.metrics);
  d.after_folds();
  CUDA_CHECK(cudaStreamSynchronize(d.own));  // the old upload buffer is no longer read
  if (words > d.upload_cap) {
    if (d.upload) CUDA_CHECK(cudaFree(d.upload));
    d.upload = nullptr;
    d.upload_cap = 0;
    d.upload = device_alloc<double>(words);
    d.upload_cap = words;
  }
  CUDA_CHECK(cudaMemcpyAsync(d.upload, values, words * sizeof(double), cudaMemcpyHostToDevice, d.own));
  fold(d.upload, n, d.own);
  CUDA_CHECK(cudaStreamSynchronize(d.own));
}

SketchState DeviceSketch::state(int m) const {
  const Impl& d = *impl_;
  if (m < 0 || m >= d.metrics)
    throw UsageError("the device sketch: metric " + std::to_string(m) + " of " + std::to_string(d.metrics));
  d.after_folds();
  ds::Image image;
  image.count = d.count;
  image.sums.resize(kSumWords);
  const u64* const hist = d.hist + size_t(m) * kHistWords;
  CUDA_CHECK(cudaMemcpyAsync(image.scalars.data(), d.scalars + size_t(m) * ds::kScalars, sizeof(image.scalars),
                             cudaMemcpyDeviceToHost, d.own));
  CUDA_CHECK(cudaMemcpyAsync(image.sums.data(), d.sums + size_t(m) * kSumWords, kSumWords * sizeof(u64),
                             cudaMemcpyDeviceToHost, d.own));
  const int pages = 2 * ds::kPages;
  scan_pages_kernel<<<(pages + kWarps - 1) / kWarps, kThreads, 0, d.own>>>(hist, d.flags);
  CUDA_CHECK_LAUNCH();
  std::vector<unsigned char> flags(pages);
  CUDA_CHECK(cudaMemcpyAsync(flags.data(), d.flags, flags.size(), cudaMemcpyDeviceToHost, d.own));
  CUDA_CHECK(cudaStreamSynchronize(d.own));
  for (int p = 0; p < pages; ++p)
    if (flags[p]) image.pages.push_back(p);
  const size_t touched = image.pages.size();
  image.page_counts.resize(touched * ds::kPageKeys);
  if (touched) {
    CUDA_CHECK(cudaMemcpyAsync(d.pages, image.pages.data(), touched * sizeof(int32_t), cudaMemcpyHostToDevice, d.own));
    for (size_t first = 0; first < touched; first += kGatherPages) {
      const size_t k = std::min<size_t>(kGatherPages, touched - first);
      gather_pages_kernel<<<unsigned(k), ds::kPageKeys, 0, d.own>>>(hist, d.pages + first, d.staging);
      CUDA_CHECK_LAUNCH();
      CUDA_CHECK(cudaMemcpyAsync(image.page_counts.data() + first * ds::kPageKeys, d.staging,
                                 k * ds::kPageKeys * sizeof(u64), cudaMemcpyDeviceToHost, d.own));
    }
    CUDA_CHECK(cudaStreamSynchronize(d.own));
  }
  return image.state();
}

void DeviceSketch::reset() {
  Impl& d = *impl_;
  d.after_folds();
  CUDA_CHECK(cudaMemsetAsync(d.hist, 0, size_t(d.metrics) * kHistWords * sizeof(u64), d.own));
  CUDA_CHECK(cudaMemsetAsync(d.sums, 0, size_t(d.metrics) * kSumWords * sizeof(u64), d.own));
  std::vector<uint64_t> init;
  for (int m = 0; m < d.metrics; ++m) init.insert(init.end(), ds::kScalarInit.begin(), ds::kScalarInit.end());
  CUDA_CHECK(cudaMemcpyAsync(d.scalars, init.data(), init.size() * sizeof(uint64_t), cudaMemcpyHostToDevice, d.own));
  CUDA_CHECK(cudaStreamSynchronize(d.own));  // folds on any stream come after it
  d.count = 0;
}

}  // namespace chunkinv
