// What every CUDA path's host side uses: device and pinned host buffers that
// outlive one run_batch (they only grow), event timers, and the split of a
// batch into runs of one shape.
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

#include "gpu/check.cuh"
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

// n values of host memory into b (grown to hold them), synchronously; b's device pointer.
template <class T>
T* upload(DeviceBuffer<T>& b, const T* host, size_t n) {
  T* p = b.get(n);
  CUDA_CHECK(cudaMemcpy(p, host, n * sizeof(T), cudaMemcpyHostToDevice));
  return p;
}

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

// Splits a batch into runs of one shape (chunk, dim) and calls
// run_group(first, count) on each; returns the summed timing.
template <class RunGroup>
BatchTiming run_by_shape(std::span<const Sample> samples, RunGroup&& run_group) {
  BatchTiming total;
  size_t i = 0;
  while (i < samples.size()) {
    size_t j = i + 1;
    while (j < samples.size() && samples[j].chunk == samples[i].chunk && samples[j].dim == samples[i].dim &&
           samples[j].gating == samples[i].gating)
      ++j;
    total += run_group(i, j - i);
    i = j;
  }
  return total;
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
