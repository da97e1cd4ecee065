// gpu/chunked_forward.hpp: downstream/forward_step.hpp's step, a block of
// 256 threads a variant, one launch a chunk.
#include "gpu/chunked_forward.hpp"

#include <string>

#include "core/error.hpp"
#include "downstream/forward_step.hpp"
#include "gpu/block_context.cuh"
#include "gpu/buffers.cuh"
#include "gpu/check.cuh"
#include "gpu/gpu.hpp"

namespace chunkinv::gpu {
namespace {

using detail::BlockContext;
using detail::DeviceBuffer;
using detail::upload;

constexpr int kThreads = 256;

struct Launch {
  const double *q, *k, *v, *g, *beta, *inverses;
  double *states, *o, *work;
  const Stores* stores;
  int C, K, V, W;
  double scale;
  size_t work_per_variant;
};

__global__ void __launch_bounds__(kThreads) chunk_step_kernel(const __grid_constant__ Launch l) {
  const size_t var = blockIdx.x;
  forward_step::Args a;
  a.q = l.q;
  a.k = l.k;
  a.v = l.v;
  a.g = l.g;
  a.beta = l.beta;
  a.inverse = l.inverses + var * l.C * l.C;
  a.state = l.states + var * l.K * l.V;
  a.o = l.o + var * l.C * l.V;
  a.work = l.work + var * l.work_per_variant;
  a.C = l.C;
  a.K = l.K;
  a.V = l.V;
  a.W = l.W;
  a.scale = l.scale;
  a.p = l.stores[var];
  BlockContext x;
  forward_step::step(a, x);
}


}  // namespace

struct DeviceChunkedForward::Impl {
  int n = 0, C = 0, K = 0, V = 0, W = 1;
  double scale = 0;
  DeviceBuffer<double> q, k, v, g, beta, inverses, states, o, work;
  DeviceBuffer<Stores> stores;
};

DeviceChunkedForward::DeviceChunkedForward(int chunk, int key_dim, int value_dim, int gate_width, double scale,
                                           const std::vector<Stores>& stores, const double* h0)
    : impl_(std::make_unique<Impl>()) {
  if (const std::string why = unavailable_reason(); !why.empty())
    throw UsageError("the GPU chunked forward: no CUDA GPU: " + why);
  Impl& m = *impl_;
  m.n = int(stores.size()), m.C = chunk, m.K = key_dim, m.V = value_dim, m.W = gate_width, m.scale = scale;
  const size_t kv = size_t(m.K) * m.V;
  std::vector<double> start(size_t(m.n) * kv, 0.0);
  for (int var = 0; var < m.n; ++var)
    for (size_t i = 0; h0 && i < kv; ++i) start[var * kv + i] = stored(h0[i], stores[var].state);
  upload(m.states, start.data(), start.size());
  upload(m.stores, stores.data(), stores.size());
  m.work.get(size_t(m.n) * forward_step::work_doubles(m.C, m.K, m.V, m.W));
}

DeviceChunkedForward::~DeviceChunkedForward() = default;

void DeviceChunkedForward::advance(const double* q, const double* k, const double* v, const double* g,
                                   const double* beta, const double* inverses, double* o, double* states) {
  Impl& m = *impl_;
  const size_t C = m.C, K = m.K, V = m.V, W = m.W, n = m.n;
  upload(m.q, q, C * K);
  upload(m.k, k, C * K);
  upload(m.v, v, C * V);
  upload(m.g, g, C * W);
  upload(m.beta, beta, C);
  upload(m.inverses, inverses, n * C * C);
  const Launch l{m.q.data(), m.k.data(), m.v.data(), m.g.data(), m.beta.data(), m.inverses.data(), m.states.data(),
                 m.o.get(n * C * V), m.work.data(), m.stores.data(), m.C, m.K, m.V, m.W, m.scale,
                 forward_step::work_doubles(m.C, m.K, m.V, m.W)};
  chunk_step_kernel<<<unsigned(n), kThreads>>>(l);
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaMemcpy(o, m.o.data(), n * C * V * sizeof(double), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(states, m.states.data(), n * K * V * sizeof(double), cudaMemcpyDeviceToHost));
}

void DeviceChunkedForward::states(double* out) const {
  const Impl& m = *impl_;
  CUDA_CHECK(cudaMemcpy(out, m.states.data(), size_t(m.n) * m.K * m.V * sizeof(double), cudaMemcpyDeviceToHost));
}

void DeviceChunkedForward::set_states(const double* states) {
  Impl& m = *impl_;
  upload(m.states, states, size_t(m.n) * m.K * m.V);
}

}  // namespace chunkinv::gpu
