// The chunked forward of docs/downstream.md on the GPU, bit for bit the
// CPU's ChunkedForward: both run downstream/forward_step.hpp's step, the CPU
// on one thread, the GPU a block a variant. One sequence's variants (each
// its own storage preset and inverses) advance together chunk by chunk; their
// states stay on the device, and each chunk's outputs and states come back
// (memory: K V a variant plus one chunk's inputs and outputs, never O(T)).
//
// Declared always; defined in gpu/chunked_forward.cu with CUDA, and by
// gpu/none.cpp (every call a UsageError) without.
#pragma once
#include <memory>
#include <vector>

#include "downstream/store_hd.hpp"

namespace chunkinv::gpu {

class DeviceChunkedForward {
 public:
  // `stores[v]`: variant v's rounding points; every state starts at h0 (K V
  // values, each rounded as its variant stores the state), or zero where h0
  // is null. `gate_width`: 1 (a gate a token) or K (a gate a channel).
  // UsageError without a usable GPU.
  DeviceChunkedForward(int chunk, int key_dim, int value_dim, int gate_width, double scale,
                       const std::vector<Stores>& stores, const double* h0);
  ~DeviceChunkedForward();
  DeviceChunkedForward(const DeviceChunkedForward&) = delete;
  DeviceChunkedForward& operator=(const DeviceChunkedForward&) = delete;
  // The next chunk: its rows q, k [C][K], v [C][V], g [C][W], beta [C], and
  // each variant's inverse [variants][C][C]; each variant's outputs into
  // o [variants][C][V] and its state after the chunk into states [variants][K][V].
  void advance(const double* q, const double* k, const double* v, const double* g, const double* beta,
               const double* inverses, double* o, double* states);
  // Every variant's state now, [variants][K][V]; and the states to go on
  // from (as carried: not rounded again), to step again from a checkpoint.
  void states(double* out) const;
  void set_states(const double* states);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace chunkinv::gpu
