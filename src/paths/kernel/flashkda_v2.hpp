// The GPU form of method flashkda_v2 on the `kernel` path (flashkda_v2.cu):
// its buffers outlive one batch, as the path's own do. CUDA code only.
#pragma once
#include <span>

#include "gpu/buffers.cuh"
#include "paths/path.hpp"

namespace chunkinv::gpu {

class FlashkdaV2Runner {
 public:
  // out[i] receives flashkda_v2 on samples[i]: the FP32 L, its inverse, and
  // with gold the inverse of fp32(gold L).
  BatchTiming run(std::span<const Sample> samples, std::span<const GoldOutput> gold, std::span<PathOutput> out,
                  ThreadPool& pool);

 private:
  BatchTiming run_group(std::span<const Sample> samples, std::span<const GoldOutput> gold,
                        std::span<PathOutput> out, ThreadPool& pool);
  detail::EventTimer timer_;
  detail::PinnedBuffer<uint16_t> h_keys_, h_decay_, h_inv_decay_, h_inv_;
  detail::PinnedBuffer<double> h_g_;
  detail::PinnedBuffer<float> h_beta_, h_gold_, h_l_, h_dmax_, h_wmax_;
  detail::DeviceBuffer<uint16_t> d_keys_, d_beta16_, d_decay_, d_inv_decay_, d_inv_;
  detail::DeviceBuffer<double> d_g_;
  detail::DeviceBuffer<float> d_beta_, d_gold_, d_l_, d_dmax_, d_wmax_;
};

}  // namespace chunkinv::gpu
