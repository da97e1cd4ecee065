// The chunked backward of docs/downstream.md ("Backward") on the GPU, bit for
// bit the CPU's ChunkedBackward: both run downstream/backward_step.hpp's
// step, the CPU on one thread, the GPU a block a variant. One sequence's
// variants (each its own forward and backward presets, inverses and states)
// step back together chunk by chunk, the last chunk first; their state
// gradients stay on the device, and each chunk's gradient rows come back
// (memory: K V a variant plus one chunk's inputs, outputs and work space).
//
// Declared always; defined in gpu/chunked_backward.cu with CUDA, and by
// gpu/none.cpp (every call a UsageError) without.
#pragma once
#include <memory>
#include <vector>

#include "downstream/backward_step.hpp"
#include "downstream/store_hd.hpp"

namespace chunkinv::gpu {

// A chunk's rows, as the sequence holds them: q, k [C][K], v [C][V], g [C][W],
// beta [C] and the upstream gradient do [C][V].
struct ChunkRows {
  const double *q, *k, *v, *g, *beta, *d_o;
};

// Each variant's gradient rows of a chunk: dq, dk [variants][C][K], dv
// [variants][C][V], dg [variants][C][W], dbeta [variants][C].
struct GradientRows {
  double *dq, *dk, *dv, *dg, *dbeta;
};

class DeviceChunkedBackward {
 public:
  // Variant v: the forward's rounding points `forward[v]` (what the step
  // recomputes), the backward's `backward[v]`; its state gradient starts at
  // dht (K V values, rounded as the variant carries the state gradient) or
  // zero where dht is null. `gate_width`: 1 or K. UsageError without a usable GPU.
  DeviceChunkedBackward(int chunk, int key_dim, int value_dim, int gate_width, double scale,
                        const std::vector<Stores>& forward, const std::vector<backward_step::BackwardStores>& backward,
                        const double* dht);
  ~DeviceChunkedBackward();
  DeviceChunkedBackward(const DeviceChunkedBackward&) = delete;
  DeviceChunkedBackward& operator=(const DeviceChunkedBackward&) = delete;
  // The chunk before the last one stepped: its rows, each variant's A as the
  // backward reads it (inverses [variants][C][C]) and the state entering the
  // chunk as the forward carried it (states [variants][K][V]); the gradient
  // rows into `out`.
  void step(const ChunkRows& rows, const double* inverses, const double* states, const GradientRows& out);
  // Each variant's gradient of the state entering the last chunk stepped, [variants][K][V].
  void state_grad(double* ds) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace chunkinv::gpu
