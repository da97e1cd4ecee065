// Buffers that outlive one run_batch: device memory and pinned host memory
// that only grow, and the exact double of every BF16/FP16 bit pattern.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <algorithm>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "paths/kernel/cuda_check.cuh"
#include "paths/kernel/gpu_timing.hpp"
#include "paths/path.hpp"

namespace chunkinv::gpu::detail {

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { if (p_) cudaFree(p_); }
  T* get(size_t n) {  // at least n elements; contents undefined
    if (n > cap_) {
      if (p_) CUDA_CHECK(cudaFree(p_));
      p_ = nullptr;
      cap_ = 0;
      CUDA_CHECK(cudaMalloc(&p_, std::max<size_t>(n, 1) * sizeof(T)));
      cap_ = n;
    }
    return p_;
  }
  T* data() const { return p_; }

 private:
  T* p_ = nullptr;
  size_t cap_ = 0;
};

template <class T>
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() { if (p_) cudaFreeHost(p_); }
  T* get(size_t n) {
    if (n > cap_) {
      if (p_) CUDA_CHECK(cudaFreeHost(p_));
      p_ = nullptr;
      cap_ = 0;
      CUDA_CHECK(cudaMallocHost(&p_, std::max<size_t>(n, 1) * sizeof(T)));
      cap_ = n;
    }
    return p_;
  }

 private:
  T* p_ = nullptr;
  size_t cap_ = 0;
};

// Every 16-bit pattern's value (NaN patterns give NaN).
const std::vector<double>& bf16_values();
const std::vector<double>& fp16_values();
// BF16 bits of a double that holds a BF16 value exactly (the keys): its float's top half.
inline uint16_t exact_bf16_bits(double v) {
  const float f = static_cast<float>(v);
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>(u >> 16);
}

void record_timing(const std::string& path, const BatchTiming& t);

// Sample s's C decays and inverse decays from BF16 bit patterns, as exact doubles.
inline void unpack_decays(PathOutput& o, const uint16_t* decay, const uint16_t* inv_decay, size_t s, int C) {
  const std::vector<double>& bf = bf16_values();
  o.decay.resize(C);
  o.inv_decay.resize(C);
  for (int r = 0; r < C; ++r) {
    o.decay[r] = bf[decay[s * C + r]];
    o.inv_decay[r] = bf[inv_decay[s * C + r]];
  }
}

// A C x C matrix stored row-major as FP16 bit patterns, as exact doubles.
inline Mat fp16_matrix(const uint16_t* src, int C) {
  const std::vector<double>& hf = fp16_values();
  Mat m(C, C);
  for (int r = 0; r < C; ++r)
    for (int c = 0; c < C; ++c) m(r, c) = hf[src[r * C + c]];
  return m;
}

// Splits a batch into runs of one shape (chunk, dim), calls
// run_group(samples, gold, out) on each, and records the summed timing
// under `path`. gold may be empty.
template <class RunGroup>
void run_by_shape(const std::string& path, std::span<const Sample> samples, std::span<const GoldOutput> gold,
                  std::span<PathOutput> out, RunGroup&& run_group) {
  BatchTiming total;
  size_t i = 0;
  while (i < samples.size()) {
    size_t j = i + 1;
    while (j < samples.size() && samples[j].chunk == samples[i].chunk && samples[j].dim == samples[i].dim) ++j;
    const BatchTiming t =
        run_group(samples.subspan(i, j - i), gold.empty() ? gold : gold.subspan(i, j - i), out.subspan(i, j - i));
    total.upload_ms += t.upload_ms;
    total.compute_ms += t.compute_ms;
    total.download_ms += t.download_ms;
    total.host_ms += t.host_ms;
    i = j;
  }
  total.samples = long(samples.size());
  record_timing(path, total);
}

// Three events around upload, compute and download on one stream.
class EventTimer {
 public:
  EventTimer() { for (auto& e : ev_) CUDA_CHECK(cudaEventCreate(&e)); }
  ~EventTimer() { for (auto& e : ev_) cudaEventDestroy(e); }
  void mark(int i, cudaStream_t s) { CUDA_CHECK(cudaEventRecord(ev_[i], s)); }
  double ms(int from, int to) const {
    float m = 0;
    CUDA_CHECK(cudaEventElapsedTime(&m, ev_[from], ev_[to]));
    return m;
  }

 private:
  cudaEvent_t ev_[4]{};
};

inline double wall_ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace chunkinv::gpu::detail
