// The context a step's one source (downstream/forward_step.hpp,
// backward_step.hpp) runs in on the device: the block's threads, and
// __syncthreads between its stages.
#pragma once

namespace chunkinv::gpu::detail {

struct BlockContext {
  __device__ __forceinline__ int thread() const { return int(threadIdx.x); }
  __device__ __forceinline__ int threads() const { return int(blockDim.x); }
  __device__ __forceinline__ void sync() const { __syncthreads(); }
};

}  // namespace chunkinv::gpu::detail
